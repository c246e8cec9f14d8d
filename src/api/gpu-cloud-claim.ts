// GpuCloudClaim: the operator's record of which object manages which cloud resource. One claim per cloud name
// slot (account, project, kind, cloud name), named by a digest of that slot and created with create-only
// semantics, so two objects, replicas or shards racing for one resource get exactly one winner; the resource's id
// is added once known. Claims live in the operator's own namespace, which tenants cannot write: a tenant who can
// edit a GpuVm's spec or status cannot make it manage another's resource (docs/adr/0021-ownership-claims.md).
import { createHash } from "node:crypto";
import { z } from "zod";
import { GROUP, MAX_CLOUD_NAME_LENGTH } from "./common.ts";
import { text } from "./fields.ts";
import { AGE_COLUMN, defineKind, type PrinterColumn } from "./kind-info.ts";

/** The kinds whose cloud resources are claimed (the managed kinds; a GpuVmPool owns objects, not resources). */
export const CLAIMED_KINDS = ["GpuVm", "GpuDisk", "GpuNetwork", "GpuFirewallRule"] as const;
export type ClaimedKind = (typeof CLAIMED_KINDS)[number];

/** Labels every claim carries, for selection by the operator and for an administrator's `kubectl get -l`. */
export const CLAIM_LABELS = {
  /** The uid of the object holding the claim. */
  holderUid: `${GROUP}/holder-uid`,
  /** The namespace of the object holding the claim. */
  holderNamespace: `${GROUP}/holder-namespace`,
  /** The claimed resource's id (or `sha256-<digest>` of it when it is not a valid label value), once known. */
  resourceId: `${GROUP}/resource-id`,
} as const;

const Holder = z
  .object({
    namespace: text("Namespace of the object that manages the resource.", 63),
    name: text("Name of the object that manages the resource."),
    uid: text(
      "UID of the object that manages the resource: a re-created object of the same name is another holder.",
      128,
    ),
  })
  .meta({ description: "The object that manages the cloud resource." });

export const GpuCloudClaimSpec = z
  .object({
    kind: z.enum(CLAIMED_KINDS).meta({ description: "Kind of the object that manages the resource." }),
    apiUrl: text("Base URL of the cloud API the resource lives behind (normalised).", 2048),
    projectId: text("Cloud project the resource lives in.", 128),
    cloudName: text(
      "The cloud name the claim reserves: the resource is created or was found under it.",
      MAX_CLOUD_NAME_LENGTH,
    ),
    id: text("Id of the claimed resource, once it is known (absent while its create is in flight).", 253).optional(),
    holder: Holder,
  })
  .meta({ description: "What is claimed and by whom. Written by the operator only." });

export const GpuCloudClaimStatus = z.object({}).meta({ description: "Unused: a claim is all spec." });

const columns: readonly PrinterColumn[] = [
  { name: "Kind", type: "string", jsonPath: ".spec.kind", description: "Kind of the holder." },
  { name: "Project", type: "string", jsonPath: ".spec.projectId", description: "Cloud project." },
  { name: "Cloud Name", type: "string", jsonPath: ".spec.cloudName", description: "Cloud name reserved." },
  { name: "ID", type: "string", jsonPath: ".spec.id", description: "Id of the claimed resource." },
  { name: "Holder NS", type: "string", jsonPath: ".spec.holder.namespace", description: "Holder's namespace." },
  { name: "Holder", type: "string", jsonPath: ".spec.holder.name", description: "Holder's name." },
  AGE_COLUMN,
];

export const gpuCloudClaimKind = defineKind({
  kind: "GpuCloudClaim",
  shortNames: ["gclaim"],
  description:
    "The operator's record that one object manages one cloud resource (a VM, disk, network or firewall rule " +
    "in one project). Created and deleted by the operator in its own namespace; never edit or delete one by " +
    "hand: a claim removed while its holder exists lets another object take the resource.",
  spec: GpuCloudClaimSpec,
  status: GpuCloudClaimStatus,
  printerColumns: columns,
  // Not in the `gpucloud` category: `kubectl get gpucloud` lists what tenants manage, not the operator's records.
  categories: [],
});

export type GpuCloudClaimSpec = z.infer<typeof GpuCloudClaimSpec>;

/** The slot a claim reserves: one cloud name of one kind in one project behind one API URL. */
export interface ClaimSlot {
  kind: ClaimedKind;
  apiUrl: string;
  projectId: string;
  cloudName: string;
}

/**
 * The claim's object name: `<kind>-<40 hex digits of sha256(apiUrl, projectId, cloudName)>`. Deterministic, so
 * every replica, shard and namespace racing for one slot creates the same object and the API server picks one.
 */
export function claimNameOf(slot: ClaimSlot): string {
  const digest = createHash("sha256")
    .update(`${slot.apiUrl}\u0000${slot.projectId}\u0000${slot.cloudName}`)
    .digest("hex")
    .slice(0, 40);
  return `${slot.kind.toLowerCase()}-${digest}`;
}

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** A resource id as a label value: itself when it is one, else a digest of it. */
export function resourceIdLabel(id: string): string {
  if (id.length <= 63 && LABEL_VALUE.test(id)) return id;
  return `sha256-${createHash("sha256").update(id).digest("hex").slice(0, 56)}`;
}
