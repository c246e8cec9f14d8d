// What a shard's replica holds of the kinds it shards (ADR 0032): in full, the objects it reconciles (its shard's
// keys), the members of the GpuVmPools it reconciles, the objects its own objects refer to (read in when a pass
// asks for one), and every GpuVm with data disks (a GpuDisk names and waits for the VMs attached to it, found by
// their cloud ids, whichever shard they are in); of every other object, a note: its uid and whether its spec is
// ahead of its status. The notes keep what other replicas' objects mean to this one (a claim whose holder exists,
// objects without an owner; the credentials-in-use index reads the note events' objects) at a few dozen bytes each
// instead of a whole cached object; its VM snapshots hold the VMs of its own objects (shardHoldsVm). Without
// sharding nothing of this applies.
import type { KubernetesObject } from "@kubernetes/client-node";
import { POOL_LABELS } from "../../api/common.ts";
import type { KindInfo } from "../../api/kind-info.ts";
import { keyOf, type Manager, type ObjectInformer, ownsKey, type Shard } from "../../runtime/index.ts";
import { isRecord } from "../../util/is-record.ts";
import type { Account } from "../accounts/account.ts";
import { resourceOf } from "../core/kube-access.ts";
import type { ClaimStore } from "./claims.ts";

/**
 * What a replica keeps of a managed object another replica reconciles. The credentials it uses are not in it: the
 * credentials-in-use index reads every version of every object as it comes (secret-usage.ts) and keeps its own.
 */
export interface ManagedNote {
  uid?: string;
  /** Its spec changed since its status was written while Synced said True (see without-owner.ts). */
  ahead?: true;
}

/** The note of a managed object, read from the raw object (no schema parse: an invalid spec is still noted). */
export function noteOf(object: KubernetesObject): ManagedNote {
  const metadata = object.metadata;
  const status = isRecord((object as { status?: unknown }).status)
    ? ((object as { status: Record<string, unknown> }).status as Record<string, unknown>)
    : undefined;
  const note: ManagedNote = {};
  if (metadata?.uid !== undefined) note.uid = metadata.uid;
  const conditions = Array.isArray(status?.conditions) ? status.conditions : [];
  const synced = conditions.some((c) => isRecord(c) && c.type === "Synced" && c.status === "True");
  if (synced && status?.observedGeneration !== metadata?.generation) note.ahead = true;
  return note;
}

/** A GpuVm that has or asks for data disks (in its spec or its status). */
function hasDisks(object: KubernetesObject): boolean {
  const { spec, status } = object as { spec?: unknown; status?: unknown };
  const listed = (part: unknown, field: string): boolean =>
    isRecord(part) && Array.isArray(part[field]) && (part[field] as unknown[]).length > 0;
  return listed(spec, "disks") || listed(status, "attachedDisks");
}

export interface ShardViews {
  /**
   * An object of a sharded kind this replica does not hold, though it exists (another shard's): it is read in and
   * held from now on (one of ours refers to it), and true is answered meanwhile; false when no such object is
   * known (or the kind is not sharded).
   */
  fetching(kind: string, namespace: string, name: string): boolean;
}

/**
 * Sets the view of each kind in `kinds` on the manager (before any informer of them is made): a replica of shard
 * `shard` holds what it reconciles, the members of its pools and what its objects referred to, and notes the rest.
 */
export function installShardViews(manager: Manager, kinds: readonly KindInfo[], shard: Shard): ShardViews {
  /** Per kind, the `namespace/name` keys held because an object of ours referred to them. */
  const retained = new Map<string, Set<string>>(kinds.map((info) => [info.kind, new Set<string>()]));
  const informers = new Map<string, ObjectInformer>();
  for (const info of kinds) {
    const held = retained.get(info.kind) ?? new Set<string>();
    manager.setView(resourceOf(info), {
      keep: (object) => {
        const namespace = object.metadata?.namespace ?? "";
        const key = keyOf(namespace, object.metadata?.name ?? "");
        if (ownsKey(shard, key) || held.has(key) || (info.kind === "GpuVm" && hasDisks(object))) return true;
        // A pool's members are the pool's to count and replace: held where the pool is reconciled.
        const pool = object.metadata?.labels?.[POOL_LABELS.pool];
        return pool !== undefined && ownsKey(shard, keyOf(namespace, pool));
      },
      note: (object) => noteOf(object),
    });
  }
  return {
    fetching(kind, namespace, name) {
      const held = retained.get(kind);
      if (held === undefined) return false;
      let informer = informers.get(kind);
      if (informer === undefined) {
        const info = kinds.find((candidate) => candidate.kind === kind);
        if (info === undefined) return false;
        informer = manager.informerFor(resourceOf(info));
        informers.set(kind, informer);
      }
      if (!informer.knows(namespace, name)) return false;
      const key = keyOf(namespace, name);
      if (informer.get(namespace, name) !== undefined) return false;
      if (!held.has(key)) {
        held.add(key);
        informer.recheck(namespace, name).catch((error: unknown) => {
          held.delete(key);
          manager.logger.warn({ err: error, kind, key }, "could not read an object another shard reconciles");
        });
      }
      return true;
    },
  };
}

/**
 * Whether a shard's replica holds a VM of an account in its VM snapshot: when the object holding it is one of its
 * own, or nobody claims it yet (it may be one of ours being created, or adopted by name). The others' VMs are known
 * by name only (FamilySnapshot.holds).
 */
export function shardHoldsVm(claims: ClaimStore, shard: Shard): (account: Account, id: string) => boolean {
  return (account, id) => {
    const holder = claims.ofId("GpuVm", account, id)?.holder;
    return holder === undefined || ownsKey(shard, keyOf(holder.namespace, holder.name));
  };
}
