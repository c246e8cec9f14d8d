// The arithmetic of one GpuBudget's ledger, pure: does an action fit, what the status says after a change, who
// waits ahead of whom, and the words an object shows while it waits. Amounts are micro-dollars (money.ts). The
// writer (budget-ledger.ts) reads a budget, asks `decide`, and writes the result with the budget's resourceVersion
// as precondition; the budget reconciler uses `nextStatus` and `admissibleWaiters`.
//
// Rules (docs/budgets.md):
// - An entry per object UID holds the object's whole amount (not a difference). A larger amount (a START, a bigger
//   type, a disk growth) reserves the difference; a smaller one never needs room.
// - Used + reserved + what the waiters ahead ask + the new difference must stay within maxHourlyUSD, and likewise
//   for maxGpus (total and per model). Waiters go by priority (capped by maxPriority), then by since: an object
//   arriving later never takes room an earlier one of the same priority is waiting for.
// - A budget over its limit (lowered, or resources found billing) admits no increase and says by how much it is over.

import type { Condition } from "../api/common.ts";
import type { BudgetedKind } from "../api/gpu-budget.ts";
import {
  type GpuBudgetSpec,
  type LedgerEntry,
  MAX_LEDGER_ENTRIES,
  MAX_WAITERS,
  type SpendPurpose,
  type Waiter,
} from "../api/gpu-budget.ts";
import { formatDollarsPerHour, toDollars, toMicros } from "./money.ts";
import { cappedPriority, comparePrecedence, type Precedence, timeMs } from "./priority.ts";
import { selects } from "./selector.ts";

/** The object an action is for. */
export interface Subject {
  kind: BudgetedKind;
  namespace: string;
  name: string;
  uid: string;
  labels?: Readonly<Record<string, string>>;
  /** Its own priority (priorityOf(spec)); each budget caps it with its maxPriority. */
  priority: number;
}

/** What the object will hold once the action is done: its whole amount, not the difference. */
export interface Need {
  micros: number;
  gpus: number;
  gpuModel?: string | undefined;
  purpose: SpendPurpose;
}

/** A budget as read: its spec, its ledger (entries that parse), and what the writer needs to guard its write. */
export interface Budget {
  namespace: string;
  name: string;
  generation?: number | undefined;
  resourceVersion: string;
  spec: GpuBudgetSpec;
  entries: Readonly<Record<string, LedgerEntry>>;
  waiting: Readonly<Record<string, Waiter>>;
  conditions: readonly Condition[];
  lastSweepTime?: string | undefined;
  /** Entries or waiters of the status that did not parse (dropped at the next write). */
  malformed: number;
  /**
   * Set when the spec does not parse (a CRD older than this operator, a hand-made object): the budget then covers
   * every object of its namespace with a limit of 0 (it fails closed: nothing new is spent) and says why.
   */
  specError?: string | undefined;
}

export interface Totals {
  usedMicros: number;
  reservedMicros: number;
  gpus: number;
  gpusByModel: ReadonlyMap<string, number>;
  count: number;
}

/** Why an action does not fit, with what the message needs. */
export interface Shortfall {
  budget: string;
  limit: "dollars" | "gpus" | "modelGpus" | "ledgerFull";
  needMicros: number;
  limitMicros: number;
  committedMicros: number;
  /** Room left for this object: the limit less used, reserved and the waiters ahead (may be negative). */
  freeMicros: number;
  aheadCount: number;
  aheadMicros: number;
  needGpus: number;
  gpuLimit?: number;
  freeGpus?: number;
  gpuModel?: string | undefined;
  /** The largest holders, for "what uses it". */
  topUsers: { kind: string; name: string; micros: number }[];
  heldCount: number;
}

export type Decision =
  /** It holds at least this much already: nothing to write (but a waiter record of it may go). */
  | { type: "held" }
  /** It fits: write this entry (and drop its waiter record). */
  | { type: "fits"; entry: LedgerEntry }
  /** It does not fit: record (or refresh) this waiter, unless the waiting line is full. */
  | { type: "short"; waiter: Waiter | undefined; shortfall: Shortfall };

