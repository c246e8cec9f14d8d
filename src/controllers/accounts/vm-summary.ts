// What the operator holds of each VM in an account's VM snapshot (a family that may hold tens of thousands of
// VMs): the fields the controllers read, not the cloud's whole answer.
import type { Vm, VmDisk } from "../../cloud/wire.ts";

/** A data disk as the controllers read it (which disk, in which mode). */
export type VmDiskSummary = Pick<VmDisk, "id" | "name" | "mode">;

/**
 * What the controllers read of a VM: the VM family's snapshot holds this, not the cloud's whole answer (each
 * disk's serial number, block size, type, location and timestamps; each interface's MAC, network, subnet; the
 * commitment, template and group fields...). Flat where the answer nests: the status shows the first interface's
 * first addresses, and nothing reads the boot disk (attachment_type `os`); each nested object is about 40 bytes of
 * heap more per VM, held for every VM of the project by every replica.
 */
export type VmSummary = Pick<
  Vm,
  "id" | "name" | "type" | "state" | "location" | "ssh_destination" | "created_at" | "updated_at"
> & {
  /** The data disks; one shared empty array for a VM without (most VMs). */
  disks: readonly VmDiskSummary[];
  /**
   * The first network interface's first private and public IPv4 addresses, when the cloud gave them. Present
   * (possibly undefined) in every summary, so that the cloud's whole answer is not taken for one by mistake.
   */
  privateIPv4: string | undefined;
  publicIPv4: string | undefined;
};

const NO_DISKS: readonly VmDiskSummary[] = Object.freeze([]);

export function summarizeVm(vm: Vm): VmSummary {
  const ip = vm.network_interfaces.flatMap((nic) => nic.ips)[0];
  const disks: VmDiskSummary[] = [];
  for (const disk of vm.disks) {
    if (disk.attachment_type === "os") continue;
    disks.push({ id: disk.id, name: disk.name, mode: disk.mode });
  }
  return {
    id: vm.id,
    name: vm.name,
    type: vm.type,
    state: vm.state,
    location: vm.location,
    ssh_destination: vm.ssh_destination,
    created_at: vm.created_at,
    updated_at: vm.updated_at,
    disks: disks.length > 0 ? disks : NO_DISKS,
    privateIPv4: ip?.private_ipv4.address || undefined,
    publicIPv4: ip?.public_ipv4.address || undefined,
  };
}
