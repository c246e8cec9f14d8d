// The controller: N workers taking keys from a WorkQueue and calling a Reconciler, mapping each Outcome to a
// queue action exactly like controller-runtime's reconcileHandler. Reconciles are level-triggered: a request
// carries only namespace/name and the reconciler re-reads the object from the informer cache.
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { isFenced } from "../util/fence.ts";
import { runInPass } from "./fencing.ts";
import { lazyChildLogger } from "./logging.ts";
import type { Metrics, ReconcileResult } from "./metrics.ts";
import { ownsKey, type Shard } from "./sharding.ts";
import { type Clock, jitter, systemClock } from "./time.ts";
import { type Priority, WorkQueue, type WorkQueueOptions } from "./workqueue.ts";

/** The longest a controller's workers run passes back to back without letting timers and I/O in. */
const YIELD_AFTER_MS = 5;
/** Resyncs due within the same second run together (see ControllerOptions.resyncTickMs). */
const DEFAULT_RESYNC_TICK_MS = 1000;

export interface ReconcileRequest {
  namespace: string;
  name: string;
}

/**
 * What a reconcile hands back to the worker loop.
 * - `done`: success; backoff reset; the object is polled again after its sync period.
 * - `requeueAfter`: success, come back after `ms` (polling a cloud operation). `ms <= 0` means "again soon"
 *   (e.g. after a Kubernetes 409 on a status write): rate-limited, counted as result "requeue", not an error.
 * - `retry`: failure; re-queued with per-key exponential backoff (1 s … 5 min).
 * - `terminal`: failure that retrying cannot fix (bad spec); not re-queued until the object changes.
 * - `parked`: waiting for a resource (a slot of its cloud account) that wakes the key itself with `wake` when it
 *   frees; no resync and no backoff meanwhile, re-queued after `fallbackMs` only if nothing woke it. A timed
 *   requeue instead would look again and again at every key of a backlog (each refused again): CPU for nothing.
 */
export type Outcome =
  | { type: "done" }
  | { type: "requeueAfter"; ms: number }
  | { type: "parked"; fallbackMs: number }
  | { type: "retry"; error: Error }
  | { type: "terminal"; error: Error };

/** Constructors for outcomes, so reconcilers read `return outcome.requeueAfter(2000)`. */
export const outcome = {
  done: (): Outcome => ({ type: "done" }),
  requeueAfter: (ms: number): Outcome => ({ type: "requeueAfter", ms }),
  requeue: (): Outcome => ({ type: "requeueAfter", ms: 0 }),
  retry: (error: Error): Outcome => ({ type: "retry", error }),
  terminal: (error: Error): Outcome => ({ type: "terminal", error }),
} as const;

export interface ReconcileContext {
  /** Aborted when the controller stops (shutdown timeout, lost lease); pass it to every I/O call. */
  signal: AbortSignal;
  /** Child logger carrying {controller, namespace, name, reconcileID} (controller-runtime's spelling). */
  logger: Logger;
  reconcileId: string;
  /** The lane the key was taken from (`high`: work that finishes something), for work that waits on its own. */
  priority: Priority;
}

export interface Reconciler {
  reconcile(request: ReconcileRequest, ctx: ReconcileContext): Promise<Outcome>;
}

/** Thrown for a key that is not `namespace/name` (or `name` for cluster-scoped objects). */
export class InvalidKeyError extends Error {
  override name = "InvalidKeyError";
}

/** `namespace/name`, or just `name` for cluster-scoped objects (client-go's MetaNamespaceKeyFunc). */
export function keyOf(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name;
}

/** Splits a queue key back into a request; throws InvalidKeyError for malformed keys. */
export function parseKey(key: string): ReconcileRequest {
  const parts = key.split("/");
  if (parts.length === 1 && parts[0]) return { namespace: "", name: parts[0] };
  if (parts.length === 2 && parts[0] && parts[1]) return { namespace: parts[0], name: parts[1] };
  throw new InvalidKeyError(`invalid object key "${key}": expected "namespace/name" or "name"`);
}

