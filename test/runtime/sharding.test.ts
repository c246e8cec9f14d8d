// Sharding (--shard-count, --shard-index): two shards over the same objects, each with its own Lease. No object
// is reconciled by both, and a shard whose replicas are gone leaves its objects waiting for its own Lease, never
// for the other shard.
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { OperatorConfig } from "../../src/runtime/config.ts";
import { outcome, type ReconcileRequest } from "../../src/runtime/controller.ts";
import { defaultConfig, Manager } from "../../src/runtime/manager.ts";
import { hashKey, ownsKey, shardLeaseName, shardOfKey, shardOfLease } from "../../src/runtime/sharding.ts";
import { eventually, kubeConfigFor, silentLogger, startTestCluster, type TestCluster, WIDGETS } from "./helpers.ts";

describe("shard assignment", () => {
  it("is a stable hash of namespace/name, spread over the shards", () => {
    expect(hashKey("default/vm-00001")).toBe(hashKey("default/vm-00001"));
    // FNV-1a, fixed for ever: a new version must not move objects between shards.
    expect(hashKey("")).toBe(0x811c9dc5);
    expect(hashKey("a")).toBe(0xe40c292c);
    const counts = new Map<number, number>();
    for (let i = 0; i < 3000; i++) {
      const shard = shardOfKey(`team/vm-${i}`, 3);
      counts.set(shard, (counts.get(shard) ?? 0) + 1);
    }
    expect([...counts.keys()].sort()).toEqual([0, 1, 2]);
    for (const count of counts.values()) expect(count).toBeGreaterThan(800);
    expect(shardOfKey("team/anything", 1)).toBe(0);
    expect(ownsKey({ index: 1, count: 2 }, "team/x")).toBe(shardOfKey("team/x", 2) === 1);
    expect(shardLeaseName("gpuvm-operator.gpucloud.dev", { index: 0, count: 1 })).toBe("gpuvm-operator.gpucloud.dev");
    // The count is part of the Lease: sets of different counts never campaign for one Lease.
    expect(shardLeaseName("gpuvm-operator.gpucloud.dev", { index: 1, count: 2 })).toBe(
      "gpuvm-operator.gpucloud.dev-shard-1-of-2",
    );
    expect(shardOfLease("gpuvm-operator.gpucloud.dev", "gpuvm-operator.gpucloud.dev-shard-1-of-2")).toEqual({
      index: 1,
      count: 2,
    });
    expect(shardOfLease("gpuvm-operator.gpucloud.dev", "gpuvm-operator.gpucloud.dev")).toEqual({ index: 0, count: 1 });
    // Named by an earlier version, without the count.
    expect(shardOfLease("gpuvm-operator.gpucloud.dev", "gpuvm-operator.gpucloud.dev-shard-1")).toEqual({ index: 1 });
    expect(shardOfLease("gpuvm-operator.gpucloud.dev", "other-election")).toBeUndefined();
  });
});

