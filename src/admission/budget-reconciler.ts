// The GpuBudget controller's reconciler: keeps each budget's ledger true to what exists, its totals and conditions
// current (observedGeneration, OverLimit after a limit was lowered), and wakes the waiters that now fit.
//
// - Found billing (positive evidence from the caches): a covered GpuVm that runs or a GpuDisk that exists holds at
//   least what it bills, as a Used entry, also above the limit (a budget made after the VMs, a resource adopted by
//   spec.id): the budget then says it is over, and admits nothing new.
// - Not covered any more (the cache shows the object with labels the selector does not pick): its entry goes.
// - Absence is not proof: an entry or waiter whose object the cache lacks, or that shows no billing, goes only when
//   the controllers' check (HolderCheck: live reads, their own confirmation that a cloud resource is gone) says
//   "release", and only once it is older than sweepMinAgeMs. "unsure" keeps it.
// - The waiters at the head of the line that fit are woken (their objects' keys), in order.
// A pass writes only when something changed: an idle budget costs no write.
import type { BudgetedKind, LedgerEntry, Waiter } from "../api/gpu-budget.ts";
import {
  type Outcome,
  outcome,
  type ReconcileContext,
  type ReconcileRequest,
  type Reconciler,
} from "../runtime/index.ts";
import type { BudgetRecords } from "./budget-ledger.ts";
import { admissibleWaiters, type Budget, type Need, nextStatus, totalsOf } from "./ledger.ts";
import { toDollars, toMicros } from "./money.ts";
import { timeMs } from "./priority.ts";
import { selects } from "./selector.ts";

export type CheckVerdict = "keep" | "release" | "unsure";

/**
 * What the controllers answer about an object the ledger holds something for, or lets wait. From live reads,
 * never a cache. `release` only when the object is gone (a live read: not found, or another uid under its name),
 * or when it has neither a create or action intent (createPending, actionPending) nor a billed cloud resource (a
 * running VM, an existing disk), the resource's absence confirmed as the controllers confirm it (goneConfirmMs);
 * for a waiter, also when the object no longer asks for the action (a spec changed back). Otherwise `keep`, or
 * `unsure` when a read failed.
 */
export interface HolderCheck {
  entry(namespace: string, uid: string, entry: LedgerEntry): Promise<CheckVerdict>;
  waiter(namespace: string, uid: string, waiter: Waiter): Promise<CheckVerdict>;
}

/** A GpuVm or GpuDisk as the caches show it. */
export interface InventoryItem {
  kind: BudgetedKind;
  name: string;
  uid: string;
  labels: Readonly<Record<string, string>>;
  /** What it bills now, from its status (a running VM's type, a disk's size); undefined when it bills nothing. */
  billing?: Need | undefined;
}

export interface SpendInventory {
  /** The namespace's GpuVms and GpuDisks from the caches; undefined until the caches have synced. */
  objects(namespace: string): readonly InventoryItem[] | undefined;
}

export interface BudgetReconcilerOptions {
  records: BudgetRecords;
  /** The budget as the informer caches it. */
  cached(namespace: string, name: string): Budget | undefined;
  check: HolderCheck;
  inventory: SpendInventory;
  /** Wake the objects of these waiters: they fit now (in this order). */
  wake(namespace: string, waiters: readonly { uid: string; waiter: Waiter }[]): void;
  now?: () => number;
  /** Entries and waiters younger than this are never checked (their pass may still be on its way). Default 2 min. */
  sweepMinAgeMs?: number;
  /** How often a budget is looked at again without an event. Default 60 s. */
  resyncMs?: number;
  /** Live checks per pass at most (the rest wait for the next pass). Default 20. */
  maxChecksPerPass?: number;
}

const NOT_SYNCED_RETRY_MS = 5_000;
const CONFLICT_RETRY_MS = 1_000;

type Ledger = { entries: Record<string, LedgerEntry>; waiting: Record<string, Waiter> };

export class BudgetReconciler implements Reconciler {
  readonly #options: BudgetReconcilerOptions;
  readonly #now: () => number;
  readonly #sweepMinAgeMs: number;
  readonly #resyncMs: number;
  readonly #maxChecks: number;

  constructor(options: BudgetReconcilerOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
    this.#sweepMinAgeMs = options.sweepMinAgeMs ?? 120_000;
    this.#resyncMs = options.resyncMs ?? 60_000;
    this.#maxChecks = options.maxChecksPerPass ?? 20;
  }

