// The claim sweep through the running operator: a claim whose holder goes without the operator letting it go (its
// finalizer removed by hand) is released when the holder leaves the cache, not at the next resync; and every
// claim is looked at when the operator starts. Claims are not resynced one by one (a queue entry each).
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { GROUP, VERSION } from "../../src/api/common.ts";
import { CLAIMS_RESOURCE } from "../../src/controllers/managed/claim-records.ts";
import type { Claim } from "../../src/controllers/managed/claims.ts";
import { eventually } from "../runtime/helpers.ts";
import { type Env, NAMESPACE, reasonOf, startEnv, startOtherShard, vmSpec } from "./harness.ts";

const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const HOUR = 3_600_000;

let env: Env | undefined;
let otherShard: Awaited<ReturnType<typeof startOtherShard>> | undefined;
afterEach(async () => {
  await otherShard?.stop();
  otherShard = undefined;
  await env?.close();
  env = undefined;
});

async function holdersOfClaims(e: Env): Promise<string[]> {
  const list = (await e.custom.listNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    plural: "gpucloudclaims",
    namespace: NAMESPACE,
  })) as { items: { spec: { holder: { name: string } } }[] };
  return list.items.map((item) => item.spec.holder.name).sort();
}

/** The GpuVm paused (no pass acts on it), its finalizer removed by hand, then deleted: gone at once, claim left. */
async function dropBehindTheOperator(e: Env, name: string): Promise<void> {
  await e.annotate("GpuVm", name, { "gpucloud.dev/paused": "true" });
  await e.waitFor("GpuVm", name, (o) => reasonOf(o) === "Paused");
  await e.custom.patchNamespacedCustomObject(
    {
      group: GROUP,
      version: VERSION,
      plural: "gpuvms",
      namespace: NAMESPACE,
      name,
      body: { metadata: { finalizers: null } },
    },
    MERGE,
  );
  await e.remove("GpuVm", name);
  expect(await e.get("GpuVm", name), "deleted without a finalizer: no pass of the operator let it go").toBeUndefined();
}

describe("the claim sweep", () => {
  it("releases the claim of a holder deleted behind the operator when the holder leaves the cache", async () => {
    env = await startEnv({ config: { syncPeriodMs: HOUR } });
    await env.apply("GpuVm", "kept", vmSpec());
    await env.apply("GpuVm", "dropped", vmSpec());
    await env.waitReady("GpuVm", "kept");
    await env.waitReady("GpuVm", "dropped");
    expect(await holdersOfClaims(env)).toEqual(["dropped", "kept"]);
    await dropBehindTheOperator(env, "dropped");
    // A resync would come after an hour: the holder's delete event is what wakes its claim.
    await eventually(async () => expect(await holdersOfClaims(env as Env)).toEqual(["kept"]), 10_000);
  });

  it("the claims informer holds no claim object: each claim is noted as its parsed Claim, the store's one copy", async () => {
    env = await startEnv({ config: { syncPeriodMs: HOUR } });
    await env.apply("GpuVm", "kept", vmSpec());
    await env.waitReady("GpuVm", "kept");
    const claimsNamespace = env.manager.config.claimsNamespace;
    const informer = env.manager.informerFor(CLAIMS_RESOURCE, [claimsNamespace]);
    expect(informer.list()).toEqual([]);
    const noted = informer.keys().map((key) => informer.noteOf(claimsNamespace, key.split("/")[1] ?? "") as Claim);
    expect(noted.map((claim) => [claim.kind, claim.holder.name, typeof claim.id])).toEqual([
      ["GpuVm", "kept", "string"],
    ]);
  });

  it("with two shards: a claim is released whichever shard holds the holder (held, or noted by the other's view)", async () => {
    env = await startEnv({ config: { syncPeriodMs: HOUR, shard: { index: 0, count: 2 } } });
    otherShard = await startOtherShard(env, { index: 1, count: 2 }, HOUR);
    const names = ["a", "b", "c", "d", "e", "f"];
    for (const name of names) await env.apply("GpuVm", name, vmSpec());
    for (const name of names) await env.waitReady("GpuVm", name, 15_000);
    for (const name of names.slice(1)) await dropBehindTheOperator(env, name);
    await eventually(async () => expect(await holdersOfClaims(env as Env)).toEqual(["a"]), 10_000);
  });

  it("looks at every claim when the operator starts", async () => {
    env = await startEnv({ config: { syncPeriodMs: HOUR } });
    await env.apply("GpuVm", "dropped", vmSpec());
    await env.waitReady("GpuVm", "dropped");
    await env.stopOperator();
    await env.custom.patchNamespacedCustomObject(
      {
        group: GROUP,
        version: VERSION,
        plural: "gpuvms",
        namespace: NAMESPACE,
        name: "dropped",
        body: { metadata: { finalizers: null } },
      },
      MERGE,
    );
    await env.remove("GpuVm", "dropped");
    expect(await holdersOfClaims(env)).toEqual(["dropped"]);
    await env.startOperator();
    await eventually(async () => expect(await holdersOfClaims(env as Env)).toEqual([]), 10_000);
  });
});