describe("two shards over the same objects", () => {
  let cluster: TestCluster;
  const managers: Manager[] = [];
  /** Keys each replica was told no replica owns (onWithoutOwner), by identity. */
  const toldWithoutOwner = new Map<string, string[]>();

  beforeEach(async () => {
    cluster = await startTestCluster();
  });
  afterEach(async () => {
    await Promise.all(managers.splice(0).map((manager) => manager.stop()));
    await cluster.double.close();
    toldWithoutOwner.clear();
  });

  const election: Partial<OperatorConfig> = {
    leaderElect: true,
    leaseDurationMs: 3000,
    renewDeadlineMs: 2000,
    retryPeriodMs: 200,
    metricsBindAddress: undefined,
    healthProbeBindAddress: undefined,
    syncPeriodMs: 600_000,
  };

  function shardManager(
    shard: { index: number; count: number },
    identity: string,
    reconciled: Map<string, string[]>,
  ): Manager {
    const manager = new Manager({
      kubeConfig: kubeConfigFor(cluster.double.url),
      config: defaultConfig({ ...election, shard }),
      logger: silentLogger,
      identity,
    });
    const widgets = manager.informerFor(WIDGETS);
    manager.addController({
      name: "widget",
      resource: WIDGETS,
      reconciler: {
        async reconcile(request: ReconcileRequest) {
          const key = `${request.namespace}/${request.name}`;
          reconciled.set(key, [...(reconciled.get(key) ?? []), identity]);
          const widget = widgets.get(request.namespace, request.name);
          if (widget === undefined) return outcome.done();
          const spec = (widget as { spec?: { size?: number } }).spec;
          const written = await manager.kube.patchStatus(WIDGETS, widget, { size: spec?.size });
          return written.type === "conflict" ? outcome.requeue() : outcome.done();
        },
      },
      onWithoutOwner: (keys) => toldWithoutOwner.set(identity, [...keys].sort()),
    });
    managers.push(manager);
    return manager;
  }

  it("reconcile every object exactly in its own shard; a dead shard's objects wait for that shard's Lease", async () => {
    const reconciled = new Map<string, string[]>();
    const names = Array.from({ length: 24 }, (_, i) => `w-${i}`);
    for (const name of names) await cluster.createWidget("default", name, { size: 1 });
    const shard0 = shardManager({ index: 0, count: 2 }, "shard-0-a", reconciled);
    const shard1 = shardManager({ index: 1, count: 2 }, "shard-1-a", reconciled);
    await Promise.all([shard0.start(), shard1.start()]);
    await eventually(() => expect(shard0.isLeader() && shard1.isLeader()).toBe(true));
    await eventually(() => expect(reconciled.size).toBe(names.length));
    const shardOf = (key: string) => shardOfKey(key, 2);
    for (const [key, by] of reconciled) expect(new Set(by)).toEqual(new Set([`shard-${shardOf(key)}-a`]));
    expect(new Set(names.map((name) => shardOf(`default/${name}`)))).toEqual(new Set([0, 1]));

    // Shard 1 dies: its replica stops without a successor. Changes to its objects wait; shard 0 never takes them.
    await shard1.stop();
    reconciled.clear();
    for (const name of names)
      await cluster.custom.patchNamespacedCustomObject(
        {
          group: WIDGETS.group,
          version: WIDGETS.version,
          plural: WIDGETS.plural,
          namespace: "default",
          name,
          body: { spec: { size: 2 } },
        },
        mergePatch,
      );
    const ofShard1 = names.map((name) => `default/${name}`).filter((key) => shardOf(key) === 1);
    const ofShard0 = names.map((name) => `default/${name}`).filter((key) => shardOf(key) === 0);
    await eventually(() => expect([...reconciled.keys()].sort()).toEqual([...ofShard0].sort()));
    await new Promise((resolve) => setTimeout(resolve, 1000));
    for (const key of ofShard1) expect(reconciled.has(key)).toBe(false);
    // Shard 0's leader names them to its controller (to mark them) once shard 1 has had no leader for twice the
    // lease duration; never while it had one.
    expect(toldWithoutOwner.size).toBe(0);
    await eventually(() => expect(toldWithoutOwner.get("shard-0-a")).toEqual([...ofShard1].sort()), 10_000);

    // A new replica of shard 1 takes the shard's Lease and catches up.
    const replacement = shardManager({ index: 1, count: 2 }, "shard-1-b", reconciled);
    await replacement.start();
    await eventually(() => expect(replacement.isLeader()).toBe(true), 8000);
    await eventually(() => {
      for (const key of ofShard1) expect(new Set(reconciled.get(key))).toEqual(new Set(["shard-1-b"]));
    });
    for (const key of ofShard0) expect(new Set(reconciled.get(key))).toEqual(new Set(["shard-0-a"]));
    const leases = (await (
      await fetch(`${cluster.double.url}/apis/coordination.k8s.io/v1/namespaces/default/leases`)
    ).json()) as { items: { metadata: { name: string }; spec: { holderIdentity?: string } }[] };
    const holders = Object.fromEntries(leases.items.map((lease) => [lease.metadata.name, lease.spec.holderIdentity]));
    expect(holders).toMatchObject({
      "gpuvm-operator.gpucloud.dev-shard-0-of-2": "shard-0-a",
      "gpuvm-operator.gpucloud.dev-shard-1-of-2": "shard-1-b",
    });
  });

  // A changed --shard-count: the new set starts beside the old one (a rolling update).
  const replica = (shard: { index: number; count: number }, reconciled: Map<string, string[]>): Manager =>
    shardManager(shard, `set-${shard.count}-shard-${shard.index}`, reconciled);

  async function withoutOwner(manager: Manager): Promise<number> {
    const text = await manager.metrics.registry.getSingleMetricAsString("gpucloud_operator_objects_without_owner");
    const line = text
      .split("\n")
      .find((entry) => entry.startsWith('gpucloud_operator_objects_without_owner{controller="widget"}'));
    return Number(line?.split(" ")[1] ?? Number.NaN);
  }

  it("a new set stands by while the old one holds any Lease, then takes over; objects without an owner are counted", async () => {
    const names = Array.from({ length: 30 }, (_, i) => `w-${i}`);
    for (const name of names) await cluster.createWidget("default", name, { size: 1 });
    const byOld = new Map<string, string[]>();
    const old = [0, 1].map((index) => replica({ index, count: 2 }, byOld));
    await Promise.all(old.map((manager) => manager.start()));
    await eventually(() => expect(old.every((manager) => manager.isLeader())).toBe(true));
    await eventually(() => expect(byOld.size).toBe(names.length));

    // `helm upgrade --set sharding.shards=3` with a rolling update: the new set starts beside the old one.
    const byNew = new Map<string, string[]>();
    const fresh = [0, 1, 2].map((index) => replica({ index, count: 3 }, byNew));
    await Promise.all(fresh.map((manager) => manager.start()));
    await new Promise((resolve) => setTimeout(resolve, 4000)); // more than a lease duration
    expect(fresh.map((manager) => manager.isLeader())).toEqual([false, false, false]);
    expect([...byNew.keys()]).toEqual([]);
    // Every object has its owner in the old set, as every replica sees it.
    await eventually(async () => expect(await withoutOwner(fresh[2] as Manager)).toBe(0));

    // The old set stops (its Leases released): the new set takes over, each object in exactly one new shard.
    await Promise.all(old.map((manager) => manager.stop()));
    await eventually(() => expect(fresh.every((manager) => manager.isLeader())).toBe(true), 8000);
    await eventually(() => expect(byNew.size).toBe(names.length));
    for (const [key, by] of byNew) expect(new Set(by)).toEqual(new Set([`set-3-shard-${shardOfKey(key, 3)}`]));

    // Shard 2 of the new set goes away: its objects have no owner, and every replica says so.
    await (fresh[2] as Manager).stop();
    const orphaned = names.filter((name) => shardOfKey(`default/${name}`, 3) === 2).length;
    expect(orphaned).toBeGreaterThan(0);
    await eventually(async () => expect(await withoutOwner(fresh[0] as Manager)).toBe(orphaned));
  }, 30_000);

  it("a Lease named by an earlier version (without the count) that is held makes a new replica stand by", async () => {
    const created = await fetch(`${cluster.double.url}/apis/coordination.k8s.io/v1/namespaces/default/leases`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name: "gpuvm-operator.gpucloud.dev-shard-0" },
        spec: {
          holderIdentity: "old-version",
          leaseDurationSeconds: 3,
          renewTime: new Date().toISOString().replace("Z", "000Z"),
        },
      }),
    });
    expect(created.status).toBe(201);
    const reconciled = new Map<string, string[]>();
    const manager = replica({ index: 0, count: 2 }, reconciled);
    await manager.start();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(manager.isLeader()).toBe(false);
    // Not renewed: expired once the new replica has seen it unchanged for its duration.
    await eventually(() => expect(manager.isLeader()).toBe(true), 8000);
  });
});

const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
