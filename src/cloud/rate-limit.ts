// Client-side token bucket, one per credential (shared by every controller and client of the account), paced
// at the server's documented rate and adapting to what the server says: a 429 pauses every caller of the account
// until its Retry-After and lowers the rate (multiplicative decrease, at most once per second); accepted answers
// bring the rate back gradually (additive increase) up to the configured one. The last tenth of the burst is
// kept in hand: both sides count the same wall-clock seconds, and that headroom absorbs the jitter between when
// a request leaves and when the server counts it, so pacing at the server's own rate does not earn 429s.
// Once callers queue, the bucket lets them go in batches (what the rate grants in `batchWindowMs`, half a second
// by default) rather than one every 1/rate seconds: the rate is the same, but the work that follows each request
// (its answer, the status writes, their watch events) then happens together, after one wake-up instead of one
// per request (ADR 0016; the figures are in docs/scaling.md). Urgent callers are never held for a batch.
import { createHash } from "node:crypto";

export interface AdaptiveOptions {
  /** The rate never goes below this (requests per second, default 0.5). */
  minRatePerSec?: number;
  /** Requests per second regained per second of accepted answers (default: a tenth of ratePerSec). */
  recoveryPerSec?: number;
  /** The rate is multiplied by this on a 429 (default 0.75). */
  decreaseFactor?: number;
}

export interface TokenBucketOptions {
  /** Sustained rate, tokens per second (> 0); the ceiling when adaptive. */
  ratePerSec: number;
  /** Largest burst (>= 1); the bucket starts full. */
  burst: number;
  /** Tokens of the burst never spent (jitter headroom below a server of the same burst); default 0. */
  reserve?: number;
  /** Adapt the rate to 429 answers (see above); off when absent. */
  adaptive?: AdaptiveOptions;
  /**
   * Queued callers that are not urgent go in batches of what the rate grants in this window (at least one, at
   * most the burst): default 500 ms; 0 releases them one by one.
   */
  batchWindowMs?: number;
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

/** No more than one decrease per this long: the 429s of requests already in flight are one signal, not many. */
const DECREASE_SPACING_MS = 1000;

const DEFAULT_BATCH_WINDOW_MS = 500;

export class TokenBucket {
  /** The configured rate: the ceiling an adaptive bucket recovers to. */
  readonly ratePerSec: number;
  readonly burst: number;
  readonly #capacity: number;
  readonly #adaptive: Required<AdaptiveOptions> | undefined;
  readonly #batchWindowMs: number;
  #rate: number;
  #tokens: number;
  #lastRefill: number;
  #blockedUntil = 0;
  #lastDecrease = Number.NEGATIVE_INFINITY;
  #lastIncrease: number;
  #throttled = 0;
  #now: () => number;
  /** Waiting callers, first come first served; `urgent` ones (reads that finish work) before the others. */
  #urgent: Waiter[] = [];
  #waiters: Waiter[] = [];
  #timer: NodeJS.Timeout | undefined;

  constructor(options: TokenBucketOptions) {
    if (!(options.ratePerSec > 0) || !Number.isFinite(options.ratePerSec)) {
      throw new RangeError(`ratePerSec must be a positive number, got ${options.ratePerSec}`);
    }
    if (!(options.burst >= 1) || !Number.isFinite(options.burst)) {
      throw new RangeError(`burst must be at least 1, got ${options.burst}`);
    }
    const reserve = options.reserve ?? 0;
    if (!(reserve >= 0) || reserve > options.burst - 1) {
      throw new RangeError(`reserve must be between 0 and burst - 1, got ${reserve}`);
    }
    this.ratePerSec = options.ratePerSec;
    this.burst = options.burst;
    this.#capacity = options.burst - reserve;
    this.#adaptive =
      options.adaptive === undefined
        ? undefined
        : {
            minRatePerSec: Math.min(options.ratePerSec, options.adaptive.minRatePerSec ?? 0.5),
            recoveryPerSec: options.adaptive.recoveryPerSec ?? options.ratePerSec / 10,
            decreaseFactor: options.adaptive.decreaseFactor ?? 0.75,
          };
    const batchWindowMs = options.batchWindowMs ?? DEFAULT_BATCH_WINDOW_MS;
    if (!(batchWindowMs >= 0) || !Number.isFinite(batchWindowMs)) {
      throw new RangeError(`batchWindowMs must be 0 or more, got ${batchWindowMs}`);
    }
    this.#batchWindowMs = batchWindowMs;
    this.#rate = options.ratePerSec;
    this.#now = options.now ?? (() => performance.now());
    this.#tokens = this.#capacity;
    this.#lastRefill = this.#now();
    this.#lastIncrease = this.#lastRefill;
  }

