// Reconcile admission per cloud account: a reconcile that talks to the cloud first takes a slot of its account's
// bulkhead in its controller's lane (see src/cloud/bulkhead.ts) and gives it back when the reconcile ends, however
// it ends. A refused admission is thrown by `connect` as a CloudError (account_busy or circuit_open), which
// classify() turns into a requeue: the worker is free at once for objects of other accounts.
//
// A key refused because its account's slots are all taken (account_busy) is parked here, in the lane it came
// from, and woken when a slot of that account frees: `high` keys (an operation settled, a spec change) first,
// then first come, first served (a refused key coming back on a timer would cycle a backlog through the workers:
// ADR 0014). A woken key is queued in the `high` lane, so that the slot goes to the key that waited for it and not
// to a fresh one taken first (which would only be parked behind it); its pass is still told its own lane (the work
// queue keeps it), so a woken resync may end quietly (ADR 0018), and it keeps that lane should it be parked again;
// an event for the key meanwhile raises it. The slot it was woken for is promised to it until it is taken (or for
// PROMISE_TTL_MS): a key that reaches a worker before it (a settled key from the same `high` lane, a fresh one
// taken by an idle worker) is parked instead of taking the slot and sending the woken key back to wait.
import type { AccountBulkhead } from "../../cloud/bulkhead.ts";
import { CloudError } from "../../cloud/errors.ts";
import { keyOf, type Priority, type ReconcileRequest, type Reconciler } from "../../runtime/index.ts";

/** A parked key comes back after this long if nothing woke it (a safety net: wakes are not expected to be lost). */
export const PARKED_FALLBACK_MS = 300_000;

/** How long a slot stays promised to the key woken for it; after that anyone may take it (a lost wake). */
export const PROMISE_TTL_MS = 5_000;

const LANES: readonly Priority[] = ["high", "normal", "low"];

/** Keys of one account waiting for a slot, one FIFO per lane. */
type Parked = Record<Priority, Set<string>>;

export class AccountAdmissions {
  readonly lane: string;
  /** key → release of the slot its running reconcile holds (a key is never reconciled twice at once). */
  readonly #held = new Map<string, { bulkhead: AccountBulkhead; release: () => void }>();
  /** The lane each running reconcile's key was taken from. */
  readonly #priorities = new Map<string, Priority>();
  readonly #parked = new Map<AccountBulkhead, Parked>();
  /** The account each parked key waits for. */
  readonly #parkedIn = new Map<string, AccountBulkhead>();
  /** Slots promised to woken keys not yet taken: account → key → when it was woken. */
  readonly #promised = new Map<AccountBulkhead, Map<string, number>>();
  readonly #now: () => number;
  #wake: ((key: string, priority: Priority, position: Priority) => void) | undefined;

  constructor(lane: string, options: { now?: () => number } = {}) {
    this.lane = lane;
    this.#now = options.now ?? Date.now;
  }

  /** How a parked key is queued again (the controller's `wake`); set once the controller exists. */
  wakeWith(wake: (key: string, priority: Priority, position: Priority) => void): void {
    this.#wake = wake;
  }

