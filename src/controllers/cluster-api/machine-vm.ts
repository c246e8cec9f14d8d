// A GpuMachine's GpuVm, as the GpuMachine controller makes and reads it: the GpuVm's name and body (the machine's
// VM fields, its cluster's credentials, the bootstrap data as startup script through a Secret the GpuMachine
// owns), where it goes (Machine.spec.failureDomain, else the machine's locations, else the cluster's failure
// domains, fewest machines first), and the contract fields the GpuMachine mirrors from it.
import { createHash } from "node:crypto";
import type { z } from "zod";
import { CLUSTER_API_LABELS, type MachineAddress } from "../../api/cluster-api.ts";
import { ANNOTATIONS, GROUP, SECRET_WATCH_LABEL, VERSION } from "../../api/common.ts";
import { GpuMachineSpec, gpuMachineKind } from "../../api/gpu-machine.ts";
import type { ManagedObject, ManagedSpecBase } from "../core/object-model.ts";
import type { OwnedView } from "./objects.ts";

/** The key of the bootstrap data Secret Cluster API writes (its format in `format`). */
export const BOOTSTRAP_VALUE_KEY = "value";
const MAX_NAME_LENGTH = 253;

/** A GpuMachine's spec as the object model holds specs (it has none of the managed kinds' fields). */
export type MachineSpec = GpuMachineSpec & ManagedSpecBase;
export type GpuMachineObject = ManagedObject<MachineSpec>;
/** GpuMachineSpec's schema, typed for the object model (its output is a MachineSpec without those fields). */
export const MachineSpecSchema = GpuMachineSpec as unknown as z.ZodType<MachineSpec>;

/** The GpuVm of a GpuMachine has its name (one GpuVm per GpuMachine: a second create of it is refused). */
export function gpuVmNameOf(machine: GpuMachineObject): string {
  return machine.metadata.name;
}

/** `<name>-<suffix>`, cut and hashed to stay a valid object name. */
function suffixed(name: string, suffix: string): string {
  const full = `${name}-${suffix}`;
  if (full.length <= MAX_NAME_LENGTH) return full;
  const hash = createHash("sha256").update(name).digest("hex").slice(0, 8);
  return `${name.slice(0, MAX_NAME_LENGTH - suffix.length - hash.length - 2)}-${hash}-${suffix}`;
}

/** The Secret the GpuMachine copies its bootstrap data into, for its GpuVm's startupScriptRef. */
export function bootstrapSecretNameOf(machine: GpuMachineObject): string {
  return suffixed(machine.metadata.name, "bootstrap");
}

/** The owner reference that makes an object the GpuMachine's (Kubernetes deletes it with the GpuMachine). */
export function ownerReferenceTo(machine: GpuMachineObject) {
  return {
    apiVersion: gpuMachineKind.apiVersion,
    kind: gpuMachineKind.kind,
    name: machine.metadata.name,
    uid: machine.metadata.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

function labelsOf(machine: GpuMachineObject, clusterName: string): Record<string, string> {
  return { [CLUSTER_API_LABELS.clusterName]: clusterName, [CLUSTER_API_LABELS.gpuMachine]: machine.metadata.name };
}

/** The copy of the bootstrap data: owned by the GpuMachine, labelled so that the operator's Secret cache holds it. */
export function bootstrapSecretBody(machine: GpuMachineObject, clusterName: string, cloudConfig: string) {
  return {
    apiVersion: "v1",
    kind: "Secret",
    type: "Opaque",
    metadata: {
      name: bootstrapSecretNameOf(machine),
      namespace: machine.metadata.namespace,
      labels: { ...labelsOf(machine, clusterName), [SECRET_WATCH_LABEL]: "true" },
      ownerReferences: [ownerReferenceTo(machine)],
    },
    data: { [BOOTSTRAP_VALUE_KEY]: Buffer.from(cloudConfig, "utf8").toString("base64") },
  };
}

export interface VmPlacement {
  locations: string[];
  /** Where the locations come from, for messages. */
  source: string;
}

/** The GpuVm of a GpuMachine: its VM fields, the cluster's credentials, the bootstrap data as startup script. */
export function gpuVmBody(
  machine: GpuMachineObject,
  input: { clusterName: string; credentialsSecret: string; placement: VmPlacement; paused: boolean },
) {
  const { spec } = machine;
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: "GpuVm",
    metadata: {
      name: gpuVmNameOf(machine),
      namespace: machine.metadata.namespace,
      labels: labelsOf(machine, input.clusterName),
      ...(input.paused ? { annotations: { [ANNOTATIONS.paused]: "true" } } : {}),
      ownerReferences: [ownerReferenceTo(machine)],
    },
    spec: {
      type: spec.type,
      locations: input.placement.locations,
      ...(spec.image !== undefined ? { image: spec.image } : {}),
      ...(spec.sshPublicKey !== undefined ? { sshPublicKey: spec.sshPublicKey } : {}),
      ...(spec.sshPublicKeySecretRef !== undefined ? { sshPublicKeySecretRef: spec.sshPublicKeySecretRef } : {}),
      ...(spec.disks !== undefined ? { disks: spec.disks } : {}),
      startupScriptRef: { kind: "Secret", name: bootstrapSecretNameOf(machine), key: BOOTSTRAP_VALUE_KEY },
      credentialsRef: { name: input.credentialsSecret },
      deletionPolicy: "Delete",
      powerState: "Running",
    },
  };
}

/**
 * Where a machine's VM goes. The Machine's failure domain (a MachineDeployment's or control plane's) always wins,
 * then the GpuMachine's own, then its locations in order; else the cluster's failure domains, those with the
 * fewest of the cluster's VMs first (the rest follow, tried when a location has no capacity).
 */
export function placementOf(
  machine: GpuMachineObject,
  machineFailureDomain: string | undefined,
  clusterDomains: readonly string[],
  vmsPerDomain: ReadonlyMap<string, number>,
): VmPlacement | undefined {
  if (machineFailureDomain !== undefined) {
    return { locations: [machineFailureDomain], source: "Machine.spec.failureDomain" };
  }
  if (machine.spec.failureDomain !== undefined) {
    return { locations: [machine.spec.failureDomain], source: "spec.failureDomain" };
  }
  if (machine.spec.locations !== undefined) return { locations: [...machine.spec.locations], source: "spec.locations" };
  if (clusterDomains.length === 0) return undefined;
  const order = clusterDomains.map((domain, index) => ({ domain, index, count: vmsPerDomain.get(domain) ?? 0 }));
  order.sort((a, b) => a.count - b.count || a.index - b.index);
  return { locations: order.map((entry) => entry.domain), source: "the GpuCluster's failure domains" };
}

/** The location a cluster's VM is in or is going to (its status, else the first location it was given). */
export function locationOfVm(vm: OwnedView): string | undefined {
  if (vm.status.location !== undefined) return vm.status.location;
  const locations = vm.spec.locations;
  return Array.isArray(locations) && typeof locations[0] === "string" ? locations[0] : undefined;
}

/** The machine's addresses, as Cluster API copies them to the Machine: private, public, and the VM's hostname. */
export function addressesOf(vm: OwnedView): MachineAddress[] {
  return [
    ...(vm.status.privateIP ? [{ type: "InternalIP" as const, address: vm.status.privateIP }] : []),
    ...(vm.status.publicIP ? [{ type: "ExternalIP" as const, address: vm.status.publicIP }] : []),
    ...(vm.status.cloudName ? [{ type: "Hostname" as const, address: vm.status.cloudName }] : []),
  ];
}
