// Client-side token bucket, one per credential, kept below the server's own limit so that the operator slows
// itself down before the cloud answers 429.
import { createHash } from "node:crypto";

export interface TokenBucketOptions {
  /** Sustained rate, tokens per second (> 0). */
  ratePerSec: number;
  /** Largest burst (>= 1); the bucket starts full. */
  burst: number;
  /** Injectable monotonic clock in ms (tests). */
  now?: () => number;
}

export class RateLimitAbortedError extends Error {
  override readonly name = "RateLimitAbortedError";
}

interface Waiter {
  resolve: () => void;
  reject: (error: Error) => void;
  signal: AbortSignal | undefined;
  onAbort: () => void;
}

export class TokenBucket {
  readonly ratePerSec: number;
  readonly burst: number;
  #tokens: number;
  #lastRefill: number;
  #now: () => number;
  #waiters: Waiter[] = [];
  #timer: NodeJS.Timeout | undefined;

  constructor(options: TokenBucketOptions) {
    if (!(options.ratePerSec > 0) || !Number.isFinite(options.ratePerSec)) {
      throw new RangeError(`ratePerSec must be a positive number, got ${options.ratePerSec}`);
    }
    if (!(options.burst >= 1) || !Number.isFinite(options.burst)) {
      throw new RangeError(`burst must be at least 1, got ${options.burst}`);
    }
    this.ratePerSec = options.ratePerSec;
    this.burst = options.burst;
    this.#now = options.now ?? (() => performance.now());
    this.#tokens = options.burst;
    this.#lastRefill = this.#now();
  }

  /** Tokens available right now (fractional). */
  available(): number {
    this.#refill();
    return this.#tokens;
  }

  /** Resolves when a token is taken; waiters are served first come, first served. */
  take(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortError(signal));
    this.#refill();
    if (this.#waiters.length === 0 && this.#tokens >= 1) {
      this.#tokens -= 1;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          this.#waiters = this.#waiters.filter((w) => w !== waiter);
          reject(abortError(signal));
        },
      };
      signal?.addEventListener("abort", waiter.onAbort, { once: true });
      this.#waiters.push(waiter);
      this.#schedule();
    });
  }

  #refill(): void {
    const now = this.#now();
    const elapsedSec = Math.max(0, now - this.#lastRefill) / 1000;
    this.#tokens = Math.min(this.burst, this.#tokens + elapsedSec * this.ratePerSec);
    this.#lastRefill = now;
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#waiters.length === 0) return;
    const missing = Math.max(0, 1 - this.#tokens);
    const waitMs = Math.ceil((missing / this.ratePerSec) * 1000);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#serve();
    }, waitMs);
    // A bucket must never keep the process alive on its own.
    this.#timer.unref();
  }

  #serve(): void {
    this.#refill();
    while (this.#waiters.length > 0 && this.#tokens >= 1) {
      const waiter = this.#waiters.shift();
      if (!waiter) break;
      this.#tokens -= 1;
      waiter.signal?.removeEventListener("abort", waiter.onAbort);
      waiter.resolve();
    }
    this.#schedule();
  }
}

function abortError(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new RateLimitAbortedError("aborted while waiting for a rate-limit token");
}

const sharedBuckets = new Map<string, TokenBucket>();

/**
 * The bucket of one credential, shared by every client made with it. The first caller's options win: a
 * credential has one budget whatever the number of clients.
 */
export function sharedBucketFor(credentialKey: string, options: TokenBucketOptions): TokenBucket {
  let bucket = sharedBuckets.get(credentialKey);
  if (!bucket) {
    bucket = new TokenBucket(options);
    sharedBuckets.set(credentialKey, bucket);
  }
  return bucket;
}

/** A stable, non-secret key for a credential: a short hash, so the secret itself is never a map key or label. */
export function credentialKeyOf(credentials: { apiKey: string } | { email: string }, baseUrl: string): string {
  const identity = "apiKey" in credentials ? `key:${credentials.apiKey}` : `user:${credentials.email.toLowerCase()}`;
  return createHash("sha256").update(`${baseUrl}\n${identity}`).digest("hex").slice(0, 16);
}