  /**
   * Take a slot for the reconcile of `key` (kept when it holds one of this account already); throws the
   * bulkhead's refusal (the key parked when it is busy).
   */
  admit(key: string, bulkhead: AccountBulkhead | undefined): void {
    if (bulkhead === undefined) return;
    if (this.#held.get(key)?.bulkhead === bulkhead) return;
    // Without a wake (no controller yet) a refused key simply comes back after the bulkhead's short delay. Slots
    // promised to woken keys are not free (a key's own promise was dropped when its reconcile began).
    const admission = bulkhead.admit(
      this.lane,
      this.#wake === undefined ? undefined : PARKED_FALLBACK_MS,
      this.#livePromises(bulkhead),
    );
    if (!admission.ok) {
      if (admission.error.code === "account_busy" && this.#wake !== undefined) this.#park(key, bulkhead);
      throw admission.error;
    }
    this.#unpark(key);
    this.#held.get(key)?.release();
    this.#held.set(key, { bulkhead, release: admission.release });
  }

  release(key: string): void {
    const held = this.#held.get(key);
    if (held === undefined) return;
    this.#held.delete(key);
    held.release();
    this.#wakeParked(held.bulkhead);
  }

  /** Keys waiting for a slot (all accounts). */
  get parkedCount(): number {
    return this.#parkedIn.size;
  }

  /**
   * The reconciler with every slot its reconciles took given back when they end. With `accountOf` (the account an
   * object's credentials name, read without parsing it), a busy account parks the key before any work is done:
   * a backlog of thousands costs one cheap look per key and pass, not a parse and a status build.
   */
  wrap(inner: Reconciler, accountOf?: (request: ReconcileRequest) => AccountBulkhead | undefined): Reconciler {
    return {
      reconcile: async (request, ctx) => {
        const key = keyOf(request.namespace, request.name);
        // A woken key's pass is told the lane it was parked from (the queue keeps it: Controller.wake).
        this.#priorities.set(key, ctx.priority);
        // Its promise (if it was woken) is its own to use now: it no longer holds the slot back from itself.
        const promisedIn = this.#dropPromise(key);
        try {
          const bulkhead = this.#wake === undefined ? undefined : accountOf?.(request);
          if (bulkhead !== undefined && !this.#admitEarly(key, bulkhead)) {
            return { type: "parked", fallbackMs: PARKED_FALLBACK_MS };
          }
          return await inner.reconcile(request, ctx);
        } finally {
          this.#priorities.delete(key);
          const tookIt = this.#held.get(key)?.bulkhead === promisedIn;
          this.release(key);
          // Woken but did not take the slot (object gone, other account): the next parked key gets it.
          if (promisedIn !== undefined && !tookIt) this.#wakeParked(promisedIn);
        }
      },
    };
  }

  /** A slot, or false when the account is busy (the key parked). An open circuit is left to the pass to report. */
  #admitEarly(key: string, bulkhead: AccountBulkhead): boolean {
    if (bulkhead.health() !== "open" && this.#freeSlots(bulkhead) <= 0) {
      // Busy: parked without building the refusal (an error with a stack) that only a pass would report.
      this.#park(key, bulkhead);
      return false;
    }
    try {
      this.admit(key, bulkhead);
      return true;
    } catch (error) {
      if (error instanceof CloudError && error.code === "account_busy") return false;
      return true;
    }
  }

  #park(key: string, bulkhead: AccountBulkhead): void {
    const priority = this.#priorities.get(key) ?? "normal";
    const before = this.#parkedIn.get(key);
    if (before !== undefined && before !== bulkhead) this.#unpark(key);
    let parked = this.#parked.get(bulkhead);
    if (parked === undefined) {
      parked = { high: new Set(), normal: new Set(), low: new Set() };
      this.#parked.set(bulkhead, parked);
    }
    // Already waiting (its fallback fired, or an event woke it): it keeps its place, in the higher of its lanes.
    for (const lane of LANES) {
      if (parked[lane].has(key)) {
        if (LANES.indexOf(priority) < LANES.indexOf(lane)) {
          parked[lane].delete(key);
          parked[priority].add(key);
        }
        return;
      }
    }
    parked[priority].add(key);
    this.#parkedIn.set(key, bulkhead);
  }

  #unpark(key: string): void {
    const bulkhead = this.#parkedIn.get(key);
    if (bulkhead === undefined) return;
    this.#parkedIn.delete(key);
    const parked = this.#parked.get(bulkhead);
    if (parked === undefined) return;
    for (const lane of LANES) parked[lane].delete(key);
    if (LANES.every((lane) => parked[lane].size === 0)) this.#parked.delete(bulkhead);
  }

  /**
   * As many parked keys as the account has free slots now, `high` first. A woken key that finds the slot taken
   * by then is parked again; one that no longer needs it (object gone) simply ends.
   */
  #wakeParked(bulkhead: AccountBulkhead): void {
    const parked = this.#parked.get(bulkhead);
    if (parked === undefined) return;
    let free = this.#freeSlots(bulkhead);
    for (const lane of LANES) {
      for (const key of parked[lane]) {
        if (free <= 0) return;
        free--;
        this.#unpark(key);
        this.#promise(key, bulkhead);
        this.#wake?.(key, lane, "high");
      }
    }
  }

  /** Free slots of the account that are not promised to a woken key (promises past their time lapse here). */
  #freeSlots(bulkhead: AccountBulkhead): number {
    return bulkhead.freeSlots(this.lane) - this.#livePromises(bulkhead);
  }

  #livePromises(bulkhead: AccountBulkhead): number {
    const promises = this.#promised.get(bulkhead);
    if (promises === undefined) return 0;
    const oldest = this.#now() - PROMISE_TTL_MS;
    for (const [key, wokenAt] of promises) if (wokenAt < oldest) promises.delete(key);
    if (promises.size === 0) this.#promised.delete(bulkhead);
    return promises.size;
  }

  #promise(key: string, bulkhead: AccountBulkhead): void {
    let promises = this.#promised.get(bulkhead);
    if (promises === undefined) {
      promises = new Map();
      this.#promised.set(bulkhead, promises);
    }
    promises.set(key, this.#now());
  }

  /** Removes the key's promise; the account it was promised a slot of, if any. */
  #dropPromise(key: string): AccountBulkhead | undefined {
    for (const [bulkhead, promises] of this.#promised) {
      if (!promises.delete(key)) continue;
      if (promises.size === 0) this.#promised.delete(bulkhead);
      return bulkhead;
    }
    return undefined;
  }
}
