// The ledger's writes: reserve before a cloud call that raises spend, settle once the cloud confirmed it, release
// when spend stops. Every write goes to one budget's status with its resourceVersion as precondition (ResourceQuota's
// pattern): a writer whose read is stale gets a conflict, reads the namespace's budgets again from the API server
// (never a cache: a budget the cache has not shown yet must not be skipped) and decides again. So any number of
// replicas, shards and crashed processes reserving at once never hold more than a limit: each admitted amount was
// checked against the very version it was added to.
//
// The order of a create (the wiring in the controllers keeps it): write the create intent (createPending, or
// actionPending for a START or a type change), then reserve, then call the cloud. A crash after the reservation
// leaves an entry that counts (never less than what may be spent), and the object's next pass finds it (reserve is
// idempotent: an entry holding enough is "held"). The sweep (budget-reconciler.ts) releases an entry only when the
// controllers' check, from live reads, finds neither an intent nor a billed resource: since the intent is written
// before the entry, an entry whose object shows no intent at a read made after the entry was is not in use.
//
// An object covered by several budgets must fit each: budgets are taken in name order (so racing writers meet them
// in the same order), and an object short in one gives back what it took in the others before it waits.
import type { LedgerEntry, Waiter } from "../api/gpu-budget.ts";
import {
  type Budget,
  type BudgetStatusShape,
  covers,
  type Decision,
  decide,
  type Need,
  nextStatus,
  type Shortfall,
  type Subject,
  waitMessage,
} from "./ledger.ts";
import { toDollars } from "./money.ts";

export type StatusWrite = { type: "written"; budget: Budget } | { type: "conflict" } | { type: "gone" };

/** The Kubernetes side of the budgets (budget-records.ts adapts it onto the runtime's KubeClient; tests fake it). */
export interface BudgetRecords {
  /** The budgets of a namespace, read from the API server (a quorum read, not a cache). */
  list(namespace: string): Promise<Budget[]>;
  /** Write the status, with the budget's resourceVersion as precondition; an unchanged status is not sent. */
  writeStatus(budget: Budget, status: BudgetStatusShape): Promise<StatusWrite>;
}

export type Admission =
  /** Reserved (or held already) in every budget that covers the object; none covers it: `budgets` is empty. */
  | { type: "admitted"; budgets: string[] }
  /** Short in `budget`: the object waits (recorded in that budget's waiting line); `message` says why. */
  | { type: "waiting"; budget: string; message: string; shortfall: Shortfall }
  /** Writers kept conflicting beyond the attempts allowed: nothing was reserved; try again shortly. */
  | { type: "busy"; message: string };

export type LedgerChange = { type: "done"; budgets: string[] } | { type: "busy"; message: string };

export interface BudgetLedgerOptions {
  records: BudgetRecords;
  now?: () => number;
  /** Writes to one budget before `busy` (each conflict re-reads it). Default 12. */
  maxAttempts?: number;
  /** Pause between conflicting attempts (jittered, growing); tests pass 0. Default 20 ms. */
  retryBaseMs?: number;
  random?: () => number;
}

type Change = { entries?: Record<string, LedgerEntry | null>; waiting?: Record<string, Waiter | null> };
/** What an object had in a budget before this call changed it. */
type Taken = { budget: string; entry?: LedgerEntry | undefined; waiter?: Waiter | undefined };

/** The entries and waiters of `budget` with `change` applied (null removes). */
function applied(budget: Budget, change: Change): Pick<Budget, "entries" | "waiting"> {
  const entries = { ...budget.entries };
  const waiting = { ...budget.waiting };
  for (const [uid, entry] of Object.entries(change.entries ?? {})) {
    if (entry === null) delete entries[uid];
    else entries[uid] = entry;
  }
  for (const [uid, waiter] of Object.entries(change.waiting ?? {})) {
    if (waiter === null) delete waiting[uid];
    else waiting[uid] = waiter;
  }
  return { entries, waiting };
}

