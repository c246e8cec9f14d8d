// Budgets in front of the cloud calls (issue #32 part B), over the harness (the simulator and the Kubernetes API test
// double, the operator in-process): a create that does not fit waits (BudgetExceeded, with the budget's message)
// and proceeds by itself when room frees, highest priority first; STOP releases and START reserves; a running
// VM's change to a larger type waits; a disk's create and growth reserve; the ledger's entries settle once the
// resources bill, and go with their objects.
import { afterEach, describe, expect, it } from "vitest";
import { GROUP, VERSION } from "../../src/api/common.ts";
import { createIn, type Env, type ManagedView, reasonOf, startEnv, vmSpec, waitIn } from "./harness.ts";

let env: Env | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

interface BudgetView {
  status?: {
    usedUSD?: number;
    reservedUSD?: number;
    waitingCount?: number;
    entries?: Record<string, { name: string; state: string; amountUSD: number; purpose: string }>;
    waiting?: Record<string, { name: string; priority: number }>;
  };
}

const ready = (object: ManagedView | undefined) =>
  object?.status?.conditions?.find((c) => c.type === "Ready")?.status === "True" &&
  object.status.observedGeneration === object.metadata.generation;

/** The VMs the simulator holds, by name. */
async function cloudVms(e: Env): Promise<Map<string, { state: string; type: string }>> {
  const page = await e.cloud<{ items: { name: string; state: string; type: string }[] }>("vms?limit=500");
  return new Map(page.items.map((vm) => [vm.name, vm]));
}

const a40 = (extra: Record<string, unknown> = {}) => vmSpec({ type: "a40.1x", ...extra });

describe("a GpuBudget in front of the creates", () => {
  it("admits what fits; the rest waits with the budget's message and proceeds by priority when room frees", async () => {
    env = await startEnv();
    const e = env;
    await e.apply("GpuBudget", "gpus", { maxHourlyUSD: 2.2 });
    await e.apply("GpuVm", "first", a40());
    await e.apply("GpuVm", "second", a40());
    await e.waitReady("GpuVm", "first", 15_000);
    await e.waitReady("GpuVm", "second", 15_000);
    await e.apply("GpuVm", "low", a40({ priority: 1 }));
    await e.apply("GpuVm", "high", a40({ priority: 50 }));
    for (const name of ["low", "high"]) {
      const waiting = await e.waitFor("GpuVm", name, (o) => reasonOf(o) === "BudgetExceeded", 15_000);
      const message = waiting?.status?.conditions?.find((c) => c.type === "Ready")?.message ?? "";
      expect(message).toMatch(
        /^GpuBudget gpus: needs \$1\.10\/h, \$0\.00\/h free of \$2\.20\/h \(missing \$1\.10\/h\)/,
      );
      expect(waiting?.status?.conditions?.find((c) => c.type === "Stalled")?.status).toBe("True");
    }
    expect([...(await cloudVms(e)).keys()].sort()).toEqual(["default-first", "default-second"]);
    const full = await e.waitFor("GpuBudget", "gpus", (o) => (o as BudgetView).status?.usedUSD === 2.2, 15_000);
    expect((full as BudgetView).status).toMatchObject({ usedUSD: 2.2, reservedUSD: 0, waitingCount: 2 });

    // One goes: the higher priority takes its room, the lower keeps waiting.
    await e.remove("GpuVm", "first");
    await e.waitReady("GpuVm", "high", 20_000);
    expect(reasonOf(await e.get("GpuVm", "low"))).toBe("BudgetExceeded");
    expect([...(await cloudVms(e)).keys()].sort()).toEqual(["default-high", "default-second"]);
    const after = await e.waitFor("GpuBudget", "gpus", (o) => (o as BudgetView).status?.waitingCount === 1, 15_000);
    const names = Object.values((after as BudgetView).status?.entries ?? {}).map((entry) => entry.name);
    expect(names.sort()).toEqual(["high", "second"]);
  });

  it("a STOP gives the room back, a START waits for it; a running VM's larger type waits too", async () => {
    env = await startEnv();
    const e = env;
    await e.apply("GpuBudget", "gpus", { maxHourlyUSD: 2.2 });
    await e.apply("GpuVm", "a", a40());
    await e.apply("GpuVm", "b", a40());
    await e.waitReady("GpuVm", "a", 15_000);
    await e.waitReady("GpuVm", "b", 15_000);
    // A larger type for a running VM needs the difference first: nothing is stopped meanwhile.
    await e.patchSpec("GpuVm", "a", { type: "a40.2x" });
    await e.waitFor("GpuVm", "a", (o) => reasonOf(o) === "BudgetExceeded", 15_000);
    expect((await cloudVms(e)).get("default-a")).toMatchObject({ state: "STATE_RUNNING", type: "a40.1x" });
    await e.patchSpec("GpuVm", "a", { type: "a40.1x" });
    // Ready at its new generation: its waiting record goes once it is seen as asked. (The held STOP's intent is
    // dropped by a status write that the spec's change can make conflict; the intent left is then held for
    // intentHoldMs, as one that may have been sent, before the pass decides afresh: hence the longer wait.)
    await e.waitFor("GpuVm", "a", ready, 30_000);

    await e.patchSpec("GpuVm", "b", { powerState: "Stopped" });
    await e.waitFor("GpuVm", "b", (o) => ready(o) && o?.status?.state === "STATE_STOPPED", 15_000);
    await e.waitFor("GpuBudget", "gpus", (o) => (o as BudgetView).status?.usedUSD === 1.1, 15_000);
    await e.apply("GpuVm", "c", a40());
    await e.waitReady("GpuVm", "c", 15_000);
    // b's START finds no room now: it waits, stopped, until c goes.
    await e.patchSpec("GpuVm", "b", { powerState: "Running" });
    await e.waitFor("GpuVm", "b", (o) => reasonOf(o) === "BudgetExceeded", 15_000);
    expect((await cloudVms(e)).get("default-b")?.state).toBe("STATE_STOPPED");
    await e.remove("GpuVm", "c");
    await e.waitFor("GpuVm", "b", (o) => ready(o) && o?.status?.state === "STATE_RUNNING", 20_000);
  });

  it("a disk reserves its size's price at its create and its growth", async () => {
    env = await startEnv();
    const e = env;
    // 1 TiB costs $0.142937/h: one fits, a second does not; growing the first to 2 TiB does not either.
    await e.apply("GpuBudget", "disks", { maxHourlyUSD: 0.2 });
    const disk = (size: string) => ({ size, location: "us-east1-a", type: "persistent-ssd" });
    await e.apply("GpuDisk", "one", disk("1TiB"));
    await e.waitReady("GpuDisk", "one", 15_000);
    await e.apply("GpuDisk", "two", disk("1TiB"));
    const two = await e.waitFor("GpuDisk", "two", (o) => reasonOf(o) === "BudgetExceeded", 15_000);
    expect(two?.status?.conditions?.find((c) => c.type === "Ready")?.message).toMatch(
      /^GpuBudget disks: needs \$0\.14\/h, \$0\.06\/h free of \$0\.20\/h/,
    );
    await e.patchSpec("GpuDisk", "one", { size: "2TiB" });
    await e.waitFor("GpuDisk", "one", (o) => reasonOf(o) === "BudgetExceeded", 15_000);
    const cloud = await e.cloud<{ items: { name: string; size: string }[] }>("disks");
    expect(cloud.items.map((item) => [item.name, item.size])).toEqual([["default-one", "1TiB"]]);
    await e.waitFor("GpuBudget", "disks", (o) => (o as BudgetView).status?.usedUSD === 0.142937, 15_000);
  });
});

