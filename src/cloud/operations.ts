// Follows cloud operations to their end with few list calls, whatever the number tracked.
//
// A round lists the operations of the (project, family) started since the earliest one tracked
// (`lower_time_bound`, no state): one call shows which are still IN_PROGRESS and how the others ended. When that
// bound reaches too far back (an operation tracked for long, or known only by the local time it was tracked), the
// round lists `state=IN_PROGRESS` instead, and settles the tracked operations absent from it with one more list
// bounded by the earliest start among them. Only those missing from every list (a real server may drop finished
// operations from lists) are read once by id. SUCCEEDED/FAILED settle an operation; 403/404 on the read (old or
// unknown id, as real servers answer) settle it as `{ vanished: true, reason: "gone" }`, and the caller reads the
// resource itself. A server that refuses `lower_time_bound` (400 or unsupported) gets single reads from then on.
//
// Rounds are spent when they can settle something, not at every interval (operation-rounds.ts): while
// operations keep being started, one per OPERATIONS_PER_ROUND of them, so a burst's polls are a fixed share of its
// creates, whatever its pace; a lone operation is looked at every interval.
//
// A server without the family's list endpoint gets ONE single read per tick (the operation read longest ago);
// without the read endpoint either, every tracked operation settles at once as
// `{ vanished: true, reason: "unsupported" }`: the caller follows the resource instead, and nothing is polled
// (the client's capability registry answers those calls locally until its rare re-probe). Failing ticks back
// off: the interval doubles per failure up to `maxBackoffMs`, and one success restores it.
import pino, { type Logger } from "pino";
import type { CallOptions } from "./endpoints/shared.ts";
import { isCloudError, isOperationGone, isUnsupported } from "./errors.ts";
import { RoundSchedule } from "./operation-rounds.ts";
import { formatTimestamp, type ListOperationsQuery, type Operation, type OperationFamily } from "./wire.ts";

/** The part of the client the tracker needs (keeps tests and fakes small). */
export interface OperationsApi {
  list(
    projectId: string,
    family: OperationFamily,
    query?: ListOperationsQuery,
    opts?: CallOptions,
  ): Promise<Operation[]>;
  get(projectId: string, family: OperationFamily, operationId: string, opts?: CallOptions): Promise<Operation>;
}

export type OperationOutcome =
  | {
      operationId: string;
      vanished: false;
      operation: Operation;
      /** When the call that showed it final started (local ms): it was over by then. */
      observedAt: number;
    }
  | {
      operationId: string;
      vanished: true;
      /** `gone`: the server no longer knows the id (403/404); `unsupported`: it cannot show this family's operations. */
      reason: "gone" | "unsupported";
    };

export interface TrackerTimers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface OperationTrackerOptions {
  client: { operations: OperationsApi };
  projectId: string;
  family: OperationFamily;
  /** Time between list calls while anything is tracked; default 2000 ms. */
  intervalMs?: number;
  /**
   * `batched` (default): one list per interval settles every tracked operation. `per-operation`: every tracked
   * operation is read on its own once per interval (how the Terraform provider polls; kept for comparison).
   */
  mode?: "batched" | "per-operation";
  /** The longest interval while polling keeps failing (doubling from intervalMs); default 60 s. */
  maxBackoffMs?: number;
  timers?: TrackerTimers;
  /** The local clock (ms), for when rounds are due (tests). */
  now?: () => number;
  logger?: Logger;
}

export class TrackerStoppedError extends Error {
  override readonly name = "TrackerStoppedError";
}

const FINAL_STATES: ReadonlySet<string> = new Set(["SUCCEEDED", "FAILED", "CANCELLED", "CANCELED"]);

export function isFinalOperation(operation: Operation): boolean {
  return FINAL_STATES.has(operation.state.trim().toUpperCase());
}

/**
 * Subtracted from the earliest start for `lower_time_bound`. A `started_at` the server gave (in the create's
 * answer, in the in-progress list) only needs its seconds precision covered; a local time of tracking may be off
 * by the clocks' skew. The bound decides how much each settling list carries: with 60 s for every operation, a
 * burst at 20 creates/s listed the last 1,200 operations (each with its request and its resource) every 2 s.
 */
const SERVER_START_MARGIN_MS = 2_000;
const LOCAL_START_MARGIN_MS = 60_000;
/**
 * How far back one list (`lower_time_bound`, no state) may reach to settle a round in one call: it carries every
 * operation started since, at a burst's 20 creates/s a few hundred at most. Further back, the in-progress list
 * (what runs now) and a list bounded by the earliest finished one are smaller.
 */