export interface ControllerOptions {
  name: string;
  reconciler: Reconciler;
  logger: Logger;
  /** Concurrent workers (default 1). A key is still never reconciled by two workers at once. */
  workers?: number;
  metrics?: Metrics;
  clock?: Clock;
  /** Queue tuning (backoff bounds, jitter, random source); the name is the controller's. */
  queue?: Omit<WorkQueueOptions, "name" | "clock" | "observer">;
  /**
   * The periodic resync period for a key after a successful or terminal reconcile, or undefined for none
   * (object gone, resync disabled). The manager reads it from the `gpucloud.dev/sync-period` annotation.
   */
  resyncPeriodFor?: (request: ReconcileRequest) => number | undefined;
  /** Relative jitter of resync delays (default 0.1: ±10 %), so objects never poll in one wave. */
  resyncJitter?: number;
  /**
   * Resyncs come due on whole multiples of this many ms (default 1000, at most a tenth of the period; 0: each at
   * its own moment), so that the resyncs of one tick run back to back after one wake-up. A lone pass after its own timer costs several
   * times what the same pass costs in a batch (the process wakes, and runs its code cold).
   */
  resyncTickMs?: number;
  random?: () => number;
  /** Shared by controllers to bound how many reconciles start per second over all of them (default none). */
  pacer?: ReconcilePacer;
  /** This replica's shard: keys of other shards are never queued (default: every key). */
  shard?: Shard;
}

/**
 * At most `perSecond` reconciles start per second over every controller that shares it: Crossplane's global
 * reconcile rate limiter (`--max-reconcile-rate`). Starts are spaced evenly; a waiting start can be aborted.
 */
export class ReconcilePacer {
  readonly perSecond: number;
  readonly #clock: Clock;
  #nextAt = Number.NEGATIVE_INFINITY;

  constructor(perSecond: number, clock: Clock = systemClock) {
    if (!(perSecond > 0)) throw new RangeError(`reconciles per second must be positive, got ${perSecond}`);
    this.perSecond = perSecond;
    this.#clock = clock;
  }

  /** Resolves at this start's turn: true, or false when the signal aborted first. */
  wait(signal: AbortSignal): Promise<boolean> {
    const now = this.#clock.now();
    const at = Math.max(now, this.#nextAt);
    this.#nextAt = at + 1000 / this.perSecond;
    if (at <= now) return Promise.resolve(true);
    return new Promise((resolve) => {
      const onAbort = (): void => {
        this.#clock.clearTimeout(timer);
        resolve(false);
      };
      const timer = this.#clock.setTimeout(() => {
        signal.removeEventListener("abort", onAbort);
        resolve(true);
      }, at - now);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }
}

export class Controller {
  readonly name: string;
  readonly workers: number;
  readonly #options: ControllerOptions;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #random: () => number;
  #queue: WorkQueue;
  #running: Promise<void>[] = [];
  readonly #inFlight = new Set<AbortController>();
  /**
   * The pass of each key being reconciled, whatever queue it came from: a pass cancelled by a lost Lease may still
   * be unwinding when leadership is regained (a fresh queue), and its key must wait for it.
   */
  readonly #passes = new Map<string, Promise<void>>();
  #activeWorkers = 0;
  /** When the workers last let the event loop turn, and the turn they wait for (see #breathe). */
  #lastTurnAt: number;
  #turn: { promise: Promise<void>; release: () => void } | undefined;