export function covers(budget: Pick<Budget, "namespace" | "spec">, subject: Subject): boolean {
  return budget.namespace === subject.namespace && selects(budget.spec.selector, subject.labels);
}

export function totalsOf(entries: Readonly<Record<string, LedgerEntry>>): Totals {
  let usedMicros = 0;
  let reservedMicros = 0;
  let gpus = 0;
  let count = 0;
  const gpusByModel = new Map<string, number>();
  for (const entry of Object.values(entries)) {
    const micros = toMicros(entry.amountUSD);
    if (entry.state === "Used") usedMicros += micros;
    else reservedMicros += micros;
    gpus += entry.gpus;
    count++;
    if (entry.gpuModel !== undefined && entry.gpus > 0)
      gpusByModel.set(entry.gpuModel, (gpusByModel.get(entry.gpuModel) ?? 0) + entry.gpus);
  }
  return { usedMicros, reservedMicros, gpus, gpusByModel, count };
}

const precedenceOfWaiter = (uid: string, waiter: Waiter): Precedence => ({
  priority: waiter.priority,
  sinceMs: timeMs(waiter.since),
  uid,
});

/** The waiters in the order they proceed. */
export function waitingLine(budget: Pick<Budget, "waiting">): [string, Waiter][] {
  return Object.entries(budget.waiting).sort(([a, wa], [b, wb]) =>
    comparePrecedence(precedenceOfWaiter(a, wa), precedenceOfWaiter(b, wb)),
  );
}

interface Ask {
  micros: number;
  gpus: number;
  gpuModel?: string | undefined;
}

/** The first limit `ask` breaks given what is committed and asked ahead of it, or undefined when it fits. */
function brokenLimit(
  spec: GpuBudgetSpec,
  totals: Totals,
  ahead: Ask & { byModel: ReadonlyMap<string, number> },
  ask: Ask,
): Pick<Shortfall, "limit" | "gpuLimit" | "freeGpus"> | undefined {
  const limitMicros = toMicros(spec.maxHourlyUSD);
  if (ask.micros > 0 && totals.usedMicros + totals.reservedMicros + ahead.micros + ask.micros > limitMicros)
    return { limit: "dollars" };
  if (ask.gpus === 0) return undefined;
  const total = spec.maxGpus?.total;
  if (total !== undefined && totals.gpus + ahead.gpus + ask.gpus > total)
    return { limit: "gpus", gpuLimit: total, freeGpus: total - totals.gpus - ahead.gpus };
  const model = ask.gpuModel;
  const modelLimit = model === undefined ? undefined : spec.maxGpus?.byModel?.[model];
  if (model !== undefined && modelLimit !== undefined) {
    const held = (totals.gpusByModel.get(model) ?? 0) + (ahead.byModel.get(model) ?? 0);
    if (held + ask.gpus > modelLimit) return { limit: "modelGpus", gpuLimit: modelLimit, freeGpus: modelLimit - held };
  }
  return undefined;
}

function topUsers(entries: Readonly<Record<string, LedgerEntry>>): Shortfall["topUsers"] {
  return Object.values(entries)
    .map((entry) => ({ kind: entry.kind, name: entry.name, micros: toMicros(entry.amountUSD) }))
    .sort((a, b) => b.micros - a.micros || a.name.localeCompare(b.name))
    .slice(0, 3);
}

/** What `ask` adds beyond what `entry` holds. */
function increase(entry: LedgerEntry | undefined, need: Need): Ask {
  const heldMicros = entry === undefined ? 0 : toMicros(entry.amountUSD);
  const sameModel = entry === undefined || entry.gpus === 0 || entry.gpuModel === need.gpuModel;
  const heldGpus = sameModel ? (entry?.gpus ?? 0) : 0;
  return {
    micros: Math.max(0, need.micros - heldMicros),
    gpus: Math.max(0, need.gpus - heldGpus),
    gpuModel: need.gpuModel,
  };
}

