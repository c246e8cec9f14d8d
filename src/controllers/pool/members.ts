// A GpuVmPool's members as the pool sees them in the informer caches (its GpuVms and GpuDisks), what each should
// look like (names, labels, owner reference, spec from the template), the template revision that decides
// replacement, and the in-place change a member needs.
import { createHash } from "node:crypto";
import { z } from "zod";
import { ANNOTATIONS, API_VERSION, ObjectMeta, POOL_LABELS } from "../../api/common.ts";
import type { GpuDiskSpec } from "../../api/gpu-disk.ts";
import { CREATE_ONLY_FIELDS, GpuVmSpec, VmDiskAttachment } from "../../api/gpu-vm.ts";
import type { GpuVmPoolSpec, PoolSlot } from "../../api/gpu-vm-pool.ts";
import { sameJson } from "../../util/json-values.ts";
import { isReady } from "../core/object-model.ts";

const OwnerReference = z.looseObject({
  apiVersion: z.string(),
  kind: z.string(),
  name: z.string(),
  uid: z.string(),
  controller: z.boolean().optional(),
});

const MemberEnvelope = z.looseObject({
  metadata: ObjectMeta.extend({ ownerReferences: z.array(OwnerReference).optional() }),
  spec: z.record(z.string(), z.unknown()).optional(),
  status: z.record(z.string(), z.unknown()).optional(),
});

const MemberStatus = z.looseObject({
  observedGeneration: z.number().optional(),
  conditions: z
    .array(
      z.looseObject({
        type: z.string(),
        status: z.string(),
        reason: z.string().optional(),
        message: z.string().optional(),
      }),
    )
    .optional()
    .catch(undefined),
  id: z.string().optional().catch(undefined),
  createPending: z.unknown().optional(),
  operation: z.looseObject({ name: z.string().optional(), state: z.string().optional() }).optional().catch(undefined),
  location: z.string().optional().catch(undefined),
  state: z.string().optional().catch(undefined),
  hourlyPriceUSD: z.number().optional().catch(undefined),
});

/** Who a member belongs to: this pool (its controller reference), nobody (an orphan wearing the label), another. */
export type Belonging = "ours" | "orphan" | "foreign";

/** A GpuVm or GpuDisk of a pool, read tolerantly from the cache (a malformed one is skipped, never fatal). */
export interface Member {
  name: string;
  uid: string;
  resourceVersion: string;
  generation: number;
  creationTimestamp: string | undefined;
  deletionTimestamp: string | undefined;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  ownerReferences: z.infer<typeof OwnerReference>[];
  spec: Record<string, unknown>;
  status: z.infer<typeof MemberStatus>;
}

export function memberOf(raw: unknown): Member | undefined {
  const parsed = MemberEnvelope.safeParse(raw);
  if (!parsed.success) return undefined;
  const { metadata } = parsed.data;
  const status = MemberStatus.safeParse(parsed.data.status ?? {});
  return {
    name: metadata.name,
    uid: metadata.uid ?? "",
    resourceVersion: metadata.resourceVersion ?? "",
    generation: metadata.generation ?? 0,
    creationTimestamp: metadata.creationTimestamp,
    deletionTimestamp: metadata.deletionTimestamp,
    labels: metadata.labels ?? {},
    annotations: metadata.annotations ?? {},
    ownerReferences: metadata.ownerReferences ?? [],
    spec: parsed.data.spec ?? {},
    status: status.success ? status.data : {},
  };
}

export interface PoolIdentity {
  namespace: string;
  name: string;
  uid: string;
}

export function belongingOf(pool: PoolIdentity, member: Member): Belonging {
  const controller = member.ownerReferences.find((reference) => reference.controller === true);
  if (controller === undefined) return member.labels[POOL_LABELS.pool] === pool.name ? "orphan" : "foreign";
  return controller.uid === pool.uid && controller.kind === "GpuVmPool" ? "ours" : "foreign";
}

/** The label selector of a pool's members, as the scale subresource reports it. */
export function selectorOf(poolName: string): string {
  return `${POOL_LABELS.pool}=${poolName}`;
}

/**
 * The pool's controller reference on its members. blockOwnerDeletion stays false: the pool's finalizer already
 * holds it until its members are gone, and setting it would need update on gpuvmpools/finalizers where the API
 * server enforces owner-reference permissions (the RBAC grants the least the operator uses).
 */
