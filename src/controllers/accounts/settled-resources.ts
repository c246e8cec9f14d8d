// A succeeded operation's `result` is its resource as the operation left it (the simulator's VM and disk
// operations answer so, as the public cloud's do): that resource goes into its family's snapshot as read now, so
// that its owner's next look (as fresh as the settlement) needs no list. During a burst this is what keeps the
// calls per created VM at one: the create, and a share of the operation lists that settle it.
import { Disk, type Operation, type OperationFamily, Vm } from "../../cloud/wire.ts";
import type { FamilySnapshot } from "./snapshots.ts";
import { summarizeVm, type VmSummary } from "./vm-summary.ts";

/** An older copy than the snapshot holds is not taken: a list may have shown a later change meanwhile. */
function notOlder(held: { updated_at?: string } | undefined, shown: { updated_at?: string }): boolean {
  return held?.updated_at === undefined || shown.updated_at === undefined || shown.updated_at >= held.updated_at;
}

/**
 * Puts the resource a succeeded operation answered with into its snapshot, as read at `at`. False when the
 * result is not the resource (another shape, another id, a DELETE), is older than what the snapshot holds, or is of
 * a family whose answers carry no `updated_at` to tell (networks, firewall rules): they are listed as before.
 */
export function observeSettledResource(
  snapshots: { vms: FamilySnapshot<VmSummary>; disks: FamilySnapshot<Disk> },
  family: OperationFamily,
  operation: Operation,
  at: number,
): boolean {
  if (operation.state !== "SUCCEEDED" || operation.metadata.operation_name === "DELETE") return false;
  const id = operation.metadata.id;
  if (family === "vm") {
    const vm = Vm.safeParse(operation.result);
    if (!vm.success || vm.data.id !== id || !notOlder(snapshots.vms.held(id), vm.data)) return false;
    snapshots.vms.observed(summarizeVm(vm.data), at);
    return true;
  }
  if (family === "disk") {
    const disk = Disk.safeParse(operation.result);
    if (!disk.success || disk.data.id !== id || !notOlder(snapshots.disks.held(id), disk.data)) return false;
    snapshots.disks.observed(disk.data, at);
    return true;
  }
  return false;
}
