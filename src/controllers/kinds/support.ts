// Pieces every kind file shares: looking a resource up in its family snapshot (a direct GET only to confirm an id
// that a fresh list no longer shows), and resolving what a kind refers to (other objects, by their claimed ids).

import { REASONS, type Reason } from "../../api/common.ts";
import { isCloudError, isUnsupported } from "../../cloud/errors.ts";
import type { OperationFamily } from "../../cloud/wire.ts";
import type { Account } from "../accounts/account.ts";
import type { CloudAccount } from "../accounts/cloud-account.ts";
import type { SnapshotView } from "../accounts/snapshots.ts";
import { isReady, type ManagedObject } from "../core/object-model.ts";
import type { Blocked, KindDeps, ObserveOptions, Resolution } from "../managed/external.ts";

/** The id to observe: status first (what we created or adopted), then spec.id (import). */
export function knownId(mr: ManagedObject): string | undefined {
  return mr.status.id ?? mr.spec.id;
}

/**
 * Find an object's resource in the family snapshot. By id when known (a fresh view of that one resource when
 * `notBefore` asks for it, see FamilySnapshot.readOne); an id missing from the snapshot is confirmed with one
 * GET before it counts as gone (404 → gone; an endpoint this server lacks → trust the list), unless `trustList`
 * says a fresh list is enough (following an operation that cannot be read: one request per turn). A server
 * without the family's list (the network list is beyond the spec) is read by id alone.
 * Without an id, by exact cloud name only: nothing else is ever adopted; a name the view does not hold (a shard's
 * replica holds its own objects' resources) is read by its id.
 */
export async function findResource<T>(
  snapshot: {
    read(notBefore?: number): Promise<SnapshotView<T>>;
    readOne(id: string, notBefore?: number, urgent?: boolean): Promise<T | undefined>;
    remember(item: T): void;
  },
  mr: ManagedObject,
  options: ObserveOptions,
  get: (id: string) => Promise<T>,
): Promise<T | undefined> {
  const id = knownId(mr);
  const { cloudName, trustList } = options;
  let hit: T | undefined;
  try {
    if (id === undefined) {
      const view = await snapshot.read(options.notBefore);
      const named = view.byName.get(cloudName);
      // A resource of that name the view does not hold (another shard's object holds it): read, never taken as free.
      const other = named === undefined ? view.othersByName?.get(cloudName) : undefined;
      if (other === undefined) return named;
      const item = await getIfPresent(other, get);
      if (item !== undefined) snapshot.remember(item);
      return item;
    }
    hit = await snapshot.readOne(id, options.notBefore, options.urgent === true);
  } catch (error) {
    if (!isUnsupported(error)) throw error;
    // No list on this server: only a known id can be read; a name cannot be looked up.
    return id === undefined ? undefined : getIfPresent(id, get);
  }
  if (hit !== undefined || trustList === true) return hit;
  const item = await getIfPresent(id, get);
  if (item !== undefined) snapshot.remember(item);
  return item;
}

/**
 * `reread` of a kind whose observation reads one item of one family snapshot, by the id in status or spec (see
 * ExternalClient.reread): the item as a view no older than the sync period holds it.
 */
export async function rereadById<T extends object>(
  snapshot: { readOne(id: string): Promise<T | undefined> },
  mr: ManagedObject,
): Promise<(T | undefined)[]> {
  const id = knownId(mr);
  return id === undefined ? [] : [await snapshot.readOne(id)];
}

async function getIfPresent<T>(id: string, get: (id: string) => Promise<T>): Promise<T | undefined> {
  try {
    return await get(id);
  } catch (error) {
    if (isCloudError(error) && (error.status === 404 || error.kind === "unsupported")) return undefined;
    throw error;
  }
}

/** A resource by exact name in a fresh family snapshot; a server without the family's list finds nothing. */
export async function itemByName<T>(
  snapshot: { read(notBefore?: number): Promise<SnapshotView<T>> },
  cloudName: string,
): Promise<T | undefined> {
  try {
    return (await snapshot.read(Date.now())).byName.get(cloudName);
  } catch (error) {
    if (isUnsupported(error)) return undefined;
    throw error;
  }
}

/**
 * When the cloud created a resource whose answers carry no created_at (networks, firewall rules): the start of
 * its CREATE operation. Undefined when the operation list does not show it (old, or a server without the
 * endpoint): then nothing proves who created the resource, and it is not adopted by name.
 */
export async function createdAtFromOperations(
  account: CloudAccount,
  family: OperationFamily,
  id: string,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const creates = await account.findOperations(family, id, "CREATE", undefined, signal);
  return creates.at(-1)?.started_at || undefined;
}

/** An input that will be there by itself (a referenced object becoming Ready), as `resolve` answers it. */
export type Waiting = Extract<Resolution<never>, { type: "waiting" }>;

/**
 * Something only the user can fix (a reference to an object that does not exist or is being deleted): the object
 * stalls with the fix in the message, and is looked at again when the target changes (the dependency index).
 */
export const blocked = (reason: Reason, message: string): Blocked => ({ type: "blocked", reason, message });

/** The object of `kind` in `namespace` that manages the cloud resource `id`, if any. */
export function managedByCloudId(
  deps: KindDeps,
  kind: string,
  namespace: string,
  account: Account,
  id: string,
): ManagedObject | undefined {
  if (deps.managedById !== undefined) return deps.managedById(kind, namespace, account, id);
  return deps.listManaged(kind, namespace).find((object) => object.status.id === id);
}

/** A referenced object that does not exist: create it, or fix the reference. */
export function referenceNotFound(what: string, field: string): Blocked {
  return blocked(
    REASONS.ReferenceNotFound,
    `${what} does not exist: create it or correct ${field}; this object proceeds by itself once it exists`,
  );
}

/**
 * A referenced object this replica does not hold: another shard's, being read in (waiting: its arrival wakes the
 * referrer), or one that does not exist (for the user to fix).
 */
export function missingTarget(
  deps: KindDeps,
  kind: string,
  namespace: string,
  name: string,
  field: string,
): Waiting | Blocked {
  const what = `${kind} ${namespace}/${name}`;
  if (deps.fetching?.(kind, namespace, name) === true) {
    return { type: "waiting", message: `${what} is being read (another shard reconciles it)` };
  }
  return referenceNotFound(what, field);
}

/**
 * Resolve a `Kind/name` reference (in `field`) to a Ready object with an id. Not there, or being deleted, is for
 * the user to fix (Blocked); not Ready yet resolves itself (waiting, with the target's own reason).
 */
export function readyTarget(
  deps: KindDeps,
  kind: string,
  namespace: string,
  name: string,
  field: string,
): { id: string } | Waiting | Blocked {
  const target = deps.managed(kind, namespace, name);
  const what = `${kind} ${namespace}/${name}`;
  if (target === undefined) return missingTarget(deps, kind, namespace, name, field);
  if (target.metadata.deletionTimestamp !== undefined) {
    return blocked(
      REASONS.ReferenceDeleting,
      `${what} is being deleted: remove it from ${field} (or delete this object too)`,
    );
  }
  if (target.status.id === undefined || !isReady(target.status)) {
    const reason = target.status.conditions?.find((c) => c.type === "Ready")?.reason;
    return { type: "waiting", message: `${what} is not Ready yet${reason === undefined ? "" : ` (${reason})`}` };
  }
  return { id: target.status.id };
}
