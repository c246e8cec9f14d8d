// The budgets as the managed lifecycle's SpendGuard (managed/pass.ts), for one kind: every reservation, settlement
// and release through the ledger (admission/budget-ledger.ts: the namespace's budgets read live, every write guarded
// by the budget's resourceVersion). The cached budgets only spare writes and reads that would change nothing: an
// object they show still waiting (and not among the waiters that fit) stays waiting without a write, an entry they
// show right is not written again, an object they show holding nothing releases nothing. Only this process's own
// waiting records are remembered besides: the cache may not show one yet when the object's next pass finds its
// resource as the spec asks (its spec changed back), and a record left there would hold room from the others.
import type { Logger } from "pino";
import { subjectOf } from "../../admission/actions.ts";
import type { Admission, BudgetLedger } from "../../admission/budget-ledger.ts";
import { admissibleWaiters, type Budget, covers, decide, type Need, waitMessage } from "../../admission/ledger.ts";
import { toDollars } from "../../admission/money.ts";
import type { PriceTable } from "../../admission/prices.ts";
import type { BudgetedKind } from "../../api/gpu-budget.ts";
import type { ManagedObject } from "../core/object-model.ts";
import type { CapacityPort, Reservation, SpendGuard } from "../managed/pass.ts";

export interface BudgetGuardOptions {
  kind: BudgetedKind;
  ledger: Pick<BudgetLedger, "reserve" | "settle" | "release">;
  /** The budgets of a namespace as cached. */
  cached(namespace: string): readonly Budget[];
  prices(): PriceTable;
  capacity?: CapacityPort;
  logger: Logger;
  now?: () => number;
}

function reservationOf(admission: Admission): Reservation {
  switch (admission.type) {
    case "admitted":
      return { type: "admitted" };
    case "waiting":
    case "busy":
      return { type: admission.type, message: admission.message };
  }
}

export class BudgetGuard implements SpendGuard {
  readonly #options: BudgetGuardOptions;
  readonly #now: () => number;
  readonly capacity: CapacityPort | undefined;
  /** The uids whose reservation this process was told to wait, until a settle or release clears their record. */
  readonly #recordedWaiting = new Set<string>();

  constructor(options: BudgetGuardOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
    this.capacity = options.capacity;
  }

  prices(): PriceTable {
    return this.#options.prices();
  }

  #subject(mr: ManagedObject) {
    return subjectOf(this.#options.kind, mr.metadata, mr.spec as { priority?: number });
  }

  stillWaiting(mr: ManagedObject, need: Need): Reservation | undefined {
    const subject = this.#subject(mr);
    for (const budget of this.#options.cached(subject.namespace)) {
      const waiter = budget.waiting[subject.uid];
      if (waiter === undefined || !covers(budget, subject)) continue;
      if (admissibleWaiters(budget).some(([uid]) => uid === subject.uid)) continue;
      const decision = decide(budget, subject, need, new Date(this.#now()));
      // Its record must still say what it asks (a spec or priority changed meanwhile: reserve, which rewrites it).
      const same =
        decision.type === "short" &&
        decision.waiter !== undefined &&
        decision.waiter.amountUSD === waiter.amountUSD &&
        decision.waiter.gpus === waiter.gpus &&
        decision.waiter.priority === waiter.priority;
      if (decision.type === "short" && same) return { type: "waiting", message: waitMessage(decision.shortfall) };
    }
    return undefined;
  }

  async reserve(mr: ManagedObject, need: Need): Promise<Reservation> {
    const subject = this.#subject(mr);
    const admission = await this.#options.ledger.reserve(subject, need);
    if (admission.type === "waiting") this.#recordedWaiting.add(subject.uid);
    if (admission.type === "admitted") this.#recordedWaiting.delete(subject.uid);
    return reservationOf(admission);
  }

  async billed(mr: ManagedObject, billing: Need | undefined): Promise<void> {
    const subject = this.#subject(mr);
    const budgets = this.#options.cached(subject.namespace);
    const recorded = this.#recordedWaiting.has(subject.uid);
    if (billing === undefined) {
      if (recorded || budgets.some((budget) => subject.uid in budget.entries || subject.uid in budget.waiting)) {
        await this.#options.ledger.release(subject);
        this.#recordedWaiting.delete(subject.uid);
      }
      return;
    }
    const amountUSD = toDollars(billing.micros);
    const stale = budgets.some((budget) => {
      if (!covers(budget, subject)) return false;
      const entry = budget.entries[subject.uid];
      return entry?.state !== "Used" || entry.amountUSD !== amountUSD || subject.uid in budget.waiting;
    });
    if (stale || recorded) {
      await this.#options.ledger.settle(subject, billing);
      this.#recordedWaiting.delete(subject.uid);
    }
  }

  async release(mr: ManagedObject): Promise<void> {
    try {
      // Live, whatever the cache shows: a reservation made moments ago may not be cached yet.
      const subject = this.#subject(mr);
      await this.#options.ledger.release(subject);
      this.#recordedWaiting.delete(subject.uid);
    } catch (error) {
      this.#options.logger.info(
        { err: error, object: `${mr.metadata.namespace}/${mr.metadata.name}` },
        "budgets not released yet: their sweep releases what the object no longer holds",
      );
    }
  }
}
