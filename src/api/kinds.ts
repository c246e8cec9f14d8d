// Every custom resource kind, in the order the CRDs and the reference doc list them.

import { gpuBudgetKind } from "./gpu-budget.ts";
import { gpuCloudClaimKind } from "./gpu-cloud-claim.ts";
import { gpuClusterKind } from "./gpu-cluster.ts";
import { gpuDiskKind } from "./gpu-disk.ts";
import { gpuFirewallRuleKind } from "./gpu-firewall-rule.ts";
import { gpuMachineKind } from "./gpu-machine.ts";
import { gpuMachineTemplateKind } from "./gpu-machine-template.ts";
import { gpuNetworkKind } from "./gpu-network.ts";
import { gpuVmKind } from "./gpu-vm.ts";
import { gpuVmPoolKind } from "./gpu-vm-pool.ts";
import type { KindInfo } from "./kind-info.ts";

export const KINDS: readonly KindInfo[] = [
  gpuVmKind,
  gpuDiskKind,
  gpuNetworkKind,
  gpuFirewallRuleKind,
  gpuVmPoolKind,
  gpuBudgetKind,
  gpuCloudClaimKind,
  // Cluster API's infrastructure kinds (infrastructure.cluster.x-k8s.io).
  gpuClusterKind,
  gpuMachineKind,
  gpuMachineTemplateKind,
];

/** The kinds users write (the `gpucloud` category); GpuCloudClaim is the operator's own record. */
export const USER_KINDS: readonly KindInfo[] = KINDS.filter((info) => info.categories.length > 0);

/** The kind descriptor by kind name (`GpuVm`), or undefined. */
export function kindInfo(kind: string): KindInfo | undefined {
  return KINDS.find((info) => info.kind === kind);
}
