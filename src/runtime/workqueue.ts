// A work queue with client-go semantics (util/workqueue): keys, not objects, so reconciles are level-triggered.
// - a dirty set and a processing set: a key is queued at most once and never handed to two workers at once;
//   a key added while it is being processed is queued again when the worker calls `done`;
// - per-key exponential backoff with jitter for failures (`addRateLimited`), reset by `forget`;
// - delayed adds (`addAfter`) where the earliest pending deadline for a key wins;
// - shutdown that stops intake and can wait for running work to drain;
// - three priority lanes, served in order: `high` (work that finishes something: an operation settled, a spec
//   change), `normal` (new objects, retries, requeues), `low` (periodic resyncs). A key lives in one lane at a
//   time; adding it again with a higher priority moves it up, never down. See docs/adr/0001-work-queue.md.
import { type Clock, systemClock, type TimerHandle } from "./time.ts";

/** The lane a key waits in: `high` before `normal` before `low`. */
export type Priority = "high" | "normal" | "low";
const LANES: readonly Priority[] = ["high", "normal", "low"];
const RANK: Record<Priority, number> = { high: 0, normal: 1, low: 2 };

/** Hooks the metrics layer attaches to; every hook is optional so tests can run without metrics. */
export interface WorkQueueObserver {
  onAdd?(): void;
  onRetry?(): void;
  /** Seconds a key waited in the queue before a worker took it. */
  onQueueLatency?(seconds: number): void;
  /** Seconds a worker held a key (get → done). */
  onWorkDuration?(seconds: number): void;
}

export interface WorkQueueOptions {
  /** Queue name, used as the `name` label of the workqueue_* metrics (the controller name). */
  name: string;
  clock?: Clock;
  /** First retry delay (default 1 s); doubles per consecutive failure. */
  baseDelayMs?: number;
  /** Upper bound of the retry delay (default 5 min). */
  maxDelayMs?: number;
  /** Relative jitter of retry delays, 0..1 (default 0.1: ±10 %). */
  jitterFraction?: number;
  /** Random source in [0, 1) for jitter (injectable for deterministic tests). */
  random?: () => number;
  observer?: WorkQueueObserver;
}

interface DelayedEntry {
  key: string;
  readyAt: number;
  priority: Priority;
}

type Waiter = (key: string | undefined) => void;

export class WorkQueue {
  readonly name: string;
  readonly #clock: Clock;
  readonly #baseDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #jitterFraction: number;
  readonly #random: () => number;
  readonly #observer: WorkQueueObserver;

  /** Keys waiting for a worker, one FIFO per lane (a Set keeps insertion order and dedupes). */
  readonly #lanes: Record<Priority, Set<string>> = { high: new Set(), normal: new Set(), low: new Set() };
  /** Keys that need processing (queued ones plus those re-added while being processed), with their lane. */
  readonly #dirty = new Map<string, Priority>();
  /** Keys held by a worker, with the time the worker took them. */
  readonly #processing = new Map<string, number>();
  /**
   * For each key held by a worker, the lane that asked for its pass: the lane it was taken from, or for a key queued
   * ahead of its own lane (addNow's `position`), that own lane, unless something else asked for it meanwhile.
   */
  readonly #takenFrom = new Map<string, Priority>();
  /**
   * Keys queued ahead of the lane that asked for them (addNow's `position`), with that lane, raised by any later
   * add. Every other dirty key was asked for by the lane it is queued in.
   */
  readonly #ahead = new Map<string, Priority>();
  /** When each dirty key was added, for the queue-latency metric. */
  readonly #addedAt = new Map<string, number>();
  readonly #failures = new Map<string, number>();
  readonly #waiters: Waiter[] = [];

  /** Min-heap of delayed adds; stale entries (superseded by an earlier deadline) are skipped lazily. */
  readonly #delayed: DelayedEntry[] = [];
  /** The earliest pending deadline of each delayed key. */
  readonly #deadlines = new Map<string, number>();
  #delayTimer: TimerHandle | undefined;
  #delayTimerAt = Number.POSITIVE_INFINITY;

  #shuttingDown = false;
  #drainWaiters: Array<() => void> = [];