function changes(budget: Budget, change: Change): boolean {
  const differs = <T>(current: Readonly<Record<string, T>>, wanted: Record<string, T | null> | undefined) =>
    Object.entries(wanted ?? {}).some(([uid, value]) =>
      value === null ? uid in current : JSON.stringify(current[uid]) !== JSON.stringify(value),
    );
  return differs(budget.entries, change.entries) || differs(budget.waiting, change.waiting);
}

/** One pass over one budget: what to change in it (undefined: nothing), and what it decided. */
type Step<T> = (budget: Budget) => { change?: Change; result: T };

export class BudgetLedger {
  readonly #records: BudgetRecords;
  readonly #now: () => number;
  readonly #maxAttempts: number;
  readonly #retryBaseMs: number;
  readonly #random: () => number;

  constructor(options: BudgetLedgerOptions) {
    this.#records = options.records;
    this.#now = options.now ?? Date.now;
    this.#maxAttempts = options.maxAttempts ?? 12;
    this.#retryBaseMs = options.retryBaseMs ?? 20;
    this.#random = options.random ?? Math.random;
  }

  /**
   * Reserve `need` for `subject` in every budget that covers it, before the cloud call that raises its spend.
   * Idempotent: an entry that holds enough already is left as it is.
   */
  async reserve(subject: Subject, need: Need): Promise<Admission> {
    const reads = new NamespaceReads(this.#records, subject.namespace);
    const covering = (await reads.all()).filter((budget) => covers(budget, subject)).map((budget) => budget.name);
    const taken: Taken[] = [];
    for (const name of covering.sort()) {
      let previous: Omit<Taken, "budget"> = {};
      const outcome = await this.#update(reads, name, (budget) => {
        previous = { entry: budget.entries[subject.uid], waiter: budget.waiting[subject.uid] };
        const decision: Decision = decide(budget, subject, need, new Date(this.#now()));
        return { change: changeOf(subject.uid, budget, decision), result: decision };
      });
      if (outcome.type === "busy") {
        await this.#giveBack(reads, subject.uid, taken);
        return outcome;
      }
      const decision = outcome.result;
      if (decision?.type === "short") {
        await this.#giveBack(reads, subject.uid, taken);
        return {
          type: "waiting",
          budget: name,
          message: waitMessage(decision.shortfall),
          shortfall: decision.shortfall,
        };
      }
      if (decision?.type === "fits") taken.push({ budget: name, ...previous });
    }
    return { type: "admitted", budgets: covering };
  }

  /**
   * The cloud confirmed the action: `subject` now bills `actual` (its whole amount; less than reserved gives the
   * rest back, e.g. after a change to a smaller type). The truth is recorded even above the limit.
   */
  async settle(subject: Subject, actual: Need): Promise<LedgerChange> {
    const entry = (previous: LedgerEntry | undefined): LedgerEntry => ({
      kind: subject.kind,
      name: subject.name,
      amountUSD: toDollars(actual.micros),
      gpus: actual.gpus,
      ...(actual.gpuModel !== undefined ? { gpuModel: actual.gpuModel } : {}),
      purpose: previous?.purpose ?? actual.purpose,
      state: "Used",
      since:
        previous?.state === "Used" && previous.amountUSD === toDollars(actual.micros)
          ? previous.since
          : new Date(this.#now()).toISOString(),
    });
    return this.#everyCovering(subject, (budget) => ({
      change: { entries: { [subject.uid]: entry(budget.entries[subject.uid]) }, waiting: { [subject.uid]: null } },
      result: undefined,
    }));
  }

  /** Spend stopped (a STOP, a delete, a create refused for good): the object holds nothing and waits for nothing. */
  async release(subject: Pick<Subject, "namespace" | "uid">): Promise<LedgerChange> {
    const reads = new NamespaceReads(this.#records, subject.namespace);
    const holding = (await reads.all())
      .filter((budget) => subject.uid in budget.entries || subject.uid in budget.waiting)
      .map((budget) => budget.name);
    for (const name of holding) {
      const outcome = await this.#update(reads, name, () => ({
        change: { entries: { [subject.uid]: null }, waiting: { [subject.uid]: null } },
        result: undefined,
      }));
      if (outcome.type === "busy") return outcome;
    }
    return { type: "done", budgets: holding };
  }

  async #everyCovering(subject: Subject, step: Step<undefined>): Promise<LedgerChange> {
    const reads = new NamespaceReads(this.#records, subject.namespace);
    const covering = (await reads.all()).filter((budget) => covers(budget, subject)).map((budget) => budget.name);
    for (const name of covering.sort()) {
      const outcome = await this.#update(reads, name, step);
      if (outcome.type === "busy") return outcome;
    }
    return { type: "done", budgets: covering };
  }

  /**
   * Restore what this call changed in earlier budgets: an object short in one budget holds nothing new in any, and
   * keeps its place in the lines it was waiting in.
   */
  async #giveBack(reads: NamespaceReads, uid: string, taken: Taken[]) {
    for (const { budget, entry, waiter } of taken) {
      // Best effort: an entry left behind counts against the limit (the safe side) until the object's next pass
      // reserves again or the sweep releases it.
      await this.#update(reads, budget, () => ({
        change: { entries: { [uid]: entry ?? null }, waiting: { [uid]: waiter ?? null } },
        result: undefined,
      }));
    }
  }

  /** Apply `step` to the budget `name`, re-reading and re-deciding on each conflict. */
  async #update<T>(
    reads: NamespaceReads,
    name: string,
    step: Step<T>,
  ): Promise<{ type: "done"; result: T | undefined } | { type: "busy"; message: string }> {
    for (let attempt = 0; attempt < this.#maxAttempts; attempt++) {
      const budget = await reads.get(name, attempt > 0);
      if (budget === undefined) return { type: "done", result: undefined };
      const { change, result } = step(budget);
      if (change === undefined || !changes(budget, change)) return { type: "done", result };
      const { entries, waiting } = applied(budget, change);
      const written = await this.#records.writeStatus(
        budget,
        nextStatus(budget, entries, waiting, new Date(this.#now())),
      );
      if (written.type === "written") {
        reads.remember(written.budget);
        return { type: "done", result };
      }
      if (written.type === "gone") {
        reads.forget(name);
        return { type: "done", result: undefined };
      }
      await this.#pause(attempt);
    }
    return {
      type: "busy",
      message: `GpuBudget ${name}: ${this.#maxAttempts} writes in a row met a newer version (other writers); trying again`,
    };
  }

  async #pause(attempt: number): Promise<void> {
    if (this.#retryBaseMs <= 0) return;
    const ms = this.#retryBaseMs * Math.min(2 ** attempt, 32) * (0.5 + this.#random());
    await new Promise((resolve) => setTimeout(resolve, ms));
  }
}

