// The spend guard's use of the cached budgets: they only spare writes, so a cache that lags behind the ledger's own
// live writes never leaves a record in a budget. The ledger is the real one over budgets kept as an API server keeps
// them; the cache is a snapshot taken before the guard's last write, as an informer shows it under load.
import pino from "pino";
import { describe, expect, it } from "vitest";
import { BudgetLedger } from "../../../src/admission/budget-ledger.ts";
import type { Budget, Need } from "../../../src/admission/ledger.ts";
import { DEFAULT_PRICES } from "../../../src/admission/prices.ts";
import { BudgetGuard } from "../../../src/controllers/budgets/guard.ts";
import type { ManagedObject } from "../../../src/controllers/core/object-model.ts";
import { MemoryBudgets } from "../../admission/memory-budgets.ts";

const price = (type: string): Omit<Need, "purpose"> => {
  const spend = DEFAULT_PRICES.vm(type);
  if (spend === undefined) throw new Error(`${type} has no price`);
  return spend;
};
const RUNNING_A40 = { ...price("a40.1x"), purpose: "Running" } as const;
const TO_A40_2X = { ...price("a40.2x"), purpose: "TypeChange" } as const;

const vm = (name: string): ManagedObject =>
  ({
    apiVersion: "gpucloud.dev/v1alpha1",
    kind: "GpuVm",
    metadata: { name, namespace: "team", uid: `uid-${name}`, generation: 1 },
    spec: {},
    status: {},
  }) as unknown as ManagedObject;

describe("BudgetGuard", () => {
  it("a waiter whose resource is seen as its spec asks (its spec changed back) leaves the line, though the cache does not show its record yet", async () => {
    const memory = new MemoryBudgets();
    memory.put("team", "gpus", { maxHourlyUSD: 2.2 });
    const ledger = new BudgetLedger({ records: memory.records(), retryBaseMs: 0 });
    // Up to date until `frozen` is set, then the snapshot an informer that lags would show.
    let frozen: Budget[] | undefined;
    const guard = new BudgetGuard({
      kind: "GpuVm",
      ledger,
      cached: () => frozen ?? [memory.read("team", "gpus")],
      prices: () => DEFAULT_PRICES,
      logger: pino({ level: "silent" }),
    });
    // a and b run, the budget full; a asks for a larger type and must wait.
    for (const name of ["a", "b"]) {
      expect((await guard.reserve(vm(name), RUNNING_A40)).type).toBe("admitted");
      await guard.billed(vm(name), RUNNING_A40);
    }
    expect(memory.read("team", "gpus").entries["uid-a"]).toMatchObject({ state: "Used" });
    frozen = [memory.read("team", "gpus")];
    expect((await guard.reserve(vm("a"), TO_A40_2X)).type).toBe("waiting");
    expect(Object.keys(memory.read("team", "gpus").waiting)).toEqual(["uid-a"]);

    // Its spec back to a40.1x: the next pass finds it as asked, while the cache still shows the budget from before.
    await guard.billed(vm("a"), RUNNING_A40);
    const budget = memory.read("team", "gpus");
    expect(budget.waiting).toEqual({});
    expect(budget.entries["uid-a"]).toMatchObject({ state: "Used", amountUSD: 1.1 });
  });

  it("an entry the cache shows right is not written again", async () => {
    const memory = new MemoryBudgets();
    memory.put("team", "gpus", { maxHourlyUSD: 2.2 });
    const ledger = new BudgetLedger({ records: memory.records(), retryBaseMs: 0 });
    const guard = new BudgetGuard({
      kind: "GpuVm",
      ledger,
      cached: () => [memory.read("team", "gpus")],
      prices: () => DEFAULT_PRICES,
      logger: pino({ level: "silent" }),
    });
    await guard.reserve(vm("a"), RUNNING_A40);
    await guard.billed(vm("a"), RUNNING_A40);
    const writes = memory.writes;
    await guard.billed(vm("a"), RUNNING_A40);
    expect(memory.writes).toBe(writes);
  });
});
