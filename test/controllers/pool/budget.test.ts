// A GpuVmPool scaled beyond its GpuBudget (issue #32): it runs what fits and keeps the rest pending with the
// budget's message (not a failure of its replicas); its template's priority reaches every replica, in place; raising
// the budget lets the pending ones proceed by themselves.
import { afterEach, describe, expect, it } from "vitest";
import { condition, type Env, type ManagedView, NAMESPACE, SSH_KEY, startEnv } from "../harness.ts";

let env: Env | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

async function replicas(e: Env): Promise<ManagedView[]> {
  const answer = (await e.custom.listNamespacedCustomObject({
    group: "gpucloud.dev",
    version: "v1alpha1",
    namespace: NAMESPACE,
    plural: "gpuvms",
    labelSelector: "gpucloud.dev/pool=workers",
  })) as { items: ManagedView[] };
  return answer.items;
}

async function cloudVms(e: Env): Promise<string[]> {
  const body = await e.cloud<{ items: { name: string }[] }>("vms?limit=500");
  return body.items.map((vm) => vm.name).filter((name) => name.startsWith(`${NAMESPACE}-workers-`));
}

describe("GpuVmPool beyond its GpuBudget", () => {
  it("runs what fits, keeps the rest pending with the budget's message, and proceeds when the budget grows", async () => {
    env = await startEnv();
    const e = env;
    await e.apply("GpuBudget", "team", { maxHourlyUSD: 5.5 });
    await e.apply("GpuVmPool", "workers", {
      replicas: 8,
      template: { spec: { type: "a40.1x", image: "ubuntu22.04", sshPublicKey: SSH_KEY, priority: 7 } },
      placement: { locations: ["us-east1-a"] },
    });
    const pending = await e.waitFor(
      "GpuVmPool",
      "workers",
      (p) => p?.status?.readyReplicas === 5 && p.status.pendingReplicas === 3 && p.status.replicas === 5,
      30_000,
    );
    const ready = condition(pending, "Ready");
    expect(ready).toMatchObject({ status: "False", reason: "BudgetExceeded" });
    expect(ready?.message).toMatch(
      /^5\/8 ready; 3 replicas pending: GpuBudget team: needs \$1\.10\/h, \$0\.00\/h free of \$5\.50\/h/,
    );
    // Waiting is no failure of a replica: the pool is Stalled for the budget, not for ReplicaFailure.
    expect(condition(pending, "Stalled")?.reason).toBe("BudgetExceeded");
    expect((await cloudVms(e)).length).toBe(5);
    const members = await replicas(e);
    expect(members.map((vm) => vm.spec.priority)).toEqual(Array(8).fill(7));

    // The template's priority changes in place, without touching a VM.
    await e.patchSpec("GpuVmPool", "workers", { template: { spec: { priority: 9 } } });
    await e.waitFor("GpuVmPool", "workers", (p) => p?.status?.observedGeneration === p?.metadata.generation, 15_000);
    const deadline = Date.now() + 15_000;
    while ((await replicas(e)).some((vm) => vm.spec.priority !== 9) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect((await replicas(e)).map((vm) => vm.spec.priority)).toEqual(Array(8).fill(9));
    expect((await cloudVms(e)).length).toBe(5);

    await e.patchSpec("GpuBudget", "team", { maxHourlyUSD: 8.8 });
    await e.waitFor(
      "GpuVmPool",
      "workers",
      (p) => p?.status?.readyReplicas === 8 && condition(p, "Ready")?.status === "True",
      30_000,
    );
    expect((await cloudVms(e)).length).toBe(8);
  });
});
