// The kinds whose objects manage a cloud resource, in the order their controllers are registered.
import type { ManagedSpecBase } from "../core/object-model.ts";
import type { KindDefinition } from "../managed/external.ts";
import { gpuDisk } from "./gpu-disk.ts";
import { gpuFirewallRule } from "./gpu-firewall-rule.ts";
import { gpuNetwork } from "./gpu-network.ts";
import { gpuVm } from "./gpu-vm.ts";

export const MANAGED_KINDS: readonly KindDefinition<ManagedSpecBase>[] = [gpuVm, gpuDisk, gpuNetwork, gpuFirewallRule];