/** Does `need` fit `budget` for `subject` at `now`? */
export function decide(budget: Budget, subject: Subject, need: Need, now: Date): Decision {
  const entry = budget.entries[subject.uid];
  const ask = increase(entry, need);
  if (ask.micros === 0 && ask.gpus === 0) return { type: "held" };
  const waiting = budget.waiting[subject.uid];
  const since = waiting?.since ?? now.toISOString();
  const priority = cappedPriority(subject.priority, [budget.spec.maxPriority]);
  const me: Precedence = { priority, sinceMs: timeMs(since), uid: subject.uid };
  const ahead = { micros: 0, gpus: 0, count: 0, byModel: new Map<string, number>() };
  for (const [uid, waiter] of waitingLine(budget)) {
    if (uid === subject.uid || comparePrecedence(precedenceOfWaiter(uid, waiter), me) >= 0) continue;
    ahead.micros += toMicros(waiter.amountUSD);
    ahead.gpus += waiter.gpus;
    ahead.count++;
    if (waiter.gpuModel !== undefined)
      ahead.byModel.set(waiter.gpuModel, (ahead.byModel.get(waiter.gpuModel) ?? 0) + waiter.gpus);
  }
  const totals = totalsOf(budget.entries);
  const ledgerFull = entry === undefined && totals.count >= MAX_LEDGER_ENTRIES;
  const broken = ledgerFull ? { limit: "ledgerFull" as const } : brokenLimit(budget.spec, totals, ahead, ask);
  if (broken === undefined) {
    const amountMicros = Math.max(need.micros, entry === undefined ? 0 : toMicros(entry.amountUSD));
    return {
      type: "fits",
      entry: {
        kind: subject.kind,
        name: subject.name,
        amountUSD: toDollars(amountMicros),
        gpus: Math.max(need.gpus, entry?.gpus ?? 0),
        ...(need.gpuModel !== undefined ? { gpuModel: need.gpuModel } : {}),
        purpose: need.purpose,
        state: "Reserved",
        since: now.toISOString(),
      },
    };
  }
  const limitMicros = toMicros(budget.spec.maxHourlyUSD);
  const committedMicros = totals.usedMicros + totals.reservedMicros;
  const shortfall: Shortfall = {
    budget: budget.name,
    ...broken,
    needMicros: ask.micros,
    limitMicros,
    committedMicros,
    freeMicros: limitMicros - committedMicros - ahead.micros,
    aheadCount: ahead.count,
    aheadMicros: ahead.micros,
    needGpus: ask.gpus,
    gpuModel: need.gpuModel,
    topUsers: topUsers(budget.entries),
    heldCount: totals.count,
  };
  const lineFull = waiting === undefined && Object.keys(budget.waiting).length >= MAX_WAITERS;
  const waiter: Waiter | undefined = lineFull
    ? undefined
    : {
        kind: subject.kind,
        name: subject.name,
        amountUSD: toDollars(ask.micros),
        gpus: ask.gpus,
        ...(need.gpuModel !== undefined ? { gpuModel: need.gpuModel } : {}),
        purpose: need.purpose,
        priority,
        since,
      };
  return { type: "short", waiter, shortfall };
}

/**
 * The words a waiting object shows: how much is missing, in which budget, what uses it, and how many wait ahead.
 * `GpuBudget team-gpus: needs $1.10/h, $0.40/h free of $22.00/h (missing $0.70/h); used or reserved by 19 objects,
 * most by GpuVm trainer ($14.48/h), GpuVm a ($1.10/h); 2 wait ahead ($2.20/h)`.
 */