/** The change a decision asks for in one budget. */
function changeOf(uid: string, budget: Budget, decision: Decision): Change | undefined {
  switch (decision.type) {
    case "held":
      return uid in budget.waiting ? { waiting: { [uid]: null } } : undefined;
    case "fits":
      return { entries: { [uid]: decision.entry }, waiting: { [uid]: null } };
    case "short":
      return decision.waiter === undefined ? undefined : { waiting: { [uid]: decision.waiter } };
  }
}

/** The budgets of one namespace during one ledger call: read once, read again after a conflict. */
class NamespaceReads {
  readonly #records: BudgetRecords;
  readonly #namespace: string;
  #budgets: Map<string, Budget> | undefined;

  constructor(records: BudgetRecords, namespace: string) {
    this.#records = records;
    this.#namespace = namespace;
  }

  async all(): Promise<Budget[]> {
    return [...(await this.#read(false)).values()];
  }

  async get(name: string, fresh: boolean): Promise<Budget | undefined> {
    return (await this.#read(fresh)).get(name);
  }

  remember(budget: Budget): void {
    this.#budgets?.set(budget.name, budget);
  }

  forget(name: string): void {
    this.#budgets?.delete(name);
  }

  async #read(fresh: boolean): Promise<Map<string, Budget>> {
    if (this.#budgets === undefined || fresh) {
      const listed = await this.#records.list(this.#namespace);
      this.#budgets = new Map(listed.map((budget) => [budget.name, budget]));
    }
    return this.#budgets;
  }
}
