// One bulkhead per cloud account (credential + API URL): the one place where per-account limits live. It holds
// the account's token bucket, admits reconciles per lane (one lane per controller) up to a concurrency limit, and
// runs a circuit breaker over the outcomes of the account's HTTP attempts. A slow or dead account therefore only
// delays its own objects: while it is new, failing or slow it may occupy one worker per controller; while its
// circuit is open, none (its reconciles fail at once and requeue, its requests fail without being sent).
// Pure bookkeeping: no I/O, an injectable clock. See docs/adr/0010-tenant-isolation.md.
import { CloudError } from "./errors.ts";
import { TokenBucket, type TokenBucketOptions } from "./rate-limit.ts";

export interface BulkheadOptions {
  /** Reconciles of one lane (controller) that may talk to the account at once while it is healthy (>= 1). */
  laneLimit: number;
  /** Consecutive failed attempts (no answer, timeout, 5xx, oversized or non-JSON body) that open the circuit. */
  failureThreshold: number;
  /** First open period; doubles at each failed probe up to maxOpenMs. */
  openMs: number;
  maxOpenMs: number;
  /** An attempt in flight for longer than this makes the account "slow": one reconcile per lane until it ends. */
  slowMs: number;
  /** The account's request budget; undefined: none. */
  rateLimit: TokenBucketOptions | undefined;
  now?: () => number;
}

export const DEFAULT_BULKHEAD: Omit<BulkheadOptions, "laneLimit" | "rateLimit" | "now"> = {
  failureThreshold: 5,
  openMs: 5_000,
  maxOpenMs: 30_000,
  slowMs: 2_000,
};

export type AccountHealth = "healthy" | "degraded" | "open";

/** What an HTTP attempt told about the account's server. `neutral`: nothing (the caller aborted). */
export type AttemptOutcome = "success" | "failure" | "neutral";

export interface AttemptHandle {
  /** Idempotent: the first call counts. */
  end(outcome: AttemptOutcome): void;
}

export type Admission = { ok: true; release(): void } | { ok: false; error: CloudError };

export interface BulkheadReport {
  health: AccountHealth;
  inFlightAttempts: number;
  admitted: Record<string, number>;
  consecutiveFailures: number;
  /** Milliseconds until a probe may go through; 0 when closed. */
  openForMs: number;
  refusedReconciles: number;
  refusedAttempts: number;
}

export class AccountBulkhead {
  readonly rateLimiter: TokenBucket | undefined;
  readonly #options: Required<Omit<BulkheadOptions, "rateLimit">>;
  readonly #lanes = new Map<string, number>();
  readonly #attempts = new Set<{ startedAt: number }>();
  #consecutiveFailures = 0;
  /** At least one attempt succeeded since the account was created or its circuit last opened. */
  #proven = false;
  #openUntil: number | undefined;
  #nextOpenMs: number;
  #probeInFlight = false;
  #refusedReconciles = 0;
  #refusedAttempts = 0;

  constructor(options: BulkheadOptions) {
    if (!Number.isInteger(options.laneLimit) || options.laneLimit < 1) {
      throw new RangeError(`laneLimit must be a positive integer, got ${options.laneLimit}`);
    }
    this.#options = { ...options, now: options.now ?? (() => performance.now()) };
    this.#nextOpenMs = options.openMs;
    this.rateLimiter = options.rateLimit === undefined ? undefined : new TokenBucket(options.rateLimit);
  }

  get laneLimit(): number {
    return this.#options.laneLimit;
  }

