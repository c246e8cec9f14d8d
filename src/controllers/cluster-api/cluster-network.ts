// A GpuCluster's network and firewall rules, as the GpuCluster controller makes them: a GpuNetwork named after the
// GpuCluster (spec.network.cidr) and a GpuFirewallRule `<cluster>-<rule>` per spec.firewallRules entry, owned by
// the GpuCluster, with its credentials; what of a rule can change in place (and what needs a new rule).
import { CLUSTER_API_LABELS } from "../../api/cluster-api.ts";
import { GROUP, VERSION } from "../../api/common.ts";
import type { GpuClusterSpec } from "../../api/gpu-cluster.ts";
import { gpuClusterKind } from "../../api/gpu-cluster.ts";
import { sameJson } from "../../util/json-values.ts";
import type { ManagedObject } from "../core/object-model.ts";
import type { OwnedView } from "./objects.ts";

export type GpuClusterObject = ManagedObject<GpuClusterSpec>;
type ClusterRule = NonNullable<GpuClusterSpec["firewallRules"]>[number];

/** The fields of a rule the cloud changes in place (PATCH); direction and action need a new rule. */
const CHANGEABLE_RULE_FIELDS = ["protocols", "sources", "destinations", "sourcePorts", "destinationPorts"] as const;
const FIXED_RULE_FIELDS = ["direction", "action"] as const;

export function networkNameOf(cluster: GpuClusterObject): string {
  return cluster.metadata.name;
}

export function ruleNameOf(cluster: GpuClusterObject, rule: { name: string }): string {
  return `${cluster.metadata.name}-${rule.name}`;
}

function ownerReference(cluster: GpuClusterObject) {
  return {
    apiVersion: gpuClusterKind.apiVersion,
    kind: gpuClusterKind.kind,
    name: cluster.metadata.name,
    uid: cluster.metadata.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

function metadataOf(cluster: GpuClusterObject, name: string, clusterName: string | undefined) {
  return {
    name,
    namespace: cluster.metadata.namespace,
    labels: {
      [CLUSTER_API_LABELS.gpuCluster]: cluster.metadata.name,
      ...(clusterName !== undefined ? { [CLUSTER_API_LABELS.clusterName]: clusterName } : {}),
    },
    ownerReferences: [ownerReference(cluster)],
  };
}

export function networkBody(cluster: GpuClusterObject, cidr: string, clusterName: string | undefined) {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: "GpuNetwork",
    metadata: metadataOf(cluster, networkNameOf(cluster), clusterName),
    spec: { cidr, credentialsRef: cluster.spec.credentialsRef, deletionPolicy: "Delete" },
  };
}

/** The spec a rule object should have: the rule's fields on the cluster's network. */
export function ruleSpec(cluster: GpuClusterObject, rule: ClusterRule): Record<string, unknown> {
  const network = cluster.spec.network;
  const on = network?.id !== undefined ? { networkId: network.id } : { networkRef: { name: networkNameOf(cluster) } };
  const { name: _name, ...fields } = rule;
  return { ...on, ...fields, credentialsRef: cluster.spec.credentialsRef, deletionPolicy: "Delete" };
}

export function ruleBody(cluster: GpuClusterObject, rule: ClusterRule, clusterName: string | undefined) {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: "GpuFirewallRule",
    metadata: metadataOf(cluster, ruleNameOf(cluster, rule), clusterName),
    spec: ruleSpec(cluster, rule),
  };
}

/** How a rule object differs from what the cluster's spec asks: nothing, a patch of its spec, or a new rule. */
export function ruleChange(
  existing: OwnedView,
  wanted: Record<string, unknown>,
): { type: "none" } | { type: "patch"; spec: Record<string, unknown> } | { type: "replace" } {
  if (FIXED_RULE_FIELDS.some((field) => !sameJson(existing.spec[field], wanted[field]))) return { type: "replace" };
  const spec: Record<string, unknown> = {};
  for (const field of CHANGEABLE_RULE_FIELDS) {
    if (!sameJson(existing.spec[field], wanted[field])) spec[field] = wanted[field] ?? null;
  }
  return Object.keys(spec).length === 0 ? { type: "none" } : { type: "patch", spec };
}
