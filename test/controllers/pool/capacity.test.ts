// A GpuVmPool scaled far beyond the cloud's capacity (issue #28, case 7): 128 replicas where 32 fit. The pool
// places replicas by the counts the cloud gives (or, where it gives none, in growing batches that its own
// out-of-stock failures stop), makes a replica's disks only once its VM has a place, and reports replicas and
// pendingReplicas that add up to what was asked for.
import { afterEach, describe, expect, it } from "vitest";
import { condition, type Env, type ManagedView, NAMESPACE, SSH_KEY, startEnv } from "../harness.ts";

let env: Env | undefined;
let watcher: { stop(): Promise<number> } | undefined;
afterEach(async () => {
  await watcher?.stop();
  watcher = undefined;
  await env?.close();
  env = undefined;
});

const CAPACITY = { "us-east1-a": { "a100.1x": 20 }, "us-southcentral1-a": { "a100.1x": 12 } };

interface CloudResource {
  name: string;
  location: string;
}

async function list(e: Env, plural: string): Promise<ManagedView[]> {
  const answer = (await e.custom.listNamespacedCustomObject({
    group: "gpucloud.dev",
    version: "v1alpha1",
    namespace: NAMESPACE,
    plural,
    labelSelector: "gpucloud.dev/pool=big",
  })) as { items: ManagedView[] };
  return answer.items;
}

async function cloud(e: Env, path: "vms" | "disks"): Promise<CloudResource[]> {
  const body = await e.cloud<{ items: CloudResource[] }>(`${path}?limit=500`);
  return body.items.filter((item) => item.name.startsWith(`${NAMESPACE}-big-`));
}

/** The most cloud disks of the pool seen at once while it ran, sampled until stopped. */
function watchDisks(e: Env): { stop(): Promise<number> } {
  let running = true;
  let most = 0;
  const loop = (async () => {
    while (running) {
      most = Math.max(most, (await cloud(e, "disks")).length);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  watcher = {
    async stop() {
      running = false;
      await loop;
      return most;
    },
  };
  return watcher;
}

async function scaleTo128(e: Env): Promise<ManagedView> {
  await e.apply("GpuVmPool", "big", {
    replicas: 128,
    template: { spec: { type: "a100.1x", image: "ubuntu22.04", sshPublicKey: SSH_KEY } },
    diskTemplates: [{ name: "scratch", size: "200GiB" }],
    placement: { locations: ["us-east1-a", "us-southcentral1-a"] },
  });
  const settled = await e.waitFor(
    "GpuVmPool",
    "big",
    (pool) =>
      pool?.status?.observedGeneration === pool?.metadata.generation &&
      condition(pool, "Ready")?.reason === "CapacityUnavailable" &&
      pool?.status?.readyReplicas === 32,
    110_000,
  );
  if (settled === undefined) throw new Error("unreachable");
  return settled;
}

describe("GpuVmPool beyond the cloud's capacity", () => {
  it("places by the cloud's counts: 32 GpuVms, 32 disks, replicas 32 and pendingReplicas 96", {
    timeout: 150_000,
  }, async () => {
    env = await startEnv({ simulator: { capacity: CAPACITY }, timing: { capacityRetryMs: 1500 } });
    const disks = watchDisks(env);
    const pool = await scaleTo128(env);
    expect(await disks.stop()).toBeLessThanOrEqual(32);

    expect(condition(pool, "Stalled")?.status).toBe("True");
    expect(pool.status).toMatchObject({
      replicas: 32,
      readyReplicas: 32,
      pendingReplicas: 96,
      locationSummary: "us-east1-a=20,us-southcentral1-a=12",
    });
    expect(condition(pool, "Ready")?.message).toMatch(/32\/128 ready; 96 replicas pending: no capacity for a100\.1x/);
    // Nothing waits that cannot run: one GpuVm and one disk per VM that has a place.
    expect(await list(env, "gpuvms")).toHaveLength(32);
    expect(await list(env, "gpudisks")).toHaveLength(32);
    const vms = await cloud(env, "vms");
    expect(vms).toHaveLength(32);
    expect(vms.filter((vm) => vm.location === "us-east1-a")).toHaveLength(20);
    expect(await cloud(env, "disks")).toHaveLength(32);
  });

  it("without counts, places in batches its out-of-stock failures stop, and makes disks only for VMs with a place", {
    timeout: 150_000,
  }, async () => {
    env = await startEnv({
      simulator: { capacity: CAPACITY, availabilityCounts: false },
      timing: { capacityRetryMs: 1500 },
    });
    const disks = watchDisks(env);
    const pool = await scaleTo128(env);
    expect(await disks.stop()).toBeLessThanOrEqual(32);

    const replicas = pool.status?.replicas;
    const pending = pool.status?.pendingReplicas;
    expect(replicas).toBe(32);
    expect(pending).toBe(96);
    // The replicas whose create ran out of stock wait (without disks); never more than the pool had placed.
    const waiting = (await list(env, "gpuvms")).filter(
      (vm) => condition(vm, "Ready")?.reason === "CapacityUnavailable",
    );
    expect(waiting.length).toBeGreaterThan(0);
    expect(waiting.length).toBeLessThanOrEqual(32);
    expect(await list(env, "gpudisks")).toHaveLength(32);
    expect(await cloud(env, "vms")).toHaveLength(32);
    // The waiting GpuVms try again every capacity retry period; each stays pending meanwhile (never counted as a
    // replica with a place), so the pool's counts and condition hold still.
    const seen = new Set<string>();
    for (let sample = 0; sample < 40; sample++) {
      const now = await env.get("GpuVmPool", "big");
      seen.add(`${now?.status?.replicas}/${now?.status?.pendingReplicas} ${condition(now, "Ready")?.reason}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect([...seen]).toEqual(["32/96 CapacityUnavailable"]);
  });
});
