// What the Cluster API infrastructure kinds (GpuCluster, GpuMachine, GpuMachineTemplate) share: the group and
// version of the v1beta2 contract (Cluster API v1.14), the contract label of their CRDs, Cluster API's labels and
// annotations, and the contract's status pieces (initialization, machine addresses, conditions with Paused).
// docs/cluster-api.md has the contract table: each field, who sets it, its test.
import { z } from "zod";
import { CATEGORY, Condition } from "./common.ts";
import { AGE_COLUMN, type KindInfo, type PrinterColumn, READY_COLUMN, REASON_COLUMN } from "./kind-info.ts";

/** The group infrastructure providers use (Cluster API's core manager is granted every verb on it). */
export const INFRASTRUCTURE_GROUP = "infrastructure.cluster.x-k8s.io";
export const INFRASTRUCTURE_VERSION = "v1alpha1";
export const INFRASTRUCTURE_API_VERSION = `${INFRASTRUCTURE_GROUP}/${INFRASTRUCTURE_VERSION}`;
/** The Cluster API contract these kinds implement. */
export const CONTRACT_VERSION = "v1beta2";
/**
 * The label Cluster API reads on an infrastructure CRD: which of its versions implement which contract version
 * (underscore-separated; the last is used). It decides how Cluster API reads the objects: with v1beta2,
 * `status.initialization.provisioned` (not the v1beta1 `status.ready`).
 */
export const CONTRACT_CRD_LABELS: Readonly<Record<string, string>> = {
  [`cluster.x-k8s.io/${CONTRACT_VERSION}`]: INFRASTRUCTURE_VERSION,
};
/** Cluster API's category: `kubectl get cluster-api` lists every Cluster API object. */
export const CLUSTER_API_CATEGORY = "cluster-api";

export const CLUSTER_API_LABELS = {
  /** The Cluster an object belongs to (Cluster API sets it on the objects it makes from templates). */
  clusterName: "cluster.x-k8s.io/cluster-name",
  /**
   * On a CRD: its objects may belong to a cluster, so `clusterctl move` looks for them (clusterctl puts it on what it
   * installs; the CRDs of crds/ carry it for installs by Helm or kustomize, ADR 0031).
   */
  clusterctl: "clusterctl.cluster.x-k8s.io",
  /** On the GpuVm (and bootstrap data Secret) of a GpuMachine: the GpuMachine's name. */
  gpuMachine: "infrastructure.cluster.x-k8s.io/gpu-machine",
  /** On the GpuNetwork and GpuFirewallRules of a GpuCluster: the GpuCluster's name. */
  gpuCluster: "infrastructure.cluster.x-k8s.io/gpu-cluster",
} as const;

export const CLUSTER_API_ANNOTATIONS = {
  /** Set by Cluster API (a paused Cluster, `clusterctl move`) or by hand: no reconciliation, no cloud call. */
  paused: "cluster.x-k8s.io/paused",
  /**
   * clusterctl waits for it to go before it moves anything: an object holds it while it cannot be paused at once
   * (its GpuVm, GpuNetwork or GpuFirewallRules still act), and drops it once they are paused.
   */
  blockMove: "clusterctl.cluster.x-k8s.io/block-move",
  /** Put by `clusterctl move` on what it deletes from the source cluster once copied: nothing in the cloud goes. */
  deleteForMove: "clusterctl.cluster.x-k8s.io/delete-for-move",
} as const;

/** The labels of the CRDs whose objects `clusterctl move` must find (their owners are a Cluster's objects). */
export const CLUSTERCTL_CRD_LABELS: Readonly<Record<string, string>> = { [CLUSTER_API_LABELS.clusterctl]: "" };

/** The conditions of the infrastructure kinds: kstatus' three, and the contract's Paused. */
export const INFRASTRUCTURE_CONDITION_TYPES = ["Ready", "Reconciling", "Stalled", "Paused"] as const;

export const MAX_INFRASTRUCTURE_CONDITIONS = 8;

