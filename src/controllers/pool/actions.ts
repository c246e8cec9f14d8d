// The writes a GpuVmPool makes to its members, after the pass's decisions are recorded in its status: adopt
// orphans, create the GpuVm of a slot, make its GpuDisks once its VM holds a place (and refer to them), delete a
// replica (its disks as persistentDiskPolicy says), change one in place, and let members go (deletionPolicy
// Orphan, retained disks). Every write is idempotent:
// a create that finds the name taken, a delete that finds it gone, a patch that lost a race are all fine: the
// next pass looks again.

import type { Logger } from "pino";
import { POOL_LABELS, REASONS } from "../../api/common.ts";
import type { GpuVmPoolSpec, PoolSlot } from "../../api/gpu-vm-pool.ts";
import { isRecord } from "../../util/is-record.ts";
import type { KubeAccess } from "../core/kube-access.ts";
import type { ManagedObject } from "../core/object-model.ts";
import type { Expectations } from "./expectations.ts";
import {
  belongingOf,
  controllerReference,
  desiredDisks,
  desiredVm,
  hasPoolDisks,
  holdsPlace,
  type InPlaceChange,
  type Member,
  memberOf,
  type PoolIdentity,
  poolDisksPatch,
} from "./members.ts";
import type { PoolPlan } from "./rollout.ts";

export type MemberKind = "GpuVm" | "GpuDisk";

/** Kubernetes access for a pool's members (adapted onto the runtime in controller.ts; fakes in tests). */
export interface MemberAccess {
  /** Every object of the kind in the namespace, from the informer cache, unparsed. */
  list(kind: MemberKind, namespace: string): unknown[];
  create(kind: MemberKind, namespace: string, body: { metadata: { name: string } }): Promise<"created" | "exists">;
  /** Delete if it still has `uid` (when given). */
  delete(kind: MemberKind, namespace: string, name: string, uid?: string): Promise<"deleted" | "gone" | "conflict">;
  /** Merge patch (a `metadata.resourceVersion` in it makes it conditional); the new generation when written. */
  patch(
    kind: MemberKind,
    namespace: string,
    name: string,
    patch: Record<string, unknown>,
  ): Promise<{ type: "written"; generation: number } | { type: "conflict" } | { type: "gone" }>;
}

/** A cheap look at an unparsed object: the pool's label, or an owner reference with the pool's uid. */
function mayBelongTo(pool: PoolIdentity, raw: unknown): boolean {
  const metadata = isRecord(raw) && isRecord(raw.metadata) ? raw.metadata : undefined;
  if (metadata === undefined) return false;
  if (isRecord(metadata.labels) && metadata.labels[POOL_LABELS.pool] === pool.name) return true;
  const references = Array.isArray(metadata.ownerReferences) ? metadata.ownerReferences : [];
  return references.some((reference) => isRecord(reference) && reference.uid === pool.uid);
}

/** The members of one kind that are this pool's, and the orphans wearing its label (a foreign one is skipped). */
export function readMembers(access: MemberAccess, kind: MemberKind, pool: PoolIdentity) {
  const ours: Member[] = [];
  const orphans: Member[] = [];
  for (const raw of access.list(kind, pool.namespace)) {
    // Only the pool's are parsed: a namespace may hold thousands of other GpuVms, and a pool passes often.
    if (!mayBelongTo(pool, raw)) continue;
    const member = memberOf(raw);
    if (member === undefined) continue;
    const belonging = belongingOf(pool, member);
    if (belonging === "ours") ours.push(member);
    else if (belonging === "orphan" && member.deletionTimestamp === undefined) orphans.push(member);
  }
  return { ours, orphans, all: [...ours, ...orphans] };
}

/** A pool's GpuDisks by the replica (GpuVm) they belong to. */
export function disksByReplica(disks: readonly Member[]): Map<string, Member[]> {
  const byVm = new Map<string, Member[]>();
  for (const disk of disks) {
    const vm = disk.labels[POOL_LABELS.member];
    if (vm !== undefined) byVm.set(vm, [...(byVm.get(vm) ?? []), disk]);
  }
  return byVm;
}

/** What the writes of one pass need. */
export interface ActionContext {
  members: MemberAccess;
  event: KubeAccess["event"];
  mr: ManagedObject;
  pool: PoolIdentity;
  spec: GpuVmPoolSpec;
  key: string;
  expectations: Expectations;
  logger: Logger;
}