const ONE_LIST_REACH_MS = 15_000;
function parseTimestamp(timestamp: string | undefined): number | undefined {
  const ms = timestamp ? Date.parse(timestamp) : Number.NaN;
  return Number.isNaN(ms) ? undefined : ms;
}

interface Pending {
  /** `started_at` of the operation when seen (ms), else the local time it was tracked (an upper bound). */
  startedAtMs: number;
  /** startedAtMs is the server's `started_at` (not the local clock): the bound needs a margin of seconds only. */
  startedAtFromServer: boolean;
  /** When it was last read by id (single-read mode picks the one read longest ago). */
  lastReadAt: number;
  promise: Promise<OperationOutcome>;
  resolve: (outcome: OperationOutcome) => void;
  reject: (error: Error) => void;
}

const realTimers: TrackerTimers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export class OperationTracker {
  readonly projectId: string;
  readonly family: OperationFamily;
  readonly #operations: OperationsApi;
  readonly #intervalMs: number;
  readonly #perOperation: boolean;
  readonly #maxBackoffMs: number;
  readonly #timers: TrackerTimers;
  readonly #logger: Logger;
  readonly #pending = new Map<string, Pending>();
  readonly #listeners = new Set<(outcome: OperationOutcome) => void>();
  readonly #now: () => number;
  #timer: unknown;
  #ticking = false;
  readonly #rounds: RoundSchedule;
  #stopped = false;
  /** Set for good once the server refuses `lower_time_bound` (400 or unsupported): single reads only. */
  #lowerTimeBoundRefused = false;
  /** Ticks failed in a row: the next one waits intervalMs × 2^failures (capped). */
  #failures = 0;

  constructor(options: OperationTrackerOptions) {
    const intervalMs = options.intervalMs ?? 2000;
    if (!(intervalMs > 0)) throw new RangeError(`intervalMs must be positive, got ${intervalMs}`);
    this.projectId = options.projectId;
    this.family = options.family;
    this.#operations = options.client.operations;
    this.#intervalMs = intervalMs;
    this.#perOperation = options.mode === "per-operation";
    this.#maxBackoffMs = Math.max(intervalMs, options.maxBackoffMs ?? 60_000);
    this.#rounds = new RoundSchedule(intervalMs);
    this.#timers = options.timers ?? realTimers;
    this.#now = options.now ?? Date.now;
    this.#logger = (options.logger ?? pino({ level: "silent" })).child({
      component: "operation-tracker",
      projectId: options.projectId,
      family: options.family,
    });
  }

  /**
   * Promise of the outcome of an operation. Pass the Operation a create/change call returned to settle a
   * finished one at once. Tracking the same id twice shares one promise. The promise is pre-handled, so
   * not awaiting it (relying on onSettled) never causes an unhandled rejection after stop(). With an id alone,
   * `startedAt` is its `started_at` as the server gave it, when known (status keeps it): the settling list then
   * reaches back seconds before it, not a minute.
   */
  track(operation: string | Operation, startedAt?: string): Promise<OperationOutcome> {
    if (this.#stopped) return Promise.reject(new TrackerStoppedError("operation tracker is stopped"));
    const operationId = typeof operation === "string" ? operation : operation.operation_id;
    if (!operationId) return Promise.reject(new TypeError("operation id must be a non-empty string"));
    const existing = this.#pending.get(operationId);
    if (existing) return existing.promise;

    let resolve: (outcome: OperationOutcome) => void = () => {};
    let reject: (error: Error) => void = () => {};
    const promise = new Promise<OperationOutcome>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    promise.catch(() => {});
    const serverStart = parseTimestamp(typeof operation === "string" ? startedAt : operation.started_at);
    const now = this.#now();
    this.#pending.set(operationId, {
      startedAtMs: serverStart ?? now,
      startedAtFromServer: serverStart !== undefined,
      lastReadAt: 0,
      promise,
      resolve,
      reject,
    });
    if (typeof operation !== "string" && isFinalOperation(operation)) {
      this.#settle({ operationId, vanished: false, operation, observedAt: now });
    } else {
      this.#noteTracked(now);
    }
    return promise;
  }

  /** Called once per settled operation; returns a function that unsubscribes. */
  onSettled(listener: (outcome: OperationOutcome) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  inFlight(): number {
    return this.#pending.size;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /** Stop polling; operations still tracked reject with TrackerStoppedError. */
  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer);
    this.#timer = undefined;
    for (const [operationId, pending] of this.#pending) {
      pending.reject(new TrackerStoppedError(`stopped while tracking operation ${operationId}`));
    }
    this.#pending.clear();
  }

  /** Run one polling round now, whether or not one is due (the timer runs rounds when they are). */
  async poll(): Promise<void> {
    if (this.#ticking || this.#stopped || this.#pending.size === 0) return;
    // A round run by hand replaces the scheduled one: still one list call per interval.
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#ticking = true;
    this.#rounds.roundStarted();
    try {
      await this.#round();
    } finally {
      this.#ticking = false;
      this.#rounds.roundEnded(this.#now());
      this.#schedule();
    }
  }

  /** The wait before the next tick: the interval, doubled per failed tick in a row. */
  get currentIntervalMs(): number {
    return Math.min(this.#maxBackoffMs, this.#intervalMs * 2 ** Math.min(this.#failures, 16));
  }

  /** A new operation to follow: the next round is due at another time (sooner once a batch is complete). */
  #noteTracked(now: number): void {
    this.#rounds.tracked(now);
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#schedule();
  }

  #nextRoundAt(): number {
    return this.#rounds.nextRoundAt(this.currentIntervalMs, !this.#perOperation && this.#failures === 0);
  }

  #schedule(): void {
    if (this.#stopped || this.#ticking || this.#timer !== undefined || this.#pending.size === 0) return;
    // Only a newly tracked operation moves the round later, and it sets the timer again (#noteTracked).
    this.#timer = this.#timers.setTimeout(
      () => {
        this.#timer = undefined;
        this.poll().catch((error: unknown) => this.#logger.error({ err: error }, "operation polling round failed"));
      },
      Math.max(0, this.#nextRoundAt() - this.#now()),
    );
  }

  /** One tick; a failed one makes the next wait longer. */
  async #round(): Promise<void> {
    const failed = await this.#tick();
    this.#failures = failed ? this.#failures + 1 : 0;
    if (failed) this.#logger.debug({ nextTickMs: this.currentIntervalMs }, "operation polling backs off");
  }

  /** Returns true when the tick failed (transient error: everything stays tracked). */
  async #tick(): Promise<boolean> {
    if (this.#perOperation) {
      const reads = await Promise.all([...this.#pending.keys()].map((operationId) => this.#readOnce(operationId)));
      return reads.includes("failed");
    }
    const tracked = [...this.#pending.keys()];
    if (!this.#lowerTimeBoundRefused) {
      const boundMs = this.#boundOf(tracked);
      if (boundMs !== undefined && this.#now() - boundMs <= ONE_LIST_REACH_MS) {
        const missing = await this.#settleFromList(tracked, boundMs);
        if (missing === undefined) return true;
        if (!this.#lowerTimeBoundRefused) return this.#readEach(missing);
      }
    }
    let inProgress: Set<string> | undefined;
    try {
      const listed = await this.#operations.list(this.projectId, this.family, { state: "IN_PROGRESS" });
      inProgress = new Set();
      for (const op of listed) {
        if (isFinalOperation(op)) continue;
        inProgress.add(op.operation_id);
        this.#learnStart(op);
      }
    } catch (error) {
      if (!isUnsupported(error)) {
        this.#logger.warn({ err: error }, "listing operations in progress failed; backing off");
        return true;
      }
      // No list endpoint on this server: one single read per tick.
      return this.#readLeastRecent();
    }
    let finishedOrGone = [...this.#pending.keys()].filter((operationId) => !inProgress?.has(operationId));
    if (finishedOrGone.length === 0) return false;
    if (!this.#lowerTimeBoundRefused) {
      const boundMs = this.#boundOf(finishedOrGone);
      const missing = boundMs === undefined ? finishedOrGone : await this.#settleFromList(finishedOrGone, boundMs);
      if (missing === undefined) return true;
      finishedOrGone = missing;
    }
    return this.#readEach(finishedOrGone);
  }

  /** Read each operation by id (those no list showed); true when a read failed transiently. */
  async #readEach(operationIds: readonly string[]): Promise<boolean> {
    let failed = false;
    for (const operationId of operationIds) {
      if (this.#stopped) break;
      if (!this.#pending.has(operationId)) continue;
      if ((await this.#readOnce(operationId)) === "failed") failed = true;
    }
    return failed;
  }

  /** The real start of an operation tracked by id, learnt from a list: it bounds the lists that settle it. */
  #learnStart(op: Operation): void {
    const pending = this.#pending.get(op.operation_id);
    const startedAtMs = parseTimestamp(op.started_at);
    if (pending !== undefined && startedAtMs !== undefined) {
      pending.startedAtMs = startedAtMs;
      pending.startedAtFromServer = true;
    }
  }

  /** The `lower_time_bound` (ms) that reaches every one of these operations, with its clock's margin. */
  #boundOf(operationIds: readonly string[]): number | undefined {
    let boundMs = Number.POSITIVE_INFINITY;
    for (const operationId of operationIds) {
      const pending = this.#pending.get(operationId);
      if (pending === undefined) continue;
      const margin = pending.startedAtFromServer ? SERVER_START_MARGIN_MS : LOCAL_START_MARGIN_MS;
      boundMs = Math.min(boundMs, pending.startedAtMs - margin);
    }
    return Number.isFinite(boundMs) ? boundMs : undefined;
  }

  /** Without a list: read the operation read longest ago; without reads either, give every one up. */
  async #readLeastRecent(): Promise<boolean> {
    let oldest: [string, Pending] | undefined;
    for (const entry of this.#pending)
      if (oldest === undefined || entry[1].lastReadAt < oldest[1].lastReadAt) oldest = entry;
    if (oldest === undefined) return false;
    oldest[1].lastReadAt = this.#now();
    const read = await this.#readOnce(oldest[0]);
    if (read !== "unsupported") return read === "failed";
    this.#logger.info(
      { tracked: this.#pending.size },
      "this server cannot show these operations; their resources are followed instead",
    );
    for (const operationId of [...this.#pending.keys()]) {
      this.#settle({ operationId, vanished: true, reason: "unsupported" });
    }
    return false;
  }

  /**
   * One list call filtered by `lower_time_bound` (no state) settles every finished operation found there.
   * Returns the ids still tracked that the list did not show (to be read one by one; all of them when the server
   * refuses the bound), or undefined when the call failed transiently (next round).
   */
  async #settleFromList(operationIds: readonly string[], boundMs: number): Promise<string[] | undefined> {
    const lowerTimeBound = formatTimestamp(new Date(boundMs));
    const observedAt = this.#now();
    let listed: Operation[];
    try {
      listed = await this.#operations.list(this.projectId, this.family, { lower_time_bound: lowerTimeBound });
    } catch (error) {
      if (isUnsupported(error) || (isCloudError(error) && error.kind === "http" && error.status === 400)) {
        this.#lowerTimeBoundRefused = true;
        this.#logger.info({ err: error }, "server refuses lower_time_bound; reading finished operations one by one");
        return [...operationIds];
      }
      this.#logger.warn({ err: error }, "listing finished operations failed; retrying next interval");
      return undefined;
    }
    const byId = new Map(listed.map((op) => [op.operation_id, op]));
    const missing: string[] = [];
    for (const operationId of operationIds) {
      if (this.#stopped) return [];
      const operation = byId.get(operationId);
      if (operation === undefined) missing.push(operationId);
      // Listed but not final: still running (or the in-progress list lagged). Next round.
      else if (isFinalOperation(operation)) this.#settle({ operationId, vanished: false, operation, observedAt });
      else this.#learnStart(operation);
    }
    return missing;
  }

  async #readOnce(operationId: string): Promise<"read" | "unsupported" | "failed"> {
    const observedAt = this.#now();
    try {
      const operation = await this.#operations.get(this.projectId, this.family, operationId);
      // Still in progress: the list was read just before it started, or is lagging. Next round.
      if (isFinalOperation(operation)) this.#settle({ operationId, vanished: false, operation, observedAt });
      return "read";
    } catch (error) {
      if (isUnsupported(error)) {
        this.#settle({ operationId, vanished: true, reason: "unsupported" });
        return "unsupported";
      }
      if (isOperationGone(error)) {
        this.#settle({ operationId, vanished: true, reason: "gone" });
        return "read";
      }
      this.#logger.warn({ err: error, operationId }, "reading operation failed; backing off");
      return "failed";
    }
  }

  #settle(outcome: OperationOutcome): void {
    const pending = this.#pending.get(outcome.operationId);
    if (!pending) return;
    this.#pending.delete(outcome.operationId);
    pending.resolve(outcome);
    for (const listener of this.#listeners) {
      try {
        listener(outcome);
      } catch (error) {
        this.#logger.error({ err: error, operationId: outcome.operationId }, "onSettled listener threw");
      }
    }
  }
}

const trackersByClient = new WeakMap<object, Map<string, OperationTracker>>();

/**
 * The one tracker of (client, project, family), created on first use with `options`. Keeps the promise of
 * "one list call per interval" when several controllers follow operations of the same project.
 */
export function operationTrackerFor(
  client: { operations: OperationsApi },
  projectId: string,
  family: OperationFamily,
  options: Omit<OperationTrackerOptions, "client" | "projectId" | "family"> = {},
): OperationTracker {
  let trackers = trackersByClient.get(client);
  if (!trackers) {
    trackers = new Map();
    trackersByClient.set(client, trackers);
  }
  const key = `${projectId}\n${family}`;
  let tracker = trackers.get(key);
  if (!tracker || tracker.stopped) {
    tracker = new OperationTracker({ ...options, client, projectId, family });
    trackers.set(key, tracker);
  }
  return tracker;
}