  constructor(options: ControllerOptions) {
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(options.name)) {
      throw new RangeError(`controller name "${options.name}" must be a lower-case DNS label`);
    }
    const workers = options.workers ?? 1;
    if (!Number.isInteger(workers) || workers < 1) {
      throw new RangeError(`controller ${options.name}: workers must be a positive integer, got ${workers}`);
    }
    this.name = options.name;
    this.workers = workers;
    this.#options = options;
    this.#logger = options.logger.child({ controller: options.name });
    this.#clock = options.clock ?? systemClock;
    this.#lastTurnAt = this.#clock.now();
    this.#random = options.random ?? Math.random;
    this.#queue = this.#newQueue();
    options.metrics?.maxConcurrentReconciles.set({ controller: this.name }, workers);
    options.metrics?.activeWorkers.set({ controller: this.name }, 0);
  }

  /** The current queue (replaced when a stopped controller starts again after regaining leadership). */
  get queue(): WorkQueue {
    return this.#queue;
  }

  get isRunning(): boolean {
    return this.#running.length > 0;
  }

  /**
   * Queues a key (`namespace/name`) for reconciliation, in a lane (default `normal`; `high` for work that
   * finishes something, see workqueue.ts). Malformed keys are logged and dropped.
   */
  enqueue(key: string, priority: Priority = "normal"): void {
    try {
      parseKey(key);
    } catch (error) {
      this.#logger.warn({ key, err: error }, "dropping malformed key");
      return;
    }
    if (!this.owns(key)) return;
    this.#queue.add(key, priority);
  }

  /** Queues a key after a delay (earliest pending deadline wins). */
  enqueueAfter(key: string, delayMs: number, priority: Priority = "normal"): void {
    if (!this.owns(key)) return;
    this.#queue.addAfter(key, delayMs, priority);
  }

  /**
   * Queues a key now, dropping its pending delayed requeue: for a key that waited for a resource (a slot of its
   * cloud account) rather than for a time, and gets it now. `position` queues it ahead of its lane; its pass is
   * still told `priority` (a resync stays a resync: it may end quietly, ADR 0018).
   */
  wake(key: string, priority: Priority = "normal", position: Priority = priority): void {
    if (!this.owns(key)) return;
    this.#queue.addNow(key, priority, position);
  }

  /** Whether this replica reconciles the key (its shard), see sharding.ts. */
  owns(key: string): boolean {
    const shard = this.#options.shard;
    return shard === undefined || ownsKey(shard, key);
  }