  /** Tokens available right now (fractional). */
  available(): number {
    this.#refill();
    return this.#tokens;
  }

  /** The rate in force now (below ratePerSec after 429s, while recovering). */
  currentRate(): number {
    return this.#rate;
  }

  /** 429 answers seen. */
  get throttledCount(): number {
    return this.#throttled;
  }

  /**
   * Resolves when a token is taken; waiters are served first come, first served, `urgent` ones first: the reads
   * that finish work (an operation's poll, a settled resource's refresh) do not wait behind a backlog of creates.
   */
  take(signal?: AbortSignal, options: { urgent?: boolean } = {}): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortError(signal));
    this.#refill();
    const queued = this.#urgent.length + (options.urgent ? 0 : this.#waiters.length);
    if (queued === 0 && this.#tokens >= 1 && this.#now() >= this.#blockedUntil) {
      this.#tokens -= 1;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          this.#urgent = this.#urgent.filter((w) => w !== waiter);
          this.#waiters = this.#waiters.filter((w) => w !== waiter);
          reject(abortError(signal));
        },
      };
      signal?.addEventListener("abort", waiter.onAbort, { once: true });
      (options.urgent ? this.#urgent : this.#waiters).push(waiter);
      this.#schedule();
    });
  }

  /**
   * The server answered 429: nobody sends before its Retry-After has passed (when given), the tokens in hand
   * are dropped, and an adaptive bucket lowers its rate.
   */
  throttled(retryAfterMs?: number): void {
    this.#throttled++;
    const now = this.#now();
    this.#refill();
    this.#tokens = 0;
    if (retryAfterMs !== undefined && retryAfterMs > 0) {
      this.#blockedUntil = Math.max(this.#blockedUntil, now + retryAfterMs);
    }
    const adaptive = this.#adaptive;
    if (adaptive !== undefined && now - this.#lastDecrease >= DECREASE_SPACING_MS) {
      this.#rate = Math.max(adaptive.minRatePerSec, this.#rate * adaptive.decreaseFactor);
      this.#lastDecrease = now;
      this.#lastIncrease = now;
    }
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    this.#schedule();
  }

  /** The server took a request (any answer but 429): an adaptive bucket regains rate, up to ratePerSec. */
  accepted(): void {
    const adaptive = this.#adaptive;
    if (adaptive === undefined) return;
    const now = this.#now();
    if (this.#rate < this.ratePerSec) {
      this.#refill();
      const regained = (adaptive.recoveryPerSec * Math.max(0, now - this.#lastIncrease)) / 1000;
      this.#rate = Math.min(this.ratePerSec, this.#rate + regained);
    }
    this.#lastIncrease = now;
  }

  #refill(): void {
    const now = this.#now();
    const elapsedSec = Math.max(0, now - this.#lastRefill) / 1000;
    this.#tokens = Math.min(this.#capacity, this.#tokens + elapsedSec * this.#rate);
    this.#lastRefill = now;
  }

  /**
   * Tokens to gather before the waiting callers go: one when an urgent caller waits, else the batch (never more
   * than are waiting, nor than the bucket holds).
   */
  #wanted(): number {
    if (this.#urgent.length > 0) return 1;
    const batch = Math.floor((this.#rate * this.#batchWindowMs) / 1000);
    return Math.max(1, Math.min(this.#waiters.length, batch, Math.floor(this.#capacity)));
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#urgent.length + this.#waiters.length === 0) return;
    const missing = Math.max(0, this.#wanted() - this.#tokens);
    const blockedMs = Math.max(0, this.#blockedUntil - this.#now());
    const waitMs = Math.max(blockedMs, Math.ceil((missing / this.#rate) * 1000));
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#serve();
    }, waitMs);
    // A bucket must never keep the process alive on its own.
    this.#timer.unref();
  }

  #serve(): void {
    this.#refill();
    if (this.#now() >= this.#blockedUntil && this.#tokens >= this.#wanted()) {
      while (this.#urgent.length + this.#waiters.length > 0 && this.#tokens >= 1) {
        const waiter = this.#urgent.shift() ?? this.#waiters.shift();
        if (!waiter) break;
        this.#tokens -= 1;
        waiter.signal?.removeEventListener("abort", waiter.onAbort);
        waiter.resolve();
      }
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