export const InfrastructureConditions = z
  .array(
    Condition.extend({
      type: z
        .string()
        .min(1)
        .max(316)
        .meta({ description: `Condition type: ${INFRASTRUCTURE_CONDITION_TYPES.join(", ")}.` }),
    }).meta({ description: "An observation of the object's state (kstatus and Cluster API read it)." }),
  )
  .max(MAX_INFRASTRUCTURE_CONDITIONS)
  .optional()
  .meta({
    description:
      "Conditions: Ready (mirrored by Cluster API to the Machine's or Cluster's InfrastructureReady), " +
      "Reconciling and Stalled (kstatus), Paused (True while the cluster.x-k8s.io/paused annotation or the " +
      "Cluster's spec.paused stops reconciliation).",
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
  });

/** status.initialization: what Cluster API waits for before it uses the object's other contract fields. */
export function initialization(what: string) {
  return z
    .object({
      provisioned: z
        .boolean()
        .optional()
        .meta({
          description: `True once the ${what} is fully provisioned: Cluster API then copies the contract fields.`,
        }),
    })
    .optional()
    .meta({
      description: `Observations of the ${what}'s initialization (a Cluster API contract field).`,
      minProperties: 1,
    });
}

/** The status fields every infrastructure kind with a lifecycle starts with. Spread into its z.object. */
export function infrastructureStatusShape(what: string) {
  return {
    observedGeneration: z
      .int()
      .min(0)
      .optional()
      .meta({ description: "metadata.generation the status was last computed from." }),
    conditions: InfrastructureConditions,
    initialization: initialization(what),
  };
}

export const MACHINE_ADDRESS_TYPES = ["Hostname", "ExternalIP", "InternalIP", "ExternalDNS", "InternalDNS"] as const;

export const MachineAddress = z
  .object({
    type: z
      .enum(MACHINE_ADDRESS_TYPES)
      .meta({ description: "Hostname, ExternalIP, InternalIP, ExternalDNS or InternalDNS." }),
    address: z.string().min(1).max(256).meta({ description: "The address." }),
  })
  .meta({ description: "An address of the machine, as Cluster API's MachineAddress." });
export type MachineAddress = z.infer<typeof MachineAddress>;

/** The cluster an object belongs to, from Cluster API's label. */
export const CLUSTER_COLUMN: PrinterColumn = {
  name: "Cluster",
  type: "string",
  // Escaped dots: a key in brackets is read as a path (client-go's jsonpath), as Cluster API's own columns do.
  jsonPath: `.metadata.labels['${CLUSTER_API_LABELS.clusterName.replaceAll(".", "\\.")}']`,
  description: "Cluster to which this object belongs.",
};

export const PAUSED_COLUMN: PrinterColumn = {
  name: "Paused",
  type: "string",
  jsonPath: '.status.conditions[?(@.type=="Paused")].status',
  description: "Status of the Paused condition.",
  priority: 1,
};

/** The columns the infrastructure kinds end with: Ready, Reason, Paused (wide), Age. */
export const INFRASTRUCTURE_COLUMNS: readonly PrinterColumn[] = [
  READY_COLUMN,
  REASON_COLUMN,
  PAUSED_COLUMN,
  AGE_COLUMN,
];

/** The options defineKind takes for a Cluster API infrastructure kind. */
export function infrastructureKindOptions(inGpucloudCategory: boolean) {
  return {
    group: INFRASTRUCTURE_GROUP,
    version: INFRASTRUCTURE_VERSION,
    crdLabels: { ...CONTRACT_CRD_LABELS, ...CLUSTERCTL_CRD_LABELS },
    categories: inGpucloudCategory ? [CLUSTER_API_CATEGORY, CATEGORY] : [CLUSTER_API_CATEGORY],
  };
}

/** Whether a kind is one of the Cluster API infrastructure kinds. */
export function isInfrastructureKind(info: Pick<KindInfo, "group">): boolean {
  return info.group === INFRASTRUCTURE_GROUP;
}
