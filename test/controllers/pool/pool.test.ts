// GpuVmPool end to end in one process: the simulator, the Kubernetes API test double and the operator with all
// its controllers. The pool owns GpuVms; the GpuVm controller makes the cloud VMs.
import { EventsV1Api, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { condition, type Env, type ManagedView, NAMESPACE, SSH_KEY, startEnv } from "../harness.ts";

let env: Env | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

interface CloudVm {
  id: string;
  name: string;
  state: string;
  location: string;
}

function poolSpec(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    replicas: 0,
    template: { spec: { type: "a100.1x", image: "ubuntu22.04", sshPublicKey: SSH_KEY } },
    placement: { locations: ["us-east1-a", "us-southcentral1-a"] },
    ...extra,
  };
}

async function cloudVms(e: Env, prefix: string): Promise<CloudVm[]> {
  const body = await e.cloud<{ items: CloudVm[] }>("vms?limit=500");
  return body.items.filter((vm) => vm.name.startsWith(`${NAMESPACE}-${prefix}-`));
}

/** The images of a pool's cloud VMs (the simulator's state: the API does not show them), sorted. */
async function cloudImages(e: Env, prefix: string): Promise<string[]> {
  const state = (await e.admin("GET", "/state")) as { vms: { name: string; image: string }[] };
  return state.vms
    .filter((vm) => vm.name.startsWith(`${NAMESPACE}-${prefix}-`))
    .map((vm) => vm.image)
    .sort();
}

async function members(e: Env, pool: string): Promise<ManagedView[]> {
  const list = (await e.custom.listNamespacedCustomObject({
    group: "gpucloud.dev",
    version: "v1alpha1",
    namespace: NAMESPACE,
    plural: "gpuvms",
    labelSelector: `gpucloud.dev/pool=${pool}`,
  })) as { items: ManagedView[] };
  return list.items;
}

function status(pool: ManagedView | undefined): Record<string, unknown> {
  return pool?.status ?? {};
}

/** The pool has converged on `replicas`: observed, Ready, every replica ready and in the cloud. */
async function waitConverged(e: Env, name: string, replicas: number, timeoutMs = 20_000): Promise<ManagedView> {
  const pool = await e.waitFor(
    "GpuVmPool",
    name,
    (p) =>
      p?.status?.observedGeneration === p?.metadata.generation &&
      condition(p, "Ready")?.status === "True" &&
      status(p).readyReplicas === replicas &&
      status(p).replicas === replicas,
    timeoutMs,
  );
  if (pool === undefined) throw new Error("unreachable");
  return pool;
}

const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

/** What kubectl scale does: a merge patch of the Scale. */
async function scale(e: Env, name: string, replicas: number): Promise<void> {
  const target = { group: "gpucloud.dev", version: "v1alpha1", namespace: NAMESPACE, plural: "gpuvmpools", name };
  await e.custom.patchNamespacedCustomObjectScale({ ...target, body: { spec: { replicas } } }, MERGE);
}

async function eventNotes(e: Env, name: string): Promise<string[]> {
  const events = await e.kubeConfig.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace: NAMESPACE });
  return events.items
    .filter((event) => event.regarding?.name === name)
    .map((event) => `${event.reason}: ${event.note}`);
}

interface Sample {
  ready: number;
  members: number;
  cloud: number;
}

/** Samples the replicas continuously (Ready GpuVms not being deleted, all GpuVms, cloud VMs) until stopped. */
function sampler(e: Env, pool: string): { stop(): Promise<Sample[]> } {
  const samples: Sample[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const [vms, cloud] = await Promise.all([members(e, pool), cloudVms(e, pool)]);
      const ready = vms.filter(
        (vm) =>
          vm.metadata.deletionTimestamp === undefined &&
          condition(vm, "Ready")?.status === "True" &&
          vm.status?.observedGeneration === vm.metadata.generation,
      ).length;
      samples.push({ ready, members: vms.length, cloud: cloud.length });
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return samples;
    },
  };
}