export function waitMessage(shortfall: Shortfall): string {
  const head = `GpuBudget ${shortfall.budget}`;
  const users =
    shortfall.topUsers.length === 0
      ? "nothing holds any of it"
      : `used or reserved by ${shortfall.heldCount} object${shortfall.heldCount === 1 ? "" : "s"}, most by ${shortfall.topUsers
          .map((user) => `${user.kind} ${user.name} (${formatDollarsPerHour(user.micros)})`)
          .join(", ")}`;
  const ahead =
    shortfall.aheadCount === 0
      ? ""
      : `; ${shortfall.aheadCount} wait${shortfall.aheadCount === 1 ? "s" : ""} ahead (${formatDollarsPerHour(shortfall.aheadMicros)})`;
  switch (shortfall.limit) {
    case "ledgerFull":
      return `${head}: its ledger holds ${MAX_LEDGER_ENTRIES} objects, the most it can; split the namespace's objects over more budgets (selectors)`;
    case "gpus":
    case "modelGpus": {
      const which = shortfall.limit === "gpus" ? "maxGpus.total" : `maxGpus.byModel.${shortfall.gpuModel}`;
      const model = shortfall.limit === "modelGpus" ? `${shortfall.gpuModel} ` : "";
      const free = Math.max(0, shortfall.freeGpus ?? 0);
      return `${head}: needs ${shortfall.needGpus} ${model}GPU${shortfall.needGpus === 1 ? "" : "s"}, ${free} of ${shortfall.gpuLimit} free (${which})${ahead}`;
    }
    case "dollars": {
      const over = shortfall.committedMicros - shortfall.limitMicros;
      if (over > 0) {
        return `${head} is over its limit by ${formatDollarsPerHour(over)} (${formatDollarsPerHour(shortfall.committedMicros)} of ${formatDollarsPerHour(shortfall.limitMicros)}): needs ${formatDollarsPerHour(shortfall.needMicros)}; ${users}${ahead}`;
      }
      const free = Math.max(0, shortfall.freeMicros);
      const missing = shortfall.needMicros - free;
      return `${head}: needs ${formatDollarsPerHour(shortfall.needMicros)}, ${formatDollarsPerHour(free)} free of ${formatDollarsPerHour(shortfall.limitMicros)} (missing ${formatDollarsPerHour(missing)}); ${users}${ahead}`;
    }
  }
}

/** The waiters that fit now, in order: a prefix of the line (the first that does not fit stops it). */
export function admissibleWaiters(budget: Budget): [string, Waiter][] {
  const totals = totalsOf(budget.entries);
  const ahead = { micros: 0, gpus: 0, byModel: new Map<string, number>() };
  const admitted: [string, Waiter][] = [];
  for (const [uid, waiter] of waitingLine(budget)) {
    if (
      brokenLimit(budget.spec, totals, ahead, {
        micros: toMicros(waiter.amountUSD),
        gpus: waiter.gpus,
        gpuModel: waiter.gpuModel,
      }) !== undefined
    )
      break;
    admitted.push([uid, waiter]);
    ahead.micros += toMicros(waiter.amountUSD);
    ahead.gpus += waiter.gpus;
    if (waiter.gpuModel !== undefined)
      ahead.byModel.set(waiter.gpuModel, (ahead.byModel.get(waiter.gpuModel) ?? 0) + waiter.gpus);
  }
  return admitted;
}

/** The budget's GpuBudgetStatus after a change: totals, conditions, observedGeneration. */
export interface BudgetStatusShape {
  observedGeneration?: number;
  conditions: Condition[];
  usedUSD: number;
  reservedUSD: number;
  overLimitUSD: number;
  gpus: number;
  waitingCount: number;
  waitingUSD: number;
  entries: Record<string, LedgerEntry>;
  waiting: Record<string, Waiter>;
  lastSweepTime?: string;
}

/** What is over: dollars above the limit, and GPU limits exceeded (after a limit was lowered). */
function overages(spec: GpuBudgetSpec, totals: Totals): { micros: number; gpus: string[] } {
  const micros = Math.max(0, totals.usedMicros + totals.reservedMicros - toMicros(spec.maxHourlyUSD));
  const gpus: string[] = [];
  const total = spec.maxGpus?.total;
  if (total !== undefined && totals.gpus > total) gpus.push(`${totals.gpus} GPUs of ${total} (maxGpus.total)`);
  for (const [model, limit] of Object.entries(spec.maxGpus?.byModel ?? {})) {
    const held = totals.gpusByModel.get(model) ?? 0;
    if (held > limit) gpus.push(`${held} ${model} GPUs of ${limit}`);
  }
  return { micros, gpus };
}

