// Deleting a GpuVmPool: its members are deleted through the API by the operator itself (each GpuVm's own
// deletionPolicy decides about its cloud VM; the disks follow persistentDiskPolicy), and the pool's finalizer is
// removed once none is left, so nothing depends on the garbage collector. deletionPolicy Orphan removes the
// pool's owner reference from every member instead (they keep the pool label: a new pool of that name adopts
// them).

import { REASONS } from "../../api/common.ts";
import { GpuVmPoolStatus } from "../../api/gpu-vm-pool.ts";
import type { LifecyclePass } from "../core/lifecycle.ts";
import { release } from "../core/lifecycle.ts";
import type { ManagedStatusBase } from "../core/object-model.ts";
import { after, conflict, type Step, verdict } from "../core/verdict.ts";
import { type ActionContext, letDisksGo, orphanMembers, readMembers, removeReplica } from "./actions.ts";

export async function deletePool(
  context: ActionContext,
  pass: LifecyclePass,
  timing: { shortMs: number },
): Promise<Step> {
  const { pool, key, expectations } = context;
  const vms = readMembers(context.members, "GpuVm", pool).ours;
  const disks = readMembers(context.members, "GpuDisk", pool).ours;
  if (context.spec.deletionPolicy === "Orphan") {
    const complete = (await orphanMembers(context, "GpuVm", vms)) && (await orphanMembers(context, "GpuDisk", disks));
    if (!complete) return conflict();
    const kept = `kept ${vms.length} GpuVms and ${disks.length} GpuDisks (deletionPolicy Orphan)`;
    return release(pass, "Normal", `${kept}; their owner references are removed`);
  }
  expectations.observe(key, new Map(vms.map((vm) => [vm.name, vm])));
  // Slots whose GpuVm the cache does not show (created just now, or never): deleted by name, seen or not.
  const recorded = GpuVmPoolStatus.safeParse(pass.draft).data?.slots ?? [];
  const seen = new Set(vms.map((vm) => vm.name));
  for (const name of new Set([...recorded.map((slot) => slot.name), ...expectations.unseen(key)])) {
    if (!seen.has(name)) await context.members.delete("GpuVm", pool.namespace, name);
  }
  for (const vm of vms) {
    await removeReplica(context, vm, [], REASONS.Deleting, `deleting replica ${vm.name} (the pool is deleted)`);
  }
  await letDisksGo(context, disks);
  const remainingDisks = context.spec.persistentDiskPolicy === "Delete" ? disks.length : 0;
  const unseen = expectations.unseen(key).filter((name) => !seen.has(name)).length;
  if (vms.length + remainingDisks + unseen === 0) {
    expectations.forget(key);
    return release(pass, "Normal", "every replica is deleted");
  }
  (pass.draft as ManagedStatusBase).slots = [];
  const disksLeft = remainingDisks > 0 ? ` and ${remainingDisks} GpuDisks` : "";
  const waiting = `waiting for ${vms.length + unseen} GpuVms${disksLeft} to be deleted`;
  return verdict(REASONS.Deleting, waiting, after(timing.shortMs * 5), { progressing: true, event: "Normal" });
}