  constructor(options: WorkQueueOptions) {
    this.name = options.name;
    this.#clock = options.clock ?? systemClock;
    this.#baseDelayMs = options.baseDelayMs ?? 1000;
    this.#maxDelayMs = options.maxDelayMs ?? 300_000;
    this.#jitterFraction = options.jitterFraction ?? 0.1;
    this.#random = options.random ?? Math.random;
    this.#observer = options.observer ?? {};
    if (this.#baseDelayMs <= 0 || this.#maxDelayMs < this.#baseDelayMs) {
      throw new RangeError(`work queue ${this.name}: need 0 < baseDelayMs <= maxDelayMs`);
    }
  }

  /**
   * Queues a key now in a lane (default `normal`). Already queued: it moves up to a higher lane, never down.
   * No-op after shutdown.
   */
  add(key: string, priority: Priority = "normal"): void {
    if (this.#shuttingDown) return;
    const ahead = this.#ahead.get(key);
    if (ahead !== undefined && RANK[priority] < RANK[ahead]) this.#ahead.set(key, priority);
    this.#queue(key, priority);
  }

  /** Marks `key` dirty in `priority`'s lane (or a higher one it is in already) and queues it unless processing. */
  #queue(key: string, priority: Priority): void {
    const queuedIn = this.#dirty.get(key);
    if (queuedIn !== undefined) {
      if (RANK[priority] >= RANK[queuedIn]) return;
      this.#dirty.set(key, priority);
      // Waiting in a lower lane: move it (a key being processed is queued in its new lane by done()).
      if (this.#lanes[queuedIn].delete(key)) this.#lanes[priority].add(key);
      return;
    }
    this.#observer.onAdd?.();
    this.#dirty.set(key, priority);
    this.#addedAt.set(key, this.#clock.now());
    if (this.#processing.has(key)) return; // queued again by done()
    this.#enqueue(key, priority);
  }

  /**
   * Queues a key after `delayMs` in a lane (default `normal`); if the key already has an earlier pending deadline,
   * that one wins.
   */
  addAfter(key: string, delayMs: number, priority: Priority = "normal"): void {
    if (this.#shuttingDown) return;
    if (delayMs <= 0) {
      this.add(key, priority);
      return;
    }
    const readyAt = this.#clock.now() + delayMs;
    const existing = this.#deadlines.get(key);
    if (existing !== undefined && existing <= readyAt) return;
    this.#deadlines.set(key, readyAt);
    if (this.#delayed.length >= 2 * this.#deadlines.size + 1024) this.#compactDelayed();
    this.#heapPush({ key, readyAt, priority });
    this.#armDelayTimer();
  }

  /**
   * Queues a key now and drops its pending delayed add: the pass it gets schedules whatever comes next. For a key
   * that waited for a resource rather than a time (see controllers/account-admission.ts), whose fallback requeue
   * would otherwise run a second, needless pass. `position` may queue it ahead of its lane (a woken key takes the
   * slot it waited for before fresh keys do); its pass is still told `priority` (takenFrom): a resync woken ahead
   * stays a resync, unless an event asks for the key before it runs.
   */
  addNow(key: string, priority: Priority = "normal", position: Priority = priority): void {
    if (this.#shuttingDown) return;
    // A stale heap entry is skipped when it fires (its deadline is no longer the key's).
    this.#deadlines.delete(key);
    if (RANK[position] >= RANK[priority]) {
      this.add(key, priority);
      return;
    }
    // What asked for the key already (an earlier add, queued or while it is processed) still stands.
    const asked = this.#ahead.get(key) ?? this.#dirty.get(key);
    this.#ahead.set(key, asked !== undefined && RANK[asked] < RANK[priority] ? asked : priority);
    this.#queue(key, position);
  }

  /** Queues a key after its backoff delay and counts one more consecutive failure for it. */
  addRateLimited(key: string): void {
    if (this.#shuttingDown) return;
    const failures = this.#failures.get(key) ?? 0;
    this.#failures.set(key, failures + 1);
    this.#observer.onRetry?.();
    this.addAfter(key, this.backoffDelay(failures));
  }

  /** The retry delay after `failures` consecutive failures: base·2^failures with jitter, within [base, max]. */
  backoffDelay(failures: number): number {
    const exponential = this.#baseDelayMs * 2 ** Math.min(failures, 30);
    const jittered = exponential * (1 - this.#jitterFraction + 2 * this.#jitterFraction * this.#random());
    return Math.round(Math.min(this.#maxDelayMs, Math.max(this.#baseDelayMs, jittered)));
  }

  /** Resets the backoff of a key (after a success). */
  forget(key: string): void {
    this.#failures.delete(key);
  }

  /** Consecutive failures recorded for a key. */
  numRequeues(key: string): number {
    return this.#failures.get(key) ?? 0;
  }

  /**
   * Waits for the next key and marks it as processing. Resolves `undefined` once the queue is shut down, which
   * is the worker's signal to exit. Every key returned must be passed to `done` exactly once.
   */
  get(): Promise<string | undefined> {
    if (this.#shuttingDown) return Promise.resolve(undefined);
    const key = this.#take();
    if (key !== undefined) return Promise.resolve(key);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Marks a key as no longer processing; re-queues it if it was added meanwhile. */
  done(key: string): void {
    const startedAt = this.#processing.get(key);
    if (startedAt === undefined) return;
    this.#processing.delete(key);
    this.#takenFrom.delete(key);
    this.#observer.onWorkDuration?.((this.#clock.now() - startedAt) / 1000);
    const priority = this.#dirty.get(key);
    if (priority !== undefined && !this.#shuttingDown) this.#enqueue(key, priority);
    if (this.#processing.size === 0) this.#resolveDrain();
  }

  /** Keys waiting for a worker (the workqueue_depth metric). */
  len(): number {
    return this.#lanes.high.size + this.#lanes.normal.size + this.#lanes.low.size;
  }

  /** Keys waiting in one lane. */
  laneLen(priority: Priority): number {
    return this.#lanes[priority].size;
  }

  /** Keys with a pending delayed add. */
  delayedLen(): number {
    return this.#deadlines.size;
  }

  /** Entries the delay heap holds: one per pending deadline plus superseded ones not dropped yet. */
  delayedEntries(): number {
    return this.#delayed.length;
  }

  /** The pending delayed deadline of a key (epoch ms), if any. */
  deadlineOf(key: string): number | undefined {
    return this.#deadlines.get(key);
  }

  /** The lane a key held by a worker was taken from (undefined when no worker holds it). */
  takenFrom(key: string): Priority | undefined {
    return this.#takenFrom.get(key);
  }

  isProcessing(key: string): boolean {
    return this.#processing.has(key);
  }

  processingCount(): number {
    return this.#processing.size;
  }

  /** Sum of the seconds every in-flight key has been processing (workqueue_unfinished_work_seconds). */
  unfinishedWorkSeconds(): number {
    const now = this.#clock.now();
    let total = 0;
    for (const startedAt of this.#processing.values()) total += now - startedAt;
    return total / 1000;
  }

  /** Seconds the oldest in-flight key has been processing (workqueue_longest_running_processor_seconds). */
  longestRunningProcessorSeconds(): number {
    const now = this.#clock.now();
    let oldest = now;
    for (const startedAt of this.#processing.values()) oldest = Math.min(oldest, startedAt);
    return (now - oldest) / 1000;
  }

  get shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  /** Stops intake: adds are ignored, pending delays dropped, waiting and future `get` calls resolve undefined. */
  shutDown(): void {
    if (this.#shuttingDown) return;
    this.#shuttingDown = true;
    if (this.#delayTimer !== undefined) this.#clock.clearTimeout(this.#delayTimer);
    this.#delayTimer = undefined;
    this.#delayed.length = 0;
    this.#deadlines.clear();
    for (const lane of LANES) this.#lanes[lane].clear();
    for (const waiter of this.#waiters.splice(0)) waiter(undefined);
    if (this.#processing.size === 0) this.#resolveDrain();
  }

  /** Shuts down and resolves when every key being processed has been marked `done`. */
  shutDownWithDrain(): Promise<void> {
    const drained = new Promise<void>((resolve) => {
      if (this.#processing.size === 0) resolve();
      else this.#drainWaiters.push(resolve);
    });
    this.shutDown();
    return drained;
  }

  #resolveDrain(): void {
    for (const resolve of this.#drainWaiters.splice(0)) resolve();
  }

  #enqueue(key: string, priority: Priority): void {
    this.#lanes[priority].add(key);
    const waiter = this.#waiters.shift();
    if (waiter !== undefined) waiter(this.#take());
  }

  #take(): string | undefined {
    let key: string | undefined;
    let from: Priority = "normal";
    for (const lane of LANES) {
      const next = this.#lanes[lane].values().next();
      if (next.done === true) continue;
      key = next.value;
      from = lane;
      this.#lanes[lane].delete(key);
      break;
    }
    if (key === undefined) return undefined;
    this.#takenFrom.set(key, this.#ahead.get(key) ?? from);
    this.#ahead.delete(key);
    this.#dirty.delete(key);
    const now = this.#clock.now();
    const addedAt = this.#addedAt.get(key);
    this.#addedAt.delete(key);
    if (addedAt !== undefined) this.#observer.onQueueLatency?.((now - addedAt) / 1000);
    this.#processing.set(key, now);
    return key;
  }

  #armDelayTimer(): void {
    const top = this.#delayed[0];
    if (top === undefined || top.readyAt >= this.#delayTimerAt) return;
    if (this.#delayTimer !== undefined) this.#clock.clearTimeout(this.#delayTimer);
    this.#delayTimerAt = top.readyAt;
    this.#delayTimer = this.#clock.setTimeout(() => this.#fireDelayed(), top.readyAt - this.#clock.now());
  }

  #fireDelayed(): void {
    this.#delayTimer = undefined;
    this.#delayTimerAt = Number.POSITIVE_INFINITY;
    const now = this.#clock.now();
    for (let top = this.#delayed[0]; top !== undefined && top.readyAt <= now; top = this.#delayed[0]) {
      this.#heapPop();
      // Skip entries superseded by an earlier deadline for the same key.
      if (this.#deadlines.get(top.key) !== top.readyAt) continue;
      this.#deadlines.delete(top.key);
      this.add(top.key, top.priority);
    }
    this.#armDelayTimer();
  }

  /**
   * Drops superseded entries (an earlier deadline for the key, or addNow, replaced them). They would be skipped
   * when they fire, but a key requeued many times within a long delay (a burst under a 10-minute resync) left
   * one each meanwhile: tens of thousands at 10,000 objects. Run when they outnumber the live ones, so O(1)
   * amortised per add. A sorted array is a valid min-heap.
   */
  #compactDelayed(): void {
    const live = this.#delayed.filter((entry) => this.#deadlines.get(entry.key) === entry.readyAt);
    live.sort((a, b) => a.readyAt - b.readyAt);
    this.#delayed.length = 0;
    for (const entry of live) this.#delayed.push(entry);
  }

  #heapPush(entry: DelayedEntry): void {
    const heap = this.#delayed;
    heap.push(entry);
    let index = heap.length - 1;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      const parentEntry = heap[parent] as DelayedEntry;
      if (parentEntry.readyAt <= entry.readyAt) break;
      heap[index] = parentEntry;
      index = parent;
    }
    heap[index] = entry;
  }

  #heapPop(): void {
    const heap = this.#delayed;
    const last = heap.pop();
    if (last === undefined || heap.length === 0) return;
    let index = 0;
    for (;;) {
      const left = 2 * index + 1;
      const right = left + 1;
      let smallest = index;
      let smallestAt = last.readyAt;
      const leftEntry = heap[left];
      const rightEntry = heap[right];
      if (leftEntry !== undefined && leftEntry.readyAt < smallestAt) {
        smallest = left;
        smallestAt = leftEntry.readyAt;
      }
      if (rightEntry !== undefined && rightEntry.readyAt < smallestAt) smallest = right;
      if (smallest === index) break;
      heap[index] = heap[smallest] as DelayedEntry;
      index = smallest;
    }
    heap[index] = last;
  }
}
