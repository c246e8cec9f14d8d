// GpuMachine: Cluster API's infrastructure machine (contract v1beta2) for this cloud: one GPU VM for one Machine,
// booted with the Machine's bootstrap data (a cloud-config with its `kubeadm join`) as its startup script, and
// known to Kubernetes by `spec.providerID` = `gpucloud://<vm id>`. Its VM fields are a GpuVm's (the same zod
// pieces); the VM type is a plain string so that a type the cloud adds works without a new CRD.
import { z } from "zod";
import { PROVIDER_ID_PATTERN } from "../util/provider-id.ts";
import {
  CLUSTER_COLUMN,
  INFRASTRUCTURE_COLUMNS,
  infrastructureKindOptions,
  infrastructureStatusShape,
  MachineAddress,
} from "./cluster-api.ts";
import {
  atMostOneOf,
  type CelRule,
  immutable,
  immutableOnceSet,
  LOCATION_EXPECTED,
  LOCATION_PATTERN,
  matching,
  text,
} from "./fields.ts";
import { GpuVmSpec, refineVmInputs } from "./gpu-vm.ts";
import { defineKind } from "./kind-info.ts";

/** `<family>.<GPUs>x`, as the cloud names its VM types (a100-80gb.8x). */
export const VM_TYPE_PATTERN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?\.[1-9][0-9]*x$/;
export const VM_TYPE_EXPECTED = "must be a VM type such as a100-80gb.8x: <family>.<GPUs>x";
export const MAX_MACHINE_ADDRESSES = 16;

const vmShape = GpuVmSpec.shape;

/** The machine's VM, as a GpuMachineTemplate gives it to every Machine it makes. */
export const machineVmShape = {
  type: matching(z.string().min(1).max(64), VM_TYPE_PATTERN, VM_TYPE_EXPECTED).meta({
    description:
      "VM type, such as a100-80gb.8x: a plain string, so that a type the cloud adds needs no new CRD (a type the " +
      "cloud does not offer stalls the machine, InvalidSpec).",
  }),
  locations: vmShape.locations.meta({
    description:
      "Locations to try in order when the Machine names no failure domain (Machine.spec.failureDomain, which " +
      "a MachineDeployment or control plane sets, always wins); empty: the GpuCluster's failure domains.",
  }),
  image: vmShape.image,
  sshPublicKey: vmShape.sshPublicKey,
  sshPublicKeySecretRef: vmShape.sshPublicKeySecretRef,
  disks: vmShape.disks.meta({
    description:
      "Data disks to attach: GpuDisks of this namespace (attached once Ready) or cloud disk ids; a read-write " +
      "disk can serve one machine only, so a template for several machines lists read-only ones.",
  }),
};

/** Machines are replaced, not changed (Cluster API rolls a MachineDeployment when its template changes). */
const REPLACE_INSTEAD =
  "Cluster API replaces machines instead of changing them: point the MachineDeployment at a new GpuMachineTemplate";

/** The SSH key rules of every spec with machineVmShape (a GpuVm's, without adoption by id). */
export const machineVmRules: readonly CelRule[] = [
  atMostOneOf(["sshPublicKey", "sshPublicKeySecretRef"], "set sshPublicKey or sshPublicKeySecretRef, not both"),
  {
    rule: "has(self.sshPublicKey) || has(self.sshPublicKeySecretRef)",
    message: "set sshPublicKey or sshPublicKeySecretRef",
  },
];

const specRules: readonly CelRule[] = [
  ...machineVmRules,
  {
    ...immutableOnceSet("providerID"),
    message: "providerID cannot change once set: it names the machine's VM",
  },
  ...(["type", "failureDomain", "locations", "image", "sshPublicKey", "sshPublicKeySecretRef", "disks"] as const).map(
    (field) => immutable(field, REPLACE_INSTEAD),
  ),
];

export const GpuMachineSpec = z
  .object({
    providerID: matching(
      z.string().min(1).max(512),
      PROVIDER_ID_PATTERN,
      "must be gpucloud://<vm id>, as the operator sets it",
    )
      .optional()
      .meta({
        description:
          "gpucloud://<vm id>: set by the operator once the VM exists; Cluster API matches it with the Node's " +
          "spec.providerID. Cannot change once set.",
      }),
    failureDomain: matching(z.string().min(1).max(63), LOCATION_PATTERN, LOCATION_EXPECTED)
      .optional()
      .meta({
        description:
          "Location to create the VM in when the Machine names no failure domain (the v1beta1 contract's field, " +
          "kept for it; prefer Machine.spec.failureDomain).",
      }),
    ...machineVmShape,
  })
  .superRefine((spec, ctx) => refineVmInputs(spec, ctx, false))
  .meta({ description: "Desired state of the machine's VM.", "x-kubernetes-validations": specRules });
export type GpuMachineSpec = z.infer<typeof GpuMachineSpec>;

export const GpuMachineStatus = z
  .object({
    ...infrastructureStatusShape("machine's VM"),
    addresses: z
      .array(MachineAddress)
      .max(MAX_MACHINE_ADDRESSES)
      .optional()
      .meta({
        description:
          "The VM's addresses: InternalIP (private), ExternalIP (public) and Hostname; Cluster API copies them to " +
          "the Machine.",
      }),
    failureDomain: text("The location the VM was created in (Cluster API copies it to the Machine).", 63).optional(),
    gpuVm: text("Name of the GpuVm (same namespace) that holds the machine's VM.").optional(),
    state: text("The VM's state without its STATE_ prefix (RUNNING, STOPPED, PROVISIONING, ...).", 64).optional(),
  })
  .meta({ description: "Observed state of the machine (the Cluster API contract's fields and the VM's)." });
export type GpuMachineStatus = z.infer<typeof GpuMachineStatus>;

export const gpuMachineKind = defineKind({
  ...infrastructureKindOptions(true),
  kind: "GpuMachine",
  shortNames: ["gmachine"],
  description:
    "GpuMachine is Cluster API's infrastructure machine in the GPU cloud: the VM of one Machine, booted with its " +
    "bootstrap data. Made by Cluster API from a GpuMachineTemplate; not written by hand.",
  spec: GpuMachineSpec,
  status: GpuMachineStatus,
  printerColumns: [
    CLUSTER_COLUMN,
    {
      name: "Machine",
      type: "string",
      jsonPath: '.metadata.ownerReferences[?(@.kind=="Machine")].name',
      description: "Machine that owns this GpuMachine.",
    },
    { name: "Type", type: "string", jsonPath: ".spec.type", description: "VM type." },
    {
      name: "Failure-Domain",
      type: "string",
      jsonPath: ".status.failureDomain",
      description: "Location of the VM.",
    },
    { name: "State", type: "string", jsonPath: ".status.state", description: "State of the VM in the cloud." },
    {
      name: "ProviderID",
      type: "string",
      jsonPath: ".spec.providerID",
      description: "gpucloud://<vm id>, the Node's spec.providerID.",
      priority: 1,
    },
    ...INFRASTRUCTURE_COLUMNS,
  ],
});
export const GpuMachine = gpuMachineKind.schema;
export type GpuMachine = z.infer<typeof GpuMachine>;