describe("prices", () => {
  it("the ConfigMap's prices are the budgets' and the $/HOUR column's, without a restart; a malformed one changes nothing", async () => {
    env = await startEnv();
    const e = env;
    const prices = (text: string) => ({ metadata: { name: "gpuvm-operator-prices" }, data: { "prices.yaml": text } });
    await e.core.createNamespacedConfigMap({ namespace: "default", body: prices("gpuHourUSD:\n  a40: 2\n") });
    // Two a40.1x at $2.00/h fill $4.00/h; a third waits.
    await e.apply("GpuBudget", "gpus", { maxHourlyUSD: 4 });
    await e.apply("GpuVm", "a", a40());
    const running = await e.waitReady("GpuVm", "a", 15_000);
    expect(running.status?.hourlyPriceUSD).toBe(2);
    await e.apply("GpuVm", "b", a40());
    await e.waitReady("GpuVm", "b", 15_000);
    await e.apply("GpuVm", "c", a40());
    const waiting = await e.waitFor("GpuVm", "c", (o) => reasonOf(o) === "BudgetExceeded", 15_000);
    expect(waiting?.status?.conditions?.find((c) => c.type === "Ready")?.message).toMatch(/needs \$2\.00\/h/);

    // A malformed file is refused whole: the last good prices stay.
    await e.core.replaceNamespacedConfigMap({
      name: "gpuvm-operator-prices",
      namespace: "default",
      body: prices("gpuHourUSD:\n  h100: 1\n"),
    });
    await e.annotate("GpuVm", "a", { touched: "1" });
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect((await e.get("GpuVm", "a"))?.status?.hourlyPriceUSD).toBe(2);
    // Deleted: the seed's prices again ($1.10/h), seen at the next pass.
    await e.core.deleteNamespacedConfigMap({ name: "gpuvm-operator-prices", namespace: "default" });
    await e.annotate("GpuVm", "a", { touched: "2" });
    await e.waitFor("GpuVm", "a", (o) => o?.status?.hourlyPriceUSD === 1.1, 15_000);
  });
});

describe("budgets and namespaces", () => {
  it("covers only its own namespace's objects, by its selector", async () => {
    env = await startEnv();
    const e = env;
    await e.core.createNamespace({ body: { metadata: { name: "other" } } });
    await e.core.createNamespacedSecret({
      namespace: "other",
      body: {
        metadata: { name: "gpucloud-credentials", labels: { "gpucloud.dev/watch": "true" } },
        stringData: { apiKey: e.sim.apiKey, projectId: e.sim.projectId, apiUrl: e.sim.url },
      },
    });
    await e.apply("GpuBudget", "none", { maxHourlyUSD: 0, selector: { matchLabels: { tier: "batch" } } });
    await e.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      plural: "gpuvms",
      namespace: "default",
      body: { kind: "GpuVm", metadata: { name: "batch", labels: { tier: "batch" } }, spec: a40() },
    });
    await e.apply("GpuVm", "web", a40());
    await createIn(e, "other", "GpuVm", "elsewhere", a40());
    await e.waitReady("GpuVm", "web", 15_000);
    await waitIn(e, "other", "GpuVm", "elsewhere", ready, 15_000);
    const batch = await e.waitFor("GpuVm", "batch", (o) => reasonOf(o) === "BudgetExceeded", 15_000);
    expect(batch?.status?.conditions?.find((c) => c.type === "Ready")?.message).toMatch(/^GpuBudget none: needs/);
    expect([...(await cloudVms(e)).keys()].sort()).toEqual(["default-web", "other-elsewhere"]);
  });
});
