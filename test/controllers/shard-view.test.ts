// Two shards in one process: each replica holds in full the GpuVms it reconciles (and what its objects refer to),
// and only notes the others, so that K shards divide the memory the VMs take. What other shards' objects mean to a
// replica still holds: a firewall rule of one shard reaches a VM of the other (read in, never reported missing),
// and the credentials Secret keeps its in-use finalizer while any shard's objects use it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gpuVmKind } from "../../src/api/gpu-vm.ts";
import { resourceOf } from "../../src/controllers/core/kube-access.ts";
import { type Manager, shardOfKey } from "../../src/runtime/index.ts";
import { type Env, eventsAbout, NAMESPACE, reasonOf, startEnv, startOtherShard, vmSpec } from "./harness.ts";

const SHARDS = 2;
const SYNC_PERIOD_MS = 10 * 60_000;

/** The first `count` names `<prefix>-<n>` whose keys fall in `shard`. */
function namesInShard(prefix: string, shard: number, count: number): string[] {
  const names: string[] = [];
  for (let n = 0; names.length < count; n++) {
    const name = `${prefix}-${n}`;
    if (shardOfKey(`${NAMESPACE}/${name}`, SHARDS) === shard) names.push(name);
  }
  return names;
}

describe("a shard's replica holds its own GpuVms, and notes the others", () => {
  let env: Env;
  let second: Awaited<ReturnType<typeof startOtherShard>> | undefined;
  beforeAll(async () => {
    env = await startEnv({ config: { syncPeriodMs: SYNC_PERIOD_MS, shard: { index: 0, count: SHARDS } } });
    second = await startOtherShard(env, { index: 1, count: SHARDS }, SYNC_PERIOD_MS);
  });
  afterAll(async () => {
    await second?.stop();
    await env?.close();
  });

  it("holds what it reconciles and what its rules refer to; every VM stays known", async () => {
    const ours = namesInShard("sv-vm", 0, 3);
    const theirs = namesInShard("sv-vm", 1, 3);
    const [net] = namesInShard("sv-net", 0, 1);
    const [rule] = namesInShard("sv-rule", 0, 1);
    const target = theirs[0] ?? "";
    for (const name of [...ours, ...theirs]) await env.apply("GpuVm", name, vmSpec());
    await env.apply("GpuNetwork", net ?? "", { cidr: "10.9.0.0/16" });
    // A rule of shard 0 whose destination is a GpuVm of shard 1.
    await env.apply("GpuFirewallRule", rule ?? "", {
      networkRef: { name: net },
      direction: "ingress",
      action: "allow",
      protocols: ["tcp"],
      sources: [{ cidr: "0.0.0.0/0" }],
      destinations: [{ vmRef: { name: target } }],
      destinationPorts: ["22"],
    });
    for (const name of [...ours, ...theirs]) await env.waitReady("GpuVm", name, 15_000);
    await env.waitReady("GpuFirewallRule", rule ?? "", 15_000);
    // Waited for the VM as another shard's object, never stalled on it as missing.
    expect((await eventsAbout(env, rule ?? "")).join("\n")).not.toContain("ReferenceNotFound");

    const vmsOf = (manager: Manager) => manager.informerFor(resourceOf(gpuVmKind));
    const held = (manager: Manager) =>
      vmsOf(manager)
        .list()
        .map((object) => object.metadata?.name ?? "")
        .sort();
    expect(held(env.manager)).toEqual([...ours, target].sort());
    expect(held(second?.manager ?? env.manager)).toEqual([...theirs].sort());
    for (const manager of [env.manager, second?.manager ?? env.manager]) {
      expect(vmsOf(manager).keys().sort()).toEqual([...ours, ...theirs].map((name) => `${NAMESPACE}/${name}`).sort());
    }

    // Each replica's VM snapshot holds its own objects' VMs after a full list, and knows the others' by name.
    const cloudNames = async (names: string[]) =>
      (await Promise.all(names.map((name) => env.get("GpuVm", name)))).map(
        (object) => (object as { status?: { id?: string } } | undefined)?.status?.id ?? "",
      );
    const [ourIds, theirIds] = [await cloudNames(ours), await cloudNames(theirs)];
    for (const [controllers, own, others] of [
      [env.controllers, ourIds, theirIds],
      [second?.controllers ?? env.controllers, theirIds, ourIds],
    ] as const) {
      const [account] = controllers.credentials.accounts();
      const view = await account?.vms.read(Date.now());
      expect([...(view?.byId.keys() ?? [])].sort()).toEqual([...own].sort());
      expect([...(view?.othersByName?.values() ?? [])].sort()).toEqual([...others].sort());
    }
  }, 60_000);

  it("keeps the credentials Secret's in-use finalizer while the other shard's objects use it", async () => {
    // The Secret is reconciled by one replica; the other shard's VMs are only noted there.
    const secretShard = shardOfKey(`${NAMESPACE}/gpucloud-credentials`, SHARDS);
    const others = namesInShard("sv-user", 1 - secretShard, 2);
    for (const name of others) await env.apply("GpuVm", name, vmSpec());
    for (const name of others) await env.waitReady("GpuVm", name, 15_000);
    const ownVms = (await env.custom.listNamespacedCustomObject({
      group: gpuVmKind.group,
      version: gpuVmKind.version,
      namespace: NAMESPACE,
      plural: gpuVmKind.plural,
    })) as { items: { metadata: { name: string } }[] };
    // Every VM of the Secret's own shard goes: only the other shard's objects use it now.
    const ownShardVms = ownVms.items
      .map((item) => item.metadata.name)
      .filter((name) => shardOfKey(`${NAMESPACE}/${name}`, SHARDS) === secretShard);
    for (const name of ownShardVms) await env.remove("GpuVm", name);
    for (const name of ownShardVms) await env.waitFor("GpuVm", name, (o) => o === undefined, 15_000);
    await env.core.deleteNamespacedSecret({ namespace: NAMESPACE, name: "gpucloud-credentials" });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const secret = await env.core.readNamespacedSecret({ namespace: NAMESPACE, name: "gpucloud-credentials" });
    expect(secret.metadata?.finalizers).toContain("gpucloud.dev/credentials-in-use");
    // Its users say why nothing new is created with it (the Secret is being deleted), in either shard.
    expect(reasonOf(await env.get("GpuVm", others[0] ?? ""))).toBe("CredentialsMissing");
  }, 60_000);
});
