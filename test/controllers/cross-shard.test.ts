// Two shards in one process: a GpuDisk of shard 0 attached to a GpuVm of shard 1 shows the attachment
// (status.attachedTo, the ATTACHED column) as soon as the GpuVm does, not at the disk's next resync; and a
// detachment the same way. The unit part: which disks a GpuVm's status change concerns.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { attachmentChange } from "../../src/controllers/kinds/attachment-changes.ts";
import { shardOfKey } from "../../src/runtime/index.ts";
import { type Env, NAMESPACE, startEnv, startOtherShard, vmSpec } from "./harness.ts";

const SHARDS = 2;
const SYNC_PERIOD_MS = 10 * 60_000;

/** The first `<prefix>-<n>` whose key falls in `shard`. */
function nameInShard(prefix: string, shard: number): string {
  for (let n = 0; ; n++) {
    const name = `${prefix}-${n}`;
    if (shardOfKey(`${NAMESPACE}/${name}`, SHARDS) === shard) return name;
  }
}

describe("attachmentChange", () => {
  const vm = (disks: string[] | undefined, projectId = "p1") => ({
    status: { projectId, ...(disks ? { attachedDisks: disks.map((id) => ({ id, mode: "read-write" })) } : {}) },
  });
  it.each([
    ["a disk attached", vm([]), vm(["d1"]), ["d1"]],
    ["a disk detached", vm(["d1", "d2"]), vm(["d2"]), ["d1"]],
    ["nothing changed", vm(["d1"]), vm(["d1"]), undefined],
    ["the VM deleted", vm(["d1"]), undefined, ["d1"]],
    ["the first status", undefined, vm(["d1"]), ["d1"]],
    ["no status at all", {}, {}, undefined],
  ])("%s", (_, previous, current, disks) => {
    expect(attachmentChange(previous, current)?.diskIds).toEqual(disks);
  });
});

describe("a disk of one shard attached to a VM of the other", () => {
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

  it("shows the attachment and the detachment within seconds, as the VM does", async () => {
    const disk = nameInShard("xs-disk", 0);
    const vm = nameInShard("xs-vm", 1);
    await env.apply("GpuDisk", disk, { size: "10GiB", location: "us-east1-a" });
    await env.waitReady("GpuDisk", disk, 10_000);
    await env.apply("GpuVm", vm, vmSpec({ disks: [{ diskRef: { name: disk } }] }));
    const attached = await env.waitFor(
      "GpuVm",
      vm,
      (o) => Array.isArray(o?.status?.attachedDisks) && o.status.attachedDisks.length === 1,
      15_000,
    );
    const vmId = attached?.status?.id;
    // The disk's resync is minutes away: only the VM's status change can tell its shard in time.
    const shown = await env.waitFor(
      "GpuDisk",
      disk,
      (o) => o?.status?.printableAttachedTo === vm && (o.status.attachedTo as unknown[] | undefined)?.length === 1,
      5_000,
    );
    expect(shown?.status?.attachedTo).toEqual([expect.objectContaining({ vmId, gpuVm: vm })]);

    await env.patchSpec("GpuVm", vm, { disks: [] });
    await env.waitFor("GpuVm", vm, (o) => (o?.status?.attachedDisks as unknown[] | undefined)?.length === 0, 15_000);
    await env.waitFor(
      "GpuDisk",
      disk,
      (o) => (o?.status?.attachedTo as unknown[] | undefined)?.length === 0 && o?.status?.printableAttachedTo === "",
      5_000,
    );
  }, 60_000);
});