export function controllerReference(pool: PoolIdentity) {
  return {
    apiVersion: API_VERSION,
    kind: "GpuVmPool",
    name: pool.name,
    uid: pool.uid,
    controller: true,
    blockOwnerDeletion: false,
  };
}

/** The GpuDisk of a replica for a disk template. */
export function diskName(vmName: string, templateName: string): string {
  return `${vmName}-${templateName}`;
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const entries = Object.entries(value)
      .filter(([, entry]) => entry !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, entry]) => `${JSON.stringify(key)}:${canonical(entry)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function familyOf(type: string): string {
  return type.slice(0, type.lastIndexOf("."));
}

/**
 * The revision of a template: a hash of what only a new VM can take (image, SSH key, scripts, credentials, the
 * type's family, the disk templates). Replicas of another revision are replaced; the rest changes in place.
 */
export function revisionOf(spec: GpuVmPoolSpec): string {
  const template = spec.template.spec;
  const createOnly = {
    ...Object.fromEntries(CREATE_ONLY_FIELDS.map((field) => [field, template[field]])),
    credentialsRef: template.credentialsRef,
    family: familyOf(template.type),
    diskTemplates: spec.diskTemplates ?? [],
  };
  return createHash("sha256").update(canonical(createOnly)).digest("hex").slice(0, 10);
}

/** The references to the disks the pool makes for a replica (one per disk template). */
function poolDiskRefs(spec: GpuVmPoolSpec, vmName: string): VmDiskAttachment[] {
  return (spec.diskTemplates ?? []).map((disk) => ({
    diskRef: { name: diskName(vmName, disk.name) },
    mode: disk.mode,
  }));
}

function currentDisks(member: Member): VmDiskAttachment[] {
  const parsed = z.array(VmDiskAttachment).safeParse(member.spec.disks ?? []);
  return parsed.success ? parsed.data : [];
}

const isPoolDiskOf = (spec: GpuVmPoolSpec, vmName: string) => {
  const names = new Set(poolDiskRefs(spec, vmName).map((ref) => ref.diskRef?.name));
  return (disk: VmDiskAttachment) => disk.diskRef !== undefined && names.has(disk.diskRef.name);
};

/**
 * Whether the replica's GpuVm refers to every disk the pool makes for it. A replica gets them only once its VM
 * holds a place (`holdsPlace`): a VM waiting for capacity has no disks billed for it.
 */
export function hasPoolDisks(spec: GpuVmPoolSpec, member: Member): boolean {
  const have = new Set(currentDisks(member).flatMap((disk) => (disk.diskRef ? [disk.diskRef.name] : [])));
  return poolDiskRefs(spec, member.name).every((ref) => ref.diskRef !== undefined && have.has(ref.diskRef.name));
}

/** The patch that gives a replica's GpuVm the pool's disks it lacks (after the disks it has). */
export function poolDisksPatch(spec: GpuVmPoolSpec, member: Member): { spec: { disks: VmDiskAttachment[] } } {
  const have = currentDisks(member);
  const names = new Set(have.flatMap((disk) => (disk.diskRef ? [disk.diskRef.name] : [])));
  const missing = poolDiskRefs(spec, member.name).filter((ref) => ref.diskRef && !names.has(ref.diskRef.name));
  return { spec: { disks: [...have, ...missing] } };
}

/**
 * The fields of a replica's GpuVm the pool changes in place, as the template says. The pool's own disks are
 * added by `poolDisksPatch` once the VM holds a place, not as a template change: until then the ones it has are
 * what it should have.
 */
function changeableFields(spec: GpuVmPoolSpec, member?: Member) {
  const template = spec.template.spec;
  let own: VmDiskAttachment[] = [];
  if (member !== undefined) {
    own = hasPoolDisks(spec, member)
      ? poolDiskRefs(spec, member.name)
      : currentDisks(member).filter(isPoolDiskOf(spec, member.name));
  }
  const disks = [...(template.disks ?? []), ...own];
  return {
    type: template.type,
    powerState: template.powerState,
    deletionPolicy: template.deletionPolicy,
    // Budgets and the capacity queue order the replicas by it (docs/budgets.md).
    priority: template.priority,
    disks,
  };
}

/** The GpuVm of a slot, as created: without the pool's disks (made once its VM holds a place). */
export function desiredVm(pool: PoolIdentity, spec: GpuVmPoolSpec, slot: PoolSlot) {
  const template = spec.template.spec;
  const { disks, ...changeable } = changeableFields(spec);
  return {
    apiVersion: API_VERSION,
    kind: "GpuVm",
    metadata: {
      name: slot.name,
      namespace: pool.namespace,
      labels: {
        ...spec.template.metadata?.labels,
        [POOL_LABELS.pool]: pool.name,
        [POOL_LABELS.revision]: slot.revision,
      },
      annotations: { ...spec.template.metadata?.annotations },
      ownerReferences: [controllerReference(pool)],
    },
    spec: {
      credentialsRef: template.credentialsRef,
      ...changeable,
      location: slot.location,
      ...(template.image !== undefined ? { image: template.image } : {}),
      ...(template.sshPublicKey !== undefined ? { sshPublicKey: template.sshPublicKey } : {}),
      ...(template.sshPublicKeySecretRef !== undefined
        ? { sshPublicKeySecretRef: template.sshPublicKeySecretRef }
        : {}),
      ...(template.startupScript !== undefined ? { startupScript: template.startupScript } : {}),
      ...(template.startupScriptRef !== undefined ? { startupScriptRef: template.startupScriptRef } : {}),
      ...(template.shutdownScript !== undefined ? { shutdownScript: template.shutdownScript } : {}),
      ...(template.shutdownScriptRef !== undefined ? { shutdownScriptRef: template.shutdownScriptRef } : {}),
      ...(disks.length > 0 ? { disks } : {}),
    },
  };
}

/** The GpuDisks of a slot, as created (one per disk template, in the slot's location). */
export function desiredDisks(pool: PoolIdentity, spec: GpuVmPoolSpec, slot: PoolSlot) {
  const template = spec.template.spec;
  return (spec.diskTemplates ?? []).map((disk) => {
    const diskSpec: Partial<GpuDiskSpec> = {
      credentialsRef: template.credentialsRef,
      deletionPolicy: template.deletionPolicy,
      size: disk.size,
      type: disk.type,
      blockSize: disk.blockSize,
      location: slot.location,
    };
    return {
      apiVersion: API_VERSION,
      kind: "GpuDisk",
      metadata: {
        name: diskName(slot.name, disk.name),
        namespace: pool.namespace,
        labels: {
          [POOL_LABELS.pool]: pool.name,
          [POOL_LABELS.member]: slot.name,
          [POOL_LABELS.revision]: slot.revision,
        },
        ownerReferences: [controllerReference(pool)],
      },
      spec: diskSpec,
    };
  });
}

/** A change the pool applies to an existing replica: a merge patch, and whether it takes the VM down. */
export interface InPlaceChange {
  patch: {
    metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
    spec?: Record<string, unknown>;
  };
  /** type, power state or disks: the VM stops, restarts or re-attaches (it counts against maxUnavailable). */
  disruptive: boolean;
  /** Human-readable, for events: `type a100.1x → a100.2x`. */
  summary: string;
}

function describe(value: unknown): string {
  if (value === undefined) return "none";
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** What the template asks of an existing replica that it does not have yet; undefined when it matches. */
export function inPlaceChangeOf(spec: GpuVmPoolSpec, member: Member): InPlaceChange | undefined {
  const parsed = GpuVmSpec.safeParse(member.spec);
  const wanted = changeableFields(spec, member);
  const specPatch: Record<string, unknown> = {};
  const notes: string[] = [];
  let disruptive = false;
  const current = parsed.success ? parsed.data : undefined;
  for (const field of ["type", "powerState", "disks", "deletionPolicy", "priority"] as const) {
    const have = field === "disks" ? (current?.disks ?? []) : current?.[field];
    if (sameJson(have, wanted[field])) continue;
    // A merge patch removes a field with null (no disks, no priority).
    const removed =
      (field === "disks" && wanted.disks.length === 0) || (field === "priority" && wanted.priority === undefined);
    specPatch[field] = removed ? null : wanted[field];
    notes.push(`${field} ${describe(have)} → ${describe(wanted[field])}`);
    // Its deletion policy and priority change nothing of the VM.
    if (field !== "deletionPolicy" && field !== "priority") disruptive = true;
  }
  const metadata: { labels?: Record<string, string>; annotations?: Record<string, string> } = {};
  for (const [part, entries] of [
    ["labels", spec.template.metadata?.labels ?? {}],
    ["annotations", spec.template.metadata?.annotations ?? {}],
  ] as const) {
    const have = part === "labels" ? member.labels : member.annotations;
    const missing = Object.fromEntries(Object.entries(entries).filter(([key, value]) => have[key] !== value));
    if (Object.keys(missing).length > 0) {
      metadata[part] = missing;
      notes.push(`${part} ${Object.keys(missing).join(", ")}`);
    }
  }
  if (notes.length === 0) return undefined;
  return {
    patch: {
      ...(Object.keys(metadata).length > 0 ? { metadata } : {}),
      ...(Object.keys(specPatch).length > 0 ? { spec: specPatch } : {}),
    },
    disruptive,
    summary: notes.join(", "),
  };
}

function condition(member: Member, type: string) {
  return member.status.conditions?.find((entry) => entry.type === type);
}

/** Ready for its current generation (a spec change not yet picked up by the GpuVm controller is not Ready). */
export function isMemberReady(member: Member): boolean {
  return (
    member.deletionTimestamp === undefined &&
    isReady(member.status) &&
    member.status.observedGeneration === member.generation
  );
}

/**
 * The replica's VM holds its place in the cloud: it was created there (an id, no create pending or in progress).
 * Its disks are made only then.
 */
export function holdsPlace(member: Member): boolean {
  const operation = member.status.operation;
  return (
    member.deletionTimestamp === undefined &&
    member.status.id !== undefined &&
    member.status.createPending === undefined &&
    !(operation?.name === "CREATE" && operation.state === "IN_PROGRESS")
  );
}

/**
 * Ready for the pool: its GpuVm is Ready and, for a replica of the current template (`spec` given), refers to the
 * pool's disks (a replica of an older template has the disks of its own, which `spec` does not describe).
 */
export function isReplicaReady(spec: GpuVmPoolSpec | undefined, member: Member): boolean {
  return isMemberReady(member) && (spec === undefined || hasPoolDisks(spec, member));
}

/**
 * The replica could not be created for lack of capacity and holds nothing in the cloud: no id, no create in
 * flight. The location it was placed in is out of stock (the availability endpoint or an out_of_stock failure).
 */
export function hasCapacityFailure(member: Member): boolean {
  const ready = condition(member, "Ready");
  return (
    member.deletionTimestamp === undefined &&
    ready?.reason === "CapacityUnavailable" &&
    condition(member, "Stalled")?.status === "True" &&
    member.status.id === undefined &&
    member.status.createPending === undefined &&
    member.status.operation?.state !== "IN_PROGRESS"
  );
}

/** Stalls that wait for something that frees by itself (capacity, room in a budget): no failure of the replica. */
const WAITING_REASONS: ReadonlySet<string> = new Set(["CapacityUnavailable", "BudgetExceeded"]);

/** A stall other than a wait (an invalid image, refused credentials): the replica needs a person. */
export function replicaFailureOf(member: Member): { reason: string; message: string } | undefined {
  const stalled = condition(member, "Stalled");
  if (stalled?.status !== "True" || isMemberReady(member) || WAITING_REASONS.has(stalled.reason ?? ""))
    return undefined;
  return { reason: stalled.reason ?? "Stalled", message: stalled.message ?? "" };
}

/**
 * The budget's message when the replica's GpuVm waits for room in a GpuBudget (its create, or a START): it
 * proceeds by itself when the budget frees.
 */
export function budgetWaitOf(member: Member): string | undefined {
  const ready = condition(member, "Ready");
  if (member.deletionTimestamp !== undefined || ready?.reason !== "BudgetExceeded") return undefined;
  return ready.message ?? "";
}

export function deleteFirst(member: Member | undefined): boolean {
  return member?.annotations[ANNOTATIONS.deleteFirst] === "true";
}

/** The location a member runs or was placed in. */
export function memberLocation(member: Member): string {
  const location = member.spec.location;
  return typeof location === "string" ? location : (member.status.location ?? "");
}