function condition(
  previous: readonly Condition[],
  type: "Ready" | "Stalled" | "Reconciling",
  status: "True" | "False",
  reason: string,
  message: string,
  generation: number | undefined,
  now: Date,
): Condition {
  const before = previous.find((candidate) => candidate.type === type);
  const lastTransitionTime =
    before !== undefined && before.status === status
      ? before.lastTransitionTime
      : now.toISOString().replace(/\.\d+Z$/, "Z");
  return {
    type,
    status,
    reason,
    message,
    lastTransitionTime,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
}

/** The status a budget should have with these entries and waiters (its spec and generation as read). */
export function nextStatus(
  budget: Budget,
  entries: Readonly<Record<string, LedgerEntry>>,
  waiting: Readonly<Record<string, Waiter>>,
  now: Date,
  options: { lastSweepTime?: string | undefined } = {},
): BudgetStatusShape {
  const totals = totalsOf(entries);
  const over = overages(budget.spec, totals);
  const committed = totals.usedMicros + totals.reservedMicros;
  const waitingMicros = Object.values(waiting).reduce((sum, waiter) => sum + toMicros(waiter.amountUSD), 0);
  const waitCount = Object.keys(waiting).length;
  const waits =
    waitCount === 0 ? "" : `; ${waitCount} wait${waitCount === 1 ? "s" : ""} (${formatDollarsPerHour(waitingMicros)})`;
  const use = `${formatDollarsPerHour(committed)} of ${formatDollarsPerHour(toMicros(budget.spec.maxHourlyUSD))} used or reserved by ${totals.count} object${totals.count === 1 ? "" : "s"}`;
  const gpus = totals.gpus > 0 ? `, ${totals.gpus} GPU${totals.gpus === 1 ? "" : "s"}` : "";
  const generation = budget.generation;
  const isOver = over.micros > 0 || over.gpus.length > 0;
  const overText = [...(over.micros > 0 ? [`by ${formatDollarsPerHour(over.micros)}`] : []), ...over.gpus].join(", ");
  const message =
    budget.specError !== undefined
      ? `the spec is invalid (${budget.specError}): no new spend is admitted until it is fixed; ${use}${gpus}${waits}`
      : isOver
        ? `over its limit ${overText}: ${use}${gpus}; nothing is deleted, new spend waits until the use is below the limit${waits}`
        : `${use}${gpus}${waits}`;
  const stalled = isOver || budget.specError !== undefined;
  const reason = budget.specError !== undefined ? "InvalidSpec" : isOver ? "OverLimit" : "WithinLimit";
  const conditions = [
    condition(budget.conditions, "Ready", stalled ? "False" : "True", reason, message, generation, now),
    condition(
      budget.conditions,
      "Stalled",
      stalled ? "True" : "False",
      reason,
      stalled ? message : "",
      generation,
      now,
    ),
    condition(budget.conditions, "Reconciling", "False", reason, "", generation, now),
  ].map((entry) => (entry.message === "" ? withoutMessage(entry) : entry));
  const lastSweepTime = options.lastSweepTime ?? budget.lastSweepTime;
  return {
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    conditions,
    usedUSD: toDollars(totals.usedMicros),
    reservedUSD: toDollars(totals.reservedMicros),
    overLimitUSD: toDollars(over.micros),
    gpus: totals.gpus,
    waitingCount: waitCount,
    waitingUSD: toDollars(waitingMicros),
    entries: { ...entries },
    waiting: { ...waiting },
    ...(lastSweepTime !== undefined ? { lastSweepTime } : {}),
  };
}

function withoutMessage(entry: Condition): Condition {
  const { message: _message, ...rest } = entry;
  return rest;
}