function withoutOurReference(pool: PoolIdentity, member: Member) {
  return member.ownerReferences.filter((reference) => reference.uid !== pool.uid);
}

/** Take over GpuVms and GpuDisks that wear the pool's label and have no controller. */
export async function adopt(context: ActionContext, kind: MemberKind, orphans: readonly Member[]): Promise<void> {
  for (const orphan of orphans) {
    const patch = {
      metadata: {
        resourceVersion: orphan.resourceVersion,
        ownerReferences: [...orphan.ownerReferences, controllerReference(context.pool)],
      },
    };
    const written = await context.members.patch(kind, context.pool.namespace, orphan.name, patch);
    if (written.type === "written") {
      context.event(context.mr, "Normal", "Adopted", `adopted ${kind} ${orphan.name}`);
    }
  }
}

/** Create the GpuVm of a slot (its disks come once its VM holds a place: `givePoolDisks`). */
export async function createSlot(context: ActionContext, slot: PoolSlot, note: string): Promise<void> {
  const { members, pool } = context;
  const created = await members.create("GpuVm", pool.namespace, desiredVm(pool, context.spec, slot));
  context.expectations.created(context.key, slot.name);
  if (created === "created") {
    context.logger.info({ replica: slot.name, location: slot.location }, "replica created");
    context.event(context.mr, "Normal", "Scaling", note);
  }
}

/**
 * A replica whose VM holds its place gets the GpuDisks of the disk templates (in its location) and its GpuVm
 * refers to them (a patch guarded by its resourceVersion): the GpuVm controller attaches them once Ready.
 */
export async function givePoolDisks(
  context: ActionContext,
  slot: PoolSlot,
  vm: Member,
  existingDisks: ReadonlySet<string>,
): Promise<void> {
  const { members, pool } = context;
  for (const disk of desiredDisks(pool, context.spec, slot)) {
    if (!existingDisks.has(disk.metadata.name)) await members.create("GpuDisk", pool.namespace, disk);
  }
  const patch = { ...poolDisksPatch(context.spec, vm), metadata: { resourceVersion: vm.resourceVersion } };
  const written = await members.patch("GpuVm", pool.namespace, vm.name, patch);
  if (written.type !== "written") return;
  if (written.generation > vm.generation) context.expectations.changed(context.key, vm.name, written.generation);
  context.logger.info({ replica: vm.name }, "replica holds its place; its disks are made");
}

/** Delete a replica's GpuVm (only the one we saw) and handle its disks. */
export async function removeReplica(
  context: ActionContext,
  vm: Member | undefined,
  disks: readonly Member[],
  reason: string,
  note: string,
): Promise<void> {
  const { members, pool } = context;
  if (vm !== undefined && vm.deletionTimestamp === undefined) {
    const result = await members.delete("GpuVm", pool.namespace, vm.name, vm.uid);
    if (result === "deleted") context.expectations.deleted(context.key, vm.name, vm.uid);
    context.logger.info({ replica: vm.name, result }, "replica removed");
    context.event(context.mr, reason === "CapacityUnavailable" ? "Warning" : "Normal", reason, note);
  }
  await letDisksGo(context, disks);
}

/** A replica's disks when the replica goes: deleted, or (Retain) released without owner and pool label. */
export async function letDisksGo(context: ActionContext, disks: readonly Member[]): Promise<void> {
  const { members, pool } = context;
  for (const disk of disks) {
    if (disk.deletionTimestamp !== undefined) continue;
    if (context.spec.persistentDiskPolicy === "Delete") {
      await members.delete("GpuDisk", pool.namespace, disk.name, disk.uid);
      continue;
    }
    const patch = {
      metadata: {
        resourceVersion: disk.resourceVersion,
        ownerReferences: withoutOurReference(pool, disk),
        labels: { [POOL_LABELS.pool]: null },
      },
    };
    const written = await members.patch("GpuDisk", pool.namespace, disk.name, patch);
    if (written.type === "written") {
      context.event(context.mr, "Normal", "Scaling", `kept GpuDisk ${disk.name} (persistentDiskPolicy Retain)`);
    }
  }
}