  health(): AccountHealth {
    const now = this.#options.now();
    if (this.#openUntil !== undefined && now < this.#openUntil) return "open";
    if (this.#openUntil !== undefined || !this.#proven) return "degraded";
    // One failed attempt among many is noise (a 5xx now and then); a run of them is not.
    if (this.#consecutiveFailures >= Math.ceil(this.#options.failureThreshold / 2)) return "degraded";
    for (const attempt of this.#attempts) if (now - attempt.startedAt > this.#options.slowMs) return "degraded";
    return "healthy";
  }

  /**
   * Admit one reconcile of `lane`. Refused without waiting when the lane is at its limit (the reconcile requeues
   * instead of occupying a worker; after `busyRetryAfterMs`, default 200 ms, 1 s while slow or failing: the
   * caller may wake it sooner itself) or while the circuit is open. `reserved` slots of the lane are held back for
   * other reconciles (those the caller promised them to), as if taken.
   */
  admit(lane: string, busyRetryAfterMs?: number, reserved = 0): Admission {
    const health = this.health();
    if (health === "open") {
      this.#refusedReconciles++;
      return { ok: false, error: this.#openError("reconcile", lane) };
    }
    const limit = health === "healthy" ? this.#options.laneLimit : 1;
    const used = this.#lanes.get(lane) ?? 0;
    if (used + reserved >= limit) {
      this.#refusedReconciles++;
      return {
        ok: false,
        error: new CloudError({
          kind: "network",
          code: "account_busy",
          retryable: true,
          method: "RECONCILE",
          route: lane,
          retryAfterMs: busyRetryAfterMs ?? (health === "healthy" ? 200 : 1_000),
          message: `the cloud account is busy (${used} of ${limit} ${health === "healthy" ? "" : "while slow or failing "}reconciles of ${lane} running${reserved > 0 ? `, ${reserved} promised to waiting ones` : ""})`,
        }),
      };
    }
    this.#lanes.set(lane, used + 1);
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        const left = (this.#lanes.get(lane) ?? 1) - 1;
        if (left <= 0) this.#lanes.delete(lane);
        else this.#lanes.set(lane, left);
      },
    };
  }

  /** Reconciles of `lane` that would be admitted now (0 while the circuit is open). */
  freeSlots(lane: string): number {
    const health = this.health();
    if (health === "open") return 0;
    const limit = health === "healthy" ? this.#options.laneLimit : 1;
    return Math.max(0, limit - (this.#lanes.get(lane) ?? 0));
  }

  /**
   * Called before each HTTP attempt: a CloudError to throw instead of sending while the circuit is open (after the
   * open period, one attempt goes through as the probe), else a handle to report the attempt's outcome.
   */
  startAttempt(method: string, route: string): AttemptHandle | CloudError {
    const now = this.#options.now();
    let probe = false;
    if (this.#openUntil !== undefined) {
      if (now < this.#openUntil || this.#probeInFlight) {
        this.#refusedAttempts++;
        return this.#openError(method, route);
      }
      probe = true;
      this.#probeInFlight = true;
    }
    const attempt = { startedAt: now };
    this.#attempts.add(attempt);
    let ended = false;
    return {
      end: (outcome) => {
        if (ended) return;
        ended = true;
        this.#attempts.delete(attempt);
        if (probe) this.#probeInFlight = false;
        this.#record(outcome, probe);
      },
    };
  }

  report(): BulkheadReport {
    const now = this.#options.now();
    return {
      health: this.health(),
      inFlightAttempts: this.#attempts.size,
      admitted: Object.fromEntries(this.#lanes),
      consecutiveFailures: this.#consecutiveFailures,
      openForMs: this.#openUntil === undefined ? 0 : Math.max(0, this.#openUntil - now),
      refusedReconciles: this.#refusedReconciles,
      refusedAttempts: this.#refusedAttempts,
    };
  }

  #record(outcome: AttemptOutcome, probe: boolean): void {
    if (outcome === "neutral") return;
    if (outcome === "success") {
      this.#consecutiveFailures = 0;
      this.#proven = true;
      this.#openUntil = undefined;
      this.#nextOpenMs = this.#options.openMs;
      return;
    }
    this.#consecutiveFailures++;
    if (probe || this.#consecutiveFailures >= this.#options.failureThreshold) {
      this.#proven = false;
      this.#openUntil = this.#options.now() + this.#nextOpenMs;
      this.#nextOpenMs = Math.min(this.#options.maxOpenMs, this.#nextOpenMs * 2);
    }
  }

  #openError(method: string, route: string): CloudError {
    const waitMs = Math.max(0, (this.#openUntil ?? 0) - this.#options.now());
    return new CloudError({
      kind: "network",
      code: "circuit_open",
      retryable: true,
      method,
      route,
      retryAfterMs: Math.max(waitMs, 250),
      message: `the cloud API of this account failed ${this.#consecutiveFailures} times in a row (no answer, timeouts or server errors): requests are paused, next try in ${Math.ceil(Math.max(waitMs, 250) / 1000)} s`,
    });
  }
}

const sharedBulkheads = new Map<string, AccountBulkhead>();

/**
 * The bulkhead of one account, shared by every client made for it (a rotated Secret with the same credential and
 * URL keeps its history). The first caller's options win.
 */
export function sharedBulkheadFor(accountKey: string, options: BulkheadOptions): AccountBulkhead {
  let bulkhead = sharedBulkheads.get(accountKey);
  if (bulkhead === undefined) {
    bulkhead = new AccountBulkhead(options);
    sharedBulkheads.set(accountKey, bulkhead);
  }
  return bulkhead;
}