describe("GpuVmPool", () => {
  it("scales 0 → 8 → 3 → 0 with exactly that many cloud VMs, spread over its locations", async () => {
    env = await startEnv();
    await env.apply("GpuVmPool", "train", poolSpec());
    const empty = await waitConverged(env, "train", 0);
    expect(empty.metadata.finalizers).toContain("gpucloud.dev/finalizer");
    expect(status(empty).selector).toBe("gpucloud.dev/pool=train");

    await scale(env, "train", 8);
    const eight = await waitConverged(env, "train", 8);
    const metrics = await env.manager.metrics.registry.metrics();
    expect(metrics).toContain('gpucloud_pool_desired_replicas{namespace="default",pool="train"} 8');
    expect(metrics).toContain('gpucloud_pool_ready_replicas{namespace="default",pool="train"} 8');
    const scaling = (await eventNotes(env, "train")).filter((note) =>
      note.startsWith("Scaling: created replica train-"),
    );
    expect(scaling).toHaveLength(8);
    expect(status(eight).locationSummary).toBe("us-east1-a=4,us-southcentral1-a=4");
    expect(status(eight).hourlyPriceUSD).toBeGreaterThan(0);
    const vms = await cloudVms(env, "train");
    expect(vms).toHaveLength(8);
    const replicas = await members(env, "train");
    expect(replicas.map((vm) => vm.metadata.name).sort()).toEqual(
      vms.map((vm) => vm.name.slice(`${NAMESPACE}-`.length)).sort(),
    );

    // The marked replica goes first.
    const marked = replicas[5]?.metadata.name ?? "";
    await env.annotate("GpuVm", marked, { "gpucloud.dev/delete-first": "true" });
    await scale(env, "train", 3);
    await waitConverged(env, "train", 3);
    const afterScaleDown = await members(env, "train");
    expect(afterScaleDown).toHaveLength(3);
    expect(afterScaleDown.map((vm) => vm.metadata.name)).not.toContain(marked);
    await expect.poll(async () => (await cloudVms(env as Env, "train")).length, { timeout: 10_000 }).toBe(3);

    await scale(env, "train", 0);
    await waitConverged(env, "train", 0);
    await expect.poll(async () => (await cloudVms(env as Env, "train")).length, { timeout: 10_000 }).toBe(0);
    expect(await members(env, "train")).toHaveLength(0);
  });

  it("spreads over the locations with capacity, moves a replica whose create ran out of stock, and keeps one that fits nowhere pending while the others run", {
    timeout: 120_000,
  }, async () => {
    env = await startEnv({
      // A cloud that answers availability yes/no only (as the spec shows it): a "yes" may fit just one.
      simulator: {
        capacity: { "us-east1-a": { "a100.1x": 0 }, "us-southcentral1-a": { "a100.1x": 4 } },
        availabilityCounts: false,
      },
      timing: { capacityRetryMs: 1500 },
    });
    await env.apply("GpuVmPool", "spread", poolSpec({ replicas: 4 }));
    const four = await waitConverged(env, "spread", 4);
    expect(status(four).locationSummary).toBe("us-southcentral1-a=4");

    // Room for one more in us-east1-a and one in us-southcentral1-a: spreading sends both new replicas to
    // us-east1-a (it has fewest); the second runs out of stock there and is moved.
    await env.admin("PUT", "/capacity", {
      "us-east1-a": { "a100.1x": { capacity: 1 } },
      "us-southcentral1-a": { "a100.1x": { capacity: 5 } },
    });
    await scale(env, "spread", 6);
    const six = await waitConverged(env, "spread", 6, 30_000);
    expect(status(six).locationSummary).toBe("us-east1-a=1,us-southcentral1-a=5");
    expect(
      (await eventNotes(env, "spread")).some((note) => /^CapacityUnavailable: moving replica spread-/.test(note)),
    ).toBe(true);

    // No room anywhere for the seventh: pending, with a clear condition, while the six run.
    await scale(env, "spread", 7);
    const pending = await env.waitFor(
      "GpuVmPool",
      "spread",
      (p) =>
        condition(p, "Ready")?.reason === "CapacityUnavailable" &&
        p?.status?.observedGeneration === p?.metadata.generation,
      30_000,
    );
    expect(condition(pending, "Stalled")?.status).toBe("True");
    expect(condition(pending, "Ready")?.message).toMatch(
      /6\/7 ready; 1 replica pending: no capacity for a100\.1x in us-east1-a, us-southcentral1-a/,
    );
    expect(status(pending)).toMatchObject({ readyReplicas: 6, pendingReplicas: 1 });
    expect(await cloudVms(env, "spread")).toHaveLength(6);

    await env.admin("PUT", "/capacity", { "us-east1-a": { "a100.1x": { capacity: 2 } } });
    const seven = await waitConverged(env, "spread", 7, 40_000);
    expect(status(seven)).toMatchObject({ locationSummary: "us-east1-a=2,us-southcentral1-a=5", pendingReplicas: 0 });
    expect(await cloudVms(env, "spread")).toHaveLength(7);
  });

  it("replaces the replicas one at a time for an image change (maxUnavailable 1): never more than one down", {
    timeout: 120_000,
  }, async () => {
    env = await startEnv({ simulator: { latencyMs: 300 } });
    await env.apply("GpuVmPool", "roll", poolSpec({ replicas: 4 }));
    const before = await waitConverged(env, "roll", 4, 30_000);
    const oldNames = (await members(env, "roll")).map((vm) => vm.metadata.name);
    const watch = sampler(env, "roll");
    await env.patchSpec("GpuVmPool", "roll", {
      template: { spec: { type: "a100.1x", image: "ubuntu22.04-nvidia-550", sshPublicKey: SSH_KEY } },
    });
    const after = await env.waitFor(
      "GpuVmPool",
      "roll",
      (p) =>
        condition(p, "Ready")?.status === "True" &&
        p?.status?.observedGeneration === p?.metadata.generation &&
        status(p).updatedReplicas === 4 &&
        status(p).readyReplicas === 4,
      90_000,
    );
    const samples = await watch.stop();
    expect(status(after).currentRevision).not.toBe(status(before).currentRevision);
    const newNames = (await members(env, "roll")).map((vm) => vm.metadata.name);
    expect(newNames.filter((name) => oldNames.includes(name))).toEqual([]);
    expect(await cloudImages(env, "roll")).toEqual(Array(4).fill("ubuntu22.04-nvidia-550"));
    expect(samples.length).toBeGreaterThan(20);
    expect(Math.min(...samples.map((sample) => sample.ready))).toBe(3);
    // maxSurge 0: never more than four cloud VMs, the new one created once its predecessor is gone.
    expect(Math.max(...samples.map((sample) => sample.cloud))).toBe(4);
    const notes = await eventNotes(env, "roll");
    expect(notes.filter((note) => note.startsWith("RollingUpdate: replacing replica roll-"))).toHaveLength(4);
  });

  it("changes the type in place within maxUnavailable, and leaves replicas alone with OnDelete", {
    timeout: 120_000,
  }, async () => {
    env = await startEnv({ simulator: { latencyMs: 300 } });
    await env.apply("GpuVmPool", "shape", poolSpec({ replicas: 3 }));
    await waitConverged(env, "shape", 3, 30_000);
    const names = (await members(env, "shape")).map((vm) => vm.metadata.name).sort();
    const watch = sampler(env, "shape");
    await env.patchSpec("GpuVmPool", "shape", {
      template: { spec: { type: "a100.2x", image: "ubuntu22.04", sshPublicKey: SSH_KEY } },
    });
    await env.waitFor(
      "GpuVmPool",
      "shape",
      (p) =>
        condition(p, "Ready")?.status === "True" &&
        p?.status?.observedGeneration === p?.metadata.generation &&
        status(p).updatedReplicas === 3,
      90_000,
    );
    const samples = await watch.stop();
    const changed = await members(env, "shape");
    expect(changed.map((vm) => vm.metadata.name).sort()).toEqual(names);
    expect(changed.map((vm) => vm.spec.type)).toEqual(["a100.2x", "a100.2x", "a100.2x"]);
    const cloud = await env.cloud<{ items: { name: string; type: string }[] }>("vms?limit=500");
    expect(cloud.items.filter((vm) => vm.name.startsWith("default-shape-")).map((vm) => vm.type)).toEqual(
      Array(3).fill("a100.2x"),
    );
    expect(Math.min(...samples.map((sample) => sample.ready))).toBe(2);

    // OnDelete: a new image changes nothing until a replica is deleted; its successor has the new image.
    await env.patchSpec("GpuVmPool", "shape", {
      updateStrategy: { type: "OnDelete" },
      template: { spec: { type: "a100.2x", image: "ubuntu22.04-nvidia-550", sshPublicKey: SSH_KEY } },
    });
    const kept = await env.waitFor(
      "GpuVmPool",
      "shape",
      (p) => condition(p, "Ready")?.status === "True" && p?.status?.observedGeneration === p?.metadata.generation,
    );
    expect(status(kept)).toMatchObject({ readyReplicas: 3, updatedReplicas: 0 });
    expect(condition(kept, "Ready")?.message).toContain(
      "3 replicas of an older template kept (updateStrategy OnDelete)",
    );
    await env.remove("GpuVm", names[0] ?? "");
    await env.waitFor(
      "GpuVmPool",
      "shape",
      (p) =>
        status(p).readyReplicas === 3 && status(p).updatedReplicas === 1 && condition(p, "Ready")?.status === "True",
      30_000,
    );
    expect(await cloudImages(env, "shape")).toEqual(["ubuntu22.04", "ubuntu22.04", "ubuntu22.04-nvidia-550"]);
  });

  it("deletes its replicas through the operator when deleted, and lets them go with deletionPolicy Orphan (a new pool adopts them)", {
    timeout: 120_000,
  }, async () => {
    env = await startEnv();
    await env.apply("GpuVmPool", "gone", poolSpec({ replicas: 2 }));
    await waitConverged(env, "gone", 2);
    await env.remove("GpuVmPool", "gone");
    await env.waitFor("GpuVmPool", "gone", (p) => p === undefined, 20_000);
    expect(await members(env, "gone")).toEqual([]);
    expect(await cloudVms(env, "gone")).toEqual([]);

    await env.apply("GpuVmPool", "kept", poolSpec({ replicas: 2, deletionPolicy: "Orphan" }));
    await waitConverged(env, "kept", 2);
    const ids = (await cloudVms(env, "kept")).map((vm) => vm.id).sort();
    await env.remove("GpuVmPool", "kept");
    await env.waitFor("GpuVmPool", "kept", (p) => p === undefined, 20_000);
    const orphans = await members(env, "kept");
    expect(orphans).toHaveLength(2);
    for (const vm of orphans)
      expect((vm.metadata as { ownerReferences?: unknown[] }).ownerReferences ?? []).toEqual([]);
    expect((await cloudVms(env, "kept")).map((vm) => vm.id).sort()).toEqual(ids);

    await env.apply("GpuVmPool", "kept", poolSpec({ replicas: 2 }));
    const adopted = await waitConverged(env, "kept", 2);
    const owners = (await members(env, "kept")).map((vm) => vm.metadata.ownerReferences ?? []);
    expect(owners).toEqual([
      [expect.objectContaining({ kind: "GpuVmPool", controller: true })],
      [expect.objectContaining({ kind: "GpuVmPool", controller: true })],
    ]);
    expect((await cloudVms(env, "kept")).map((vm) => vm.id).sort()).toEqual(ids);
    expect(status(adopted).updatedReplicas).toBe(2);
    expect(
      (await eventNotes(env, "kept")).filter((note) => note.startsWith("Adopted: adopted GpuVm kept-")),
    ).toHaveLength(2);
  });

  it("makes a GpuDisk per replica in its location, attached; Retain keeps it on scale-down, Delete removes it", {
    timeout: 120_000,
  }, async () => {
    env = await startEnv();
    await env.apply(
      "GpuVmPool",
      "data",
      poolSpec({ replicas: 2, diskTemplates: [{ name: "scratch", size: "100GiB" }], persistentDiskPolicy: "Retain" }),
    );
    await waitConverged(env, "data", 2, 30_000);
    const vms = await members(env, "data");
    const disks = (await env.custom.listNamespacedCustomObject({
      group: "gpucloud.dev",
      version: "v1alpha1",
      namespace: NAMESPACE,
      plural: "gpudisks",
    })) as { items: ManagedView[] };
    expect(disks.items.map((disk) => disk.metadata.name).sort()).toEqual(
      vms.map((vm) => `${vm.metadata.name}-scratch`).sort(),
    );
    for (const vm of vms) {
      const disk = disks.items.find((item) => item.metadata.name === `${vm.metadata.name}-scratch`);
      expect(disk?.spec.location).toBe(vm.spec.location);
      expect((vm.status?.attachedDisks as { id: string }[] | undefined)?.map((attached) => attached.id)).toContain(
        disk?.status?.id,
      );
    }
    await scale(env, "data", 1);
    await waitConverged(env, "data", 1);
    const [left] = await members(env, "data");
    const removed = vms.find((vm) => vm.metadata.name !== left?.metadata.name)?.metadata.name ?? "";
    const retained = await env.waitFor(
      "GpuDisk",
      `${removed}-scratch`,
      (disk) => disk !== undefined && disk.metadata.labels?.["gpucloud.dev/pool"] === undefined,
    );
    expect(retained?.metadata.ownerReferences ?? []).toEqual([]);
    expect(condition(retained, "Ready")?.status).toBe("True");

    await env.patchSpec("GpuVmPool", "data", { persistentDiskPolicy: "Delete" });
    await scale(env, "data", 0);
    await waitConverged(env, "data", 0);
    await env.waitFor("GpuDisk", `${left?.metadata.name ?? ""}-scratch`, (disk) => disk === undefined, 20_000);
    expect(await env.get("GpuDisk", `${removed}-scratch`)).toBeDefined();
  });

  it("says which replica is stalled (ReplicaFailure), and does nothing to its replicas while paused", async () => {
    env = await startEnv();
    await env.apply(
      "GpuVmPool",
      "broken",
      poolSpec({ replicas: 1, template: { spec: { type: "a100.1x", image: "no-such-image", sshPublicKey: SSH_KEY } } }),
    );
    const broken = await env.waitFor("GpuVmPool", "broken", (p) => condition(p, "Ready")?.reason === "ReplicaFailure");
    expect(condition(broken, "Stalled")?.status).toBe("True");
    expect(condition(broken, "Ready")?.message).toMatch(
      /^replica broken-\w{5} is stalled: InvalidSpec: .*no-such-image/,
    );

    await env.apply("GpuVmPool", "still", poolSpec({ replicas: 1 }));
    await waitConverged(env, "still", 1);
    await env.annotate("GpuVmPool", "still", { "gpucloud.dev/paused": "true" });
    await scale(env, "still", 3);
    const paused = await env.waitFor(
      "GpuVmPool",
      "still",
      (p) => condition(p, "Ready")?.reason === "Paused" && p?.status?.observedGeneration === p?.metadata.generation,
    );
    expect(condition(paused, "Ready")?.status).toBe("True");
    expect(await members(env, "still")).toHaveLength(1);
    await env.annotate("GpuVmPool", "still", { "gpucloud.dev/paused": null });
    await waitConverged(env, "still", 3);
  });
});