/** Apply a template change to a replica in place. */
export async function changeReplica(context: ActionContext, vm: Member, change: InPlaceChange): Promise<void> {
  const patch = {
    ...change.patch,
    metadata: { ...change.patch.metadata, resourceVersion: vm.resourceVersion },
  };
  const written = await context.members.patch("GpuVm", context.pool.namespace, vm.name, patch);
  if (written.type !== "written") return;
  if (written.generation > vm.generation) context.expectations.changed(context.key, vm.name, written.generation);
  context.event(context.mr, "Normal", "RollingUpdate", `changing ${vm.name} in place: ${change.summary}`);
}

/** deletionPolicy Orphan: remove the pool's owner reference from each member; false when one lost a race. */
export async function orphanMembers(context: ActionContext, kind: MemberKind, owned: readonly Member[]) {
  let complete = true;
  for (const member of owned) {
    const patch = {
      metadata: { resourceVersion: member.resourceVersion, ownerReferences: withoutOurReference(context.pool, member) },
    };
    const written = await context.members.patch(kind, context.pool.namespace, member.name, patch);
    if (written.type === "conflict") complete = false;
  }
  return complete;
}

/** The reason and note of a replica's removal, for its Event. */
function removalNote(entry: PoolPlan["remove"][number], slot: PoolSlot | undefined, revision: string) {
  const name = entry.name;
  switch (entry.why) {
    case "capacity":
      return {
        reason: REASONS.CapacityUnavailable,
        text: `moving replica ${name}: no capacity in ${slot?.location ?? "its location"}`,
      };
    case "replace":
      return {
        reason: REASONS.RollingUpdate,
        text: `replacing replica ${name} (revision ${slot?.revision ?? "?"} → ${revision})`,
      };
    case "scale-down":
      return { reason: REASONS.Scaling, text: `removing replica ${name} (scale-down)` };
  }
}

/** What a pass decided and recorded, for its writes. */
export interface Decided {
  vms: ReturnType<typeof readMembers>;
  disks: ReturnType<typeof readMembers>;
  live: ReadonlyMap<string, Member>;
  gone: ReadonlySet<string>;
  slots: readonly PoolSlot[];
  finalSlots: readonly PoolSlot[];
  added: readonly PoolSlot[];
  plan: PoolPlan;
  revision: string;
}

/** The writes a recorded pass decided: adopt, remove, create, give disks, change, let stray disks go. */
export async function applyDecisions(context: ActionContext, decided: Decided): Promise<void> {
  const { spec } = context;
  const { vms, disks, live, gone, slots, finalSlots, added, plan, revision } = decided;
  const removed = new Set(plan.remove.map((entry) => entry.name));
  await adopt(context, "GpuVm", vms.orphans);
  await adopt(context, "GpuDisk", disks.orphans);
  const disksOf = disksByReplica(disks.all);
  for (const entry of plan.remove) {
    const slot = slots.find((candidate) => candidate.name === entry.name);
    const note = removalNote(entry, slot, revision);
    await removeReplica(context, live.get(entry.name), disksOf.get(entry.name) ?? [], note.reason, note.text);
  }
  const addedNames = new Set(added.map((slot) => slot.name));
  const existingDisks = new Set(disks.all.map((disk) => disk.name));
  const completed = new Set<string>();
  for (const slot of finalSlots) {
    const vm = live.get(slot.name);
    if (vm !== undefined) {
      // Its VM holds a place now: its disks are made (never before: a VM waiting for capacity bills none).
      // Only for the current template: an older replica has its own and is replaced, not completed.
      if (slot.revision === revision && holdsPlace(vm) && !hasPoolDisks(spec, vm)) {
        await givePoolDisks(context, slot, vm, existingDisks);
        completed.add(vm.name);
      }
      continue;
    }
    if (gone.has(slot.name)) continue;
    const why = addedNames.has(slot.name)
      ? `created replica ${slot.name} in ${slot.location}`
      : `created replica ${slot.name} in ${slot.location} (recorded before, not created yet)`;
    await createSlot(context, slot, why);
  }
  for (const { name, change } of plan.change) {
    const vm = live.get(name);
    // A replica just given its disks is changed at the next pass (its resourceVersion moved on).
    if (vm !== undefined && !completed.has(name)) await changeReplica(context, vm, change);
  }
  // Disks of no replica (left by a crash between a removal's record and its deletion).
  const finalNames = new Set(finalSlots.map((slot) => slot.name));
  const strayDisks = disks.ours.filter((disk) => {
    const vm = disk.labels[POOL_LABELS.member];
    return vm === undefined || (!finalNames.has(vm) && !removed.has(vm) && !live.has(vm));
  });
  await letDisksGo(context, strayDisks);
}