  /** Replaces a shut-down queue with a fresh one so keys can be queued before `start`. */
  prepare(): void {
    if (this.#queue.shuttingDown && !this.isRunning) this.#queue = this.#newQueue();
  }

  /** Starts the workers; a no-op while already running. Keys queued before start are processed. */
  start(): void {
    if (this.isRunning) return;
    this.prepare();
    for (let index = 0; index < this.workers; index++) this.#running.push(this.#workerLoop(this.#queue));
    this.#logger.info({ workers: this.workers }, "starting workers");
  }

  /**
   * Stops intake and waits up to `timeoutMs` for running reconciles to finish; then aborts their signals.
   * Resolves true when everything finished in time. After stop, `start()` begins again with a fresh queue.
   */
  async stop(timeoutMs = 30_000): Promise<boolean> {
    const queue = this.#queue;
    const drained = queue.shutDownWithDrain();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const inTime = await Promise.race([
      drained.then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    if (!inTime) {
      this.#logger.warn({ timeoutMs, inFlight: this.#inFlight.size }, "reconciles still running at shutdown");
      this.abortInFlight();
    }
    const workers = this.#running;
    this.#running = [];
    this.#turn?.release(); // a worker between two passes need not wait for the event loop to stop
    if (inTime) await Promise.all(workers);
    this.#logger.info({ drained: inTime }, "workers stopped");
    return inTime;
  }

  /** Stops at once (lost lease): no new work, in-flight reconciles see their signal aborted. */
  stopNow(): void {
    this.#turn?.release();
    this.#queue.shutDown();
    this.abortInFlight();
    this.#running = [];
  }

  abortInFlight(): void {
    for (const controller of this.#inFlight) controller.abort(new Error(`controller ${this.name} stopping`));
  }

  #newQueue(): WorkQueue {
    const metrics = this.#options.metrics;
    const queue = new WorkQueue({
      ...this.#options.queue,
      name: this.name,
      clock: this.#clock,
      ...(metrics ? { observer: metrics.queueObserver(this.name) } : {}),
    });
    metrics?.trackQueue(queue);
    return queue;
  }

  async #workerLoop(queue: WorkQueue): Promise<void> {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      const earlier = this.#passes.get(key);
      if (earlier !== undefined) {
        // A pass of this key from before leadership was lost (and regained) has not ended yet: never two passes
        // of one key at once. The key comes back when it has.
        const lane = queue.takenFrom(key) ?? "normal";
        queue.done(key);
        const again = (): void => {
          if (!queue.shuttingDown) queue.add(key, lane);
        };
        void earlier.then(again, again);
        continue;
      }
      const pass = this.#reconcileKey(queue, key);
      this.#passes.set(key, pass);
      try {
        await pass;
      } finally {
        if (this.#passes.get(key) === pass) this.#passes.delete(key);
        queue.done(key);
      }
      await this.#breathe();
    }
  }

  /**
   * Between two passes. A pass that finds everything it needs in the caches (a resync against a fresh snapshot)
   * never waits on I/O: the workers would chain such passes in microtasks and starve timers and sockets until the
   * queue is empty (10,000 objects: stalls of seconds when a family list answered hundreds of waiting resyncs at
   * once, as long as the leader election's renew deadline). Once YIELD_AFTER_MS went by without a turn of the event
   * loop, every worker that ends a pass waits for the same turn (setImmediate): a stall is bounded by about one
   * pass per worker.
   */
  async #breathe(): Promise<void> {
    let turn = this.#turn;
    if (turn === undefined) {
      if (this.#clock.now() - this.#lastTurnAt < YIELD_AFTER_MS) return;
      let release: () => void = () => undefined;
      const promise = new Promise<void>((resolve) => {
        release = resolve;
      });
      const started: { promise: Promise<void>; release: () => void } = { promise, release };
      turn = started;
      this.#turn = started;
      setImmediate(release);
      void promise.then(() => {
        if (this.#turn === started) this.#turn = undefined;
        this.#lastTurnAt = this.#clock.now();
      });
    }
    await turn.promise;
  }

  async #reconcileKey(queue: WorkQueue, key: string): Promise<void> {
    const request = parseKey(key);
    const abort = new AbortController();
    this.#inFlight.add(abort);
    const pacer = this.#options.pacer;
    if (pacer !== undefined && !(await pacer.wait(abort.signal))) {
      // Stopping while waiting for a turn: nothing ran; the key is looked at again after a restart.
      this.#inFlight.delete(abort);
      return;
    }
    const reconcileId = randomUUID();
    const logger = lazyChildLogger(this.#logger, {
      namespace: request.namespace,
      name: request.name,
      reconcileID: reconcileId,
    });
    const metrics = this.#options.metrics;
    const labels = { controller: this.name };
    this.#activeWorkers++;
    metrics?.activeWorkers.set(labels, this.#activeWorkers);
    const startedAt = this.#clock.now();
    let result: Outcome;
    try {
      const priority = queue.takenFrom(key) ?? "normal";
      const ctx: ReconcileContext = { signal: abort.signal, logger, reconcileId, priority };
      // Inside the pass's scope: every write it makes is refused once its signal aborts (runtime/fencing.ts).
      result = await runInPass(abort.signal, () => this.#options.reconciler.reconcile(request, ctx));
      if (!isOutcome(result)) {
        metrics?.reconcilePanicsTotal.inc(labels);
        result = outcome.retry(new Error(`reconciler returned an invalid outcome`));
      }
    } catch (error) {
      const failure = error instanceof Error ? error : new Error(String(error));
      if (abort.signal.aborted || isFenced(error)) {
        // Cancelled (leadership lost, shutdown) or refused by the fence: nothing went wrong with the object.
        logger.debug({ error: failure.message }, "pass cancelled");
        result = outcome.retry(failure);
      } else {
        // A thrown error is what a panic is in controller-runtime: counted as one, logged with its stack (it is a
        // bug), then a retry, never a crash of the worker.
        metrics?.reconcilePanicsTotal.inc(labels);
        logger.error({ err: error }, "reconcile panicked");
        result = outcome.retry(failure);
      }
    } finally {
      this.#inFlight.delete(abort);
      this.#activeWorkers--;
      metrics?.activeWorkers.set(labels, this.#activeWorkers);
      metrics?.reconcileTimeSeconds.observe(labels, (this.#clock.now() - startedAt) / 1000);
    }
    if (abort.signal.aborted) {
      // Cancelled (leadership lost, shutdown): its queue is gone and its outcome means nothing; no result counted.
      logger.debug({ outcome: result.type }, "cancelled pass ended");
      return;
    }
    const recorded = this.#apply(queue, key, request, result, logger);
    metrics?.reconcileTotal.inc({ ...labels, result: recorded });
  }

  #apply(queue: WorkQueue, key: string, request: ReconcileRequest, result: Outcome, logger: Logger): ReconcileResult {
    const metrics = this.#options.metrics;
    const labels = { controller: this.name };
    switch (result.type) {
      case "done":
        queue.forget(key);
        this.#scheduleResync(queue, key, request);
        logger.debug("reconciled");
        return "success";
      case "requeueAfter":
        if (result.ms <= 0) {
          queue.addRateLimited(key);
          logger.debug("requeue");
          return "requeue";
        }
        queue.forget(key);
        queue.addAfter(key, result.ms);
        this.#scheduleResync(queue, key, request);
        logger.debug({ requeueAfterMs: result.ms }, "requeue after");
        return "requeue_after";
      case "parked":
        queue.addAfter(key, result.fallbackMs);
        logger.debug({ fallbackMs: result.fallbackMs }, "parked");
        return "parked";
      case "retry":
        queue.addRateLimited(key);
        metrics?.reconcileErrorsTotal.inc(labels);
        // A retry the reconciler returned is an expected failure (the API said no, the network failed): one
        // line with the message, no stack.
        logger.warn({ error: result.error.message, failures: queue.numRequeues(key) }, "reconcile failed, will retry");
        return "error";
      case "terminal":
        queue.forget(key);
        this.#scheduleResync(queue, key, request);
        metrics?.reconcileErrorsTotal.inc(labels);
        metrics?.terminalReconcileErrorsTotal.inc(labels);
        logger.error({ err: result.error }, "reconcile failed terminally, not retrying");
        return "error";
    }
  }

  #scheduleResync(queue: WorkQueue, key: string, request: ReconcileRequest): void {
    const period = this.#options.resyncPeriodFor?.(request);
    if (period === undefined || period <= 0) return;
    const delay = jitter(period, this.#options.resyncJitter ?? 0.1, this.#random);
    // Never more than a tenth of the period later (short periods in tests and on the annotation's floor).
    const tick = Math.min(this.#options.resyncTickMs ?? DEFAULT_RESYNC_TICK_MS, period / 10);
    const now = this.#clock.now();
    const dueAt = tick > 0 ? Math.ceil((now + delay) / tick) * tick : now + delay;
    // The lowest lane: a periodic look never delays work that changes or finishes something.
    queue.addAfter(key, dueAt - now, "low");
  }
}

function isOutcome(value: unknown): value is Outcome {
  if (typeof value !== "object" || value === null || !("type" in value)) return false;
  switch (value.type) {
    case "done":
      return true;
    case "requeueAfter":
      return "ms" in value && typeof value.ms === "number" && Number.isFinite(value.ms);
    case "parked":
      return "fallbackMs" in value && typeof value.fallbackMs === "number" && value.fallbackMs > 0;
    case "retry":
    case "terminal":
      return "error" in value && value.error instanceof Error;
    default:
      return false;
  }
}
