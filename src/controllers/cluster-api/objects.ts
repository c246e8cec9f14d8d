// What the provider's controllers read of Cluster API's own objects (Cluster and Machine, v1beta2) and of the
// operator objects a GpuCluster or GpuMachine owns: only the fields used, parsed with zod (a malformed object reads
// as absent, never as a crash), and the Kubernetes resources they are read from.
import { z } from "zod";
import { CLUSTER_API_ANNOTATIONS, CLUSTER_API_LABELS } from "../../api/cluster-api.ts";
import { ANNOTATIONS, Condition } from "../../api/common.ts";
import type { KubeResource } from "../../runtime/index.ts";

/** Cluster API's core group, and the version of the contract the provider implements. */
export const CLUSTER_API_GROUP = "cluster.x-k8s.io";
export const CLUSTER_API_VERSION = "v1beta2";

export const CLUSTERS: KubeResource = {
  group: CLUSTER_API_GROUP,
  version: CLUSTER_API_VERSION,
  plural: "clusters",
  kind: "Cluster",
  namespaced: true,
};

export const MACHINES: KubeResource = {
  group: CLUSTER_API_GROUP,
  version: CLUSTER_API_VERSION,
  plural: "machines",
  kind: "Machine",
  namespaced: true,
};

const Meta = z.looseObject({
  name: z.string().min(1),
  namespace: z.string().min(1),
  uid: z.string().default(""),
  labels: z.record(z.string(), z.string()).default({}),
  annotations: z.record(z.string(), z.string()).default({}),
  deletionTimestamp: z.string().optional(),
  ownerReferences: z
    .array(
      z.looseObject({
        apiVersion: z.string(),
        kind: z.string(),
        name: z.string(),
        uid: z.string(),
        controller: z.boolean().optional(),
      }),
    )
    .default([]),
});
export type ObjectRefs = z.infer<typeof Meta>["ownerReferences"];

/** Any object's metadata as the provider reads it (labels and owner references included). */
export const MetadataView = z.looseObject({ metadata: Meta });

const ContractReference = z.looseObject({ apiGroup: z.string().optional(), kind: z.string(), name: z.string() });

export const ClusterView = z.looseObject({
  metadata: Meta,
  spec: z.looseObject({ paused: z.boolean().optional(), infrastructureRef: ContractReference.optional() }).default({}),
  status: z
    .looseObject({
      initialization: z.looseObject({ infrastructureProvisioned: z.boolean().optional() }).optional(),
    })
    .default({}),
});
export type ClusterView = z.infer<typeof ClusterView>;

export const MachineView = z.looseObject({
  metadata: Meta,
  spec: z.looseObject({
    clusterName: z.string(),
    failureDomain: z.string().optional(),
    bootstrap: z.looseObject({ dataSecretName: z.string().optional() }).default({}),
  }),
});
export type MachineView = z.infer<typeof MachineView>;

/**
 * An operator object a GpuMachine or GpuCluster owns (a GpuVm, GpuNetwork, GpuFirewallRule), as read from its
 * informer: what the owner mirrors and decides from. The spec is kept whole (compared with what it should be).
 */
export const OwnedView = z.looseObject({
  metadata: Meta,
  spec: z.record(z.string(), z.unknown()).default({}),
  status: z
    .looseObject({
      id: z.string().optional(),
      cloudName: z.string().optional(),
      conditions: z.array(Condition).optional(),
      createPending: z.unknown().optional(),
      state: z.string().optional(),
      printableState: z.string().optional(),
      location: z.string().optional(),
      publicIP: z.string().optional(),
      privateIP: z.string().optional(),
    })
    .default({}),
});
export type OwnedView = z.infer<typeof OwnedView>;

/** The object parsed by `schema`, or undefined when absent or malformed. */
export function viewOf<T>(schema: z.ZodType<T>, raw: unknown): T | undefined {
  if (raw === undefined) return undefined;
  const parsed = schema.safeParse(raw);
  return parsed.success ? parsed.data : undefined;
}

/** The owner of kind `kind` in Cluster API's core group, whatever its version. */
export function clusterApiOwner(references: ObjectRefs, kind: string): ObjectRefs[number] | undefined {
  return references.find(
    (reference) => reference.kind === kind && reference.apiVersion.startsWith(`${CLUSTER_API_GROUP}/`),
  );
}

/** Whether `owned` names `owner` (uid) as its controller. */
export function controlledBy(owned: { metadata: { ownerReferences: ObjectRefs } }, ownerUid: string): boolean {
  return owned.metadata.ownerReferences.some(
    (reference) => reference.controller === true && reference.uid === ownerUid,
  );
}

/** The Cluster an object belongs to, by Cluster API's label. */
export function clusterNameOf(labels: Record<string, string>): string | undefined {
  return labels[CLUSTER_API_LABELS.clusterName];
}

/**
 * Why an object's reconciliation is paused (Cluster API's rule: the Cluster's spec.paused, or the object's own
 * annotation, whatever its value), or undefined.
 */
export function pauseOf(annotations: Record<string, string>, cluster: ClusterView | undefined): string | undefined {
  if (cluster?.spec.paused === true) return `Cluster ${cluster.metadata.name} has spec.paused: true`;
  if (CLUSTER_API_ANNOTATIONS.paused in annotations) return `the ${CLUSTER_API_ANNOTATIONS.paused} annotation is set`;
  return undefined;
}

/** Whether an owned operator object has been told to pause and has said so (its Ready reason is Paused). */
export function pausedAndAcknowledged(owned: OwnedView): boolean {
  const told = owned.metadata.annotations[ANNOTATIONS.paused] === "true";
  const ready = owned.status.conditions?.find((condition) => condition.type === "Ready");
  return told && ready?.reason === "Paused";
}

/** Whether an owned object's status says Ready=True. */
export function ownedReady(owned: OwnedView): boolean {
  return (
    owned.status.conditions?.some((condition) => condition.type === "Ready" && condition.status === "True") ?? false
  );
}

/** The Ready condition of an owned object, for its owner's messages. */
export function ownedReadyCondition(owned: OwnedView): Condition | undefined {
  return owned.status.conditions?.find((condition) => condition.type === "Ready");
}

/** What a GpuMachine reads of its cluster's GpuCluster: the credentials its VMs use, the failure domains. */
export const GpuClusterView = z.looseObject({
  metadata: Meta,
  spec: z.looseObject({ credentialsRef: z.looseObject({ name: z.string() }).optional() }).default({}),
  status: z.looseObject({ failureDomains: z.array(z.looseObject({ name: z.string() })).optional() }).default({}),
});
export type GpuClusterView = z.infer<typeof GpuClusterView>;