  async reconcile(request: ReconcileRequest, ctx: ReconcileContext): Promise<Outcome> {
    const { namespace = "", name } = request;
    const budget = this.#options.cached(namespace, name);
    if (budget === undefined) return outcome.done();
    const items = this.#options.inventory.objects(namespace);
    if (items === undefined) return outcome.requeueAfter(NOT_SYNCED_RETRY_MS);
    const now = new Date(this.#now());
    const ledger: Ledger = { entries: { ...budget.entries }, waiting: { ...budget.waiting } };
    const found = this.#countFound(budget, items, ledger, now);
    const checked = await this.#sweep(budget, items, ledger, now);
    const swept = checked > 0 || found || budget.malformed > 0;
    const status = nextStatus(budget, ledger.entries, ledger.waiting, now, {
      lastSweepTime: swept ? now.toISOString() : budget.lastSweepTime,
    });
    const written = await this.#options.records.writeStatus(budget, status);
    if (written.type === "conflict") return outcome.requeueAfter(CONFLICT_RETRY_MS);
    if (written.type === "gone") return outcome.done();
    const current = written.budget;
    const admissible = admissibleWaiters(current).map(([uid, waiter]) => ({ uid, waiter }));
    if (admissible.length > 0) {
      ctx.logger.debug({ waiters: admissible.map((entry) => entry.waiter.name) }, "budget has room: waking waiters");
      this.#options.wake(namespace, admissible);
    }
    return outcome.requeueAfter(this.#resyncMs);
  }

  /** Entries from what the caches show billing, and entries of objects the selector no longer picks. */
  #countFound(budget: Budget, items: readonly InventoryItem[], ledger: Ledger, now: Date): boolean {
    let changed = false;
    for (const item of items) {
      const entry = ledger.entries[item.uid];
      if (!selects(budget.spec.selector, item.labels)) {
        if (entry !== undefined || ledger.waiting[item.uid] !== undefined) {
          delete ledger.entries[item.uid];
          delete ledger.waiting[item.uid];
          changed = true;
        }
        continue;
      }
      const billing = item.billing;
      if (billing === undefined) continue;
      const held = entry === undefined ? 0 : toMicros(entry.amountUSD);
      if (entry !== undefined && held > billing.micros) continue; // reserved for a larger type still in flight
      if (entry?.state === "Used" && held === billing.micros) continue;
      ledger.entries[item.uid] = {
        kind: item.kind,
        name: item.name,
        amountUSD: toDollars(billing.micros),
        gpus: billing.gpus,
        ...(billing.gpuModel !== undefined ? { gpuModel: billing.gpuModel } : {}),
        purpose: entry?.purpose ?? "Running",
        state: "Used",
        since: now.toISOString(),
      };
      changed = true;
    }
    return changed;
  }

  /** Ask the controllers about entries and waiters without evidence in the caches; release what they say to. */
  async #sweep(budget: Budget, items: readonly InventoryItem[], ledger: Ledger, now: Date): Promise<number> {
    const byUid = new Map(items.map((item) => [item.uid, item]));
    const oldEnough = (since: string) => now.getTime() - timeMs(since) >= this.#sweepMinAgeMs;
    const unproven = (uid: string) => {
      const item = byUid.get(uid);
      return item === undefined || item.billing === undefined;
    };
    const candidates: { uid: string; ask: () => Promise<CheckVerdict>; drop: () => void }[] = [];
    for (const [uid, entry] of Object.entries(ledger.entries)) {
      if (!unproven(uid) || !oldEnough(entry.since)) continue;
      candidates.push({
        uid,
        ask: () => this.#options.check.entry(budget.namespace, uid, entry),
        drop: () => delete ledger.entries[uid],
      });
    }
    // A waiter whose object the cache shows withdraws in its own pass; one the cache lacks may be gone.
    for (const [uid, waiter] of Object.entries(ledger.waiting)) {
      if (byUid.has(uid) || !oldEnough(waiter.since)) continue;
      candidates.push({
        uid,
        ask: () => this.#options.check.waiter(budget.namespace, uid, waiter),
        drop: () => delete ledger.waiting[uid],
      });
    }
    // The largest amounts first: the sweep frees the most room it can with the checks it may make.
    const amount = (uid: string) => toMicros((ledger.entries[uid] ?? ledger.waiting[uid])?.amountUSD ?? 0);
    candidates.sort((a, b) => amount(b.uid) - amount(a.uid));
    let checked = 0;
    for (const candidate of candidates.slice(0, this.#maxChecks)) {
      checked++;
      if ((await candidate.ask()) === "release") candidate.drop();
    }
    return checked;
  }
}

/** The totals a metrics scrape reads of a budget (dollars per hour and objects). */
export function budgetGauges(budget: Budget): {
  limit: number;
  used: number;
  reserved: number;
  waiting: number;
} {
  const totals = totalsOf(budget.entries);
  return {
    limit: budget.spec.maxHourlyUSD,
    used: toDollars(totals.usedMicros),
    reserved: toDollars(totals.reservedMicros),
    waiting: Object.keys(budget.waiting).length,
  };
}
