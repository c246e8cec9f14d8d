// The budget reconciler: counts what the caches show billing (a budget made after its VMs says it is over), drops
// the entries of objects its selector no longer picks, releases an entry or a waiter only when the controllers'
// live check says so (and never a young one), writes nothing when nothing changed, and wakes the waiters that fit.
import pino from "pino";
import { describe, expect, it } from "vitest";
import { BudgetLedger } from "../../src/admission/budget-ledger.ts";
import {
  BudgetReconciler,
  type CheckVerdict,
  type HolderCheck,
  type InventoryItem,
} from "../../src/admission/budget-reconciler.ts";
import type { LedgerEntry, Waiter } from "../../src/api/gpu-budget.ts";
import { MemoryBudgets } from "./memory-budgets.ts";
import { CREATE_A40, subject } from "./subjects.ts";

const ctx = {
  signal: new AbortController().signal,
  logger: pino({ level: "silent" }),
  reconcileId: "r",
  priority: "normal" as const,
};
const MINUTE = 60_000;

function rig(options: { items?: InventoryItem[]; verdict?: (uid: string) => CheckVerdict } = {}) {
  let clock = Date.parse("2026-11-28T12:00:00Z");
  const memory = new MemoryBudgets();
  const items = options.items ?? [];
  const checks: string[] = [];
  const woken: string[] = [];
  const verdict = options.verdict ?? (() => "keep");
  const check: HolderCheck = {
    entry: async (_namespace, uid: string, _entry: LedgerEntry) => {
      checks.push(`entry ${uid}`);
      return verdict(uid);
    },
    waiter: async (_namespace, uid: string, _waiter: Waiter) => {
      checks.push(`waiter ${uid}`);
      return verdict(uid);
    },
  };
  const reconciler = new BudgetReconciler({
    records: memory.records(),
    cached: (namespace, name) => memory.read(namespace, name),
    check,
    inventory: { objects: (namespace) => (namespace === "team" ? items : []) },
    wake: (_namespace, waiters) => woken.push(...waiters.map((entry) => entry.waiter.name)),
    now: () => clock,
  });
  const ledger = new BudgetLedger({ records: memory.records(), now: () => clock, retryBaseMs: 0 });
  return {
    memory,
    items,
    checks,
    woken,
    ledger,
    advance: (ms: number) => {
      clock += ms;
    },
    pass: () => reconciler.reconcile({ namespace: "team", name: "gpus" }, ctx),
    budget: () => memory.read("team", "gpus"),
  };
}

const running = (name: string, labels: Record<string, string> = {}): InventoryItem => ({
  kind: "GpuVm",
  name,
  uid: `uid-${name}`,
  labels,
  billing: { ...CREATE_A40, purpose: "Running" },
});

describe("BudgetReconciler", () => {
  it("counts the VMs running before the budget existed, and says it is over", async () => {
    const items = Array.from({ length: 12 }, (_, i) => running(`vm${i}`));
    const { memory, pass, budget } = rig({ items });
    memory.put("team", "gpus", { maxHourlyUSD: 11 });
    expect(await pass()).toEqual({ type: "requeueAfter", ms: 60_000 });
    expect(
      Object.values(budget().entries).every((entry) => entry.state === "Used" && entry.purpose === "Running"),
    ).toBe(true);
    expect(budget().conditions.find((c) => c.type === "Stalled")).toMatchObject({
      status: "True",
      reason: "OverLimit",
    });
    expect(budget().conditions[0]?.observedGeneration).toBe(1);
    // Nothing changed: the next pass writes nothing.
    const writes = memory.writes;
    await pass();
    expect(memory.writes).toBe(writes);
  });

  it("turns a reservation into Used once the VM runs, and drops objects the selector no longer picks", async () => {
    const items: InventoryItem[] = [];
    const { memory, ledger, pass, budget } = rig({ items });
    memory.put("team", "gpus", { maxHourlyUSD: 22, selector: { matchLabels: { team: "vision" } } });
    await ledger.reserve(subject("a", 0, { team: "vision" }), CREATE_A40);
    await ledger.reserve(subject("b", 0, { team: "vision" }), CREATE_A40);
    items.push(running("a", { team: "vision" }), { ...running("b", { team: "nlp" }) });
    await pass();
    expect(budget().entries["uid-a"]).toMatchObject({ state: "Used", purpose: "Create" });
    expect(budget().entries["uid-b"]).toBeUndefined();
  });

  it("releases what the check says to release, keeps what it keeps or is unsure of, and never checks young entries", async () => {
    const verdicts: Record<string, CheckVerdict> = { "uid-gone": "release", "uid-busy": "keep", "uid-flaky": "unsure" };
    const { memory, ledger, pass, budget, checks, advance } = rig({ verdict: (uid) => verdicts[uid] ?? "keep" });
    memory.put("team", "gpus", { maxHourlyUSD: 22 });
    for (const name of ["gone", "busy", "flaky"]) await ledger.reserve(subject(name), CREATE_A40);
    await pass();
    expect(checks).toEqual([]);
    advance(3 * MINUTE);
    await pass();
    expect(checks.sort()).toEqual(["entry uid-busy", "entry uid-flaky", "entry uid-gone"]);
    expect(Object.keys(budget().entries).sort()).toEqual(["uid-busy", "uid-flaky"]);
    expect(budget().lastSweepTime).toBe("2026-11-28T12:03:00.000Z");
  });

  it("releases the waiter of a deleted object after the check and wakes the waiters that fit, in order", async () => {
    const items = Array.from({ length: 20 }, (_, i) => running(`vm${i}`));
    const { memory, ledger, pass, woken, advance, budget } = rig({
      items,
      verdict: (uid) => (["uid-deleted", "uid-vm0", "uid-vm1"].includes(uid) ? "release" : "keep"),
    });
    memory.put("team", "gpus", { maxHourlyUSD: 22 });
    await pass();
    for (const [name, priority] of [
      ["deleted", 0],
      ["w1", 0],
      ["w2", 0],
      ["urgent", 5],
    ] as const) {
      expect((await ledger.reserve(subject(name, priority), CREATE_A40)).type).toBe("waiting");
      advance(1000);
    }
    // The waiters' objects other than "deleted" are in the caches (not running yet).
    items.push(...["w1", "w2", "urgent"].map((name) => ({ ...running(name), billing: undefined })));
    // Two VMs deleted: their entries go through the check too (the cache lacks them now).
    items.splice(0, 2);
    advance(3 * MINUTE);
    await pass();
    expect(budget().waiting["uid-deleted"]).toBeUndefined();
    expect(woken).toEqual(["urgent", "w1"]);
  });
});
