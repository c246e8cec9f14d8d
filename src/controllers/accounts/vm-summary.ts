// What the operator holds of each VM in an account's VM snapshot (a family that may hold tens of thousands of
// VMs): the fields the controllers read, not the cloud's whole answer.
import type { Vm, VmDisk } from "../../cloud/wire.ts";

/**
 * What the controllers read of a VM: the VM family's snapshot holds this, not the cloud's whole answer (each
 * disk's serial number, block size, type, location and timestamps; each interface's MAC, network, subnet; the
 * commitment, template and group fields...).
 */
export type VmSummary = Pick<
  Vm,
  "id" | "name" | "type" | "state" | "location" | "ssh_destination" | "created_at" | "updated_at"
> & {
  disks: Pick<VmDisk, "id" | "name" | "mode" | "attachment_type">[];
  network_interfaces: { ips: { private_ipv4: { address: string }; public_ipv4: { address: string } }[] }[];
};

export function summarizeVm(vm: Vm): VmSummary {
  return {
    id: vm.id,
    name: vm.name,
    type: vm.type,
    state: vm.state,
    location: vm.location,
    ssh_destination: vm.ssh_destination,
    created_at: vm.created_at,
    updated_at: vm.updated_at,
    disks: vm.disks.map((disk) => ({
      id: disk.id,
      name: disk.name,
      mode: disk.mode,
      attachment_type: disk.attachment_type,
    })),
    network_interfaces: vm.network_interfaces.map((nic) => ({
      ips: nic.ips.map((ip) => ({
        private_ipv4: { address: ip.private_ipv4.address },
        public_ipv4: { address: ip.public_ipv4.address },
      })),
    })),
  };
}
