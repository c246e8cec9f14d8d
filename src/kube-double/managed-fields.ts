// Field ownership for server-side apply, tracked at leaf granularity (maps are walked, lists are atomic).
// Stored in `metadata.managedFields` as FieldsV1 (`{"f:spec": {".": {}, "f:size": {}}}`): a map a manager
// brought into being is owned too, as `"."` under it, like the real server's field sets.
import { ApiError } from "./status.ts";
import {
  deepClone,
  deepEqual,
  type FieldShape,
  isRecord,
  type JsonObject,
  type KubeObject,
  type ManagedFieldsEntry,
} from "./types.ts";

export type FieldPath = string[];

/** The last key of a path that stands for the map at the path before it. */
const MAP_ITSELF = ".";
const NO_SHAPE: FieldShape = { atomic: [], alwaysPresent: [] };

const OWNED_METADATA = new Set(["labels", "annotations", "finalizers", "ownerReferences"]);

const samePath = (a: FieldPath, b: FieldPath): boolean => a.length === b.length && a.every((key, i) => key === b[i]);

interface Walk {
  shape: FieldShape;
  /** Whether maps count as fields of their own (update operations) or only their leaves (apply). */
  maps: boolean;
}

function collectLeaves(value: unknown, prefix: FieldPath, out: FieldPath[], walk: Walk): void {
  const { shape } = walk;
  if (isRecord(value) && Object.keys(value).length > 0 && !shape.atomic.some((path) => samePath(path, prefix))) {
    if (walk.maps && !shape.alwaysPresent.some((path) => samePath(path, prefix))) out.push([...prefix, MAP_ITSELF]);
    for (const [key, child] of Object.entries(value)) {
      if (child !== undefined) collectLeaves(child, [...prefix, key], out, walk);
    }
  } else {
    out.push(prefix);
  }
}

function metadataLeaves(metadata: unknown, out: FieldPath[], maps: boolean): void {
  if (!isRecord(metadata)) return;
  for (const [key, value] of Object.entries(metadata)) {
    if (!OWNED_METADATA.has(key) || value === undefined) continue;
    if (key === "labels" || key === "annotations")
      collectLeaves(value, ["metadata", key], out, { shape: NO_SHAPE, maps });
    else out.push(["metadata", key]);
  }
}

function inScope(key: string, scope: "main" | "status" | "all"): boolean {
  if (key === "apiVersion" || key === "kind") return false;
  if (scope === "main") return key !== "status";
  if (scope === "status") return key === "status";
  return true;
}

/**
 * The owned fields of an object: everything but apiVersion/kind and metadata other than labels & co. Leaves,
 * and with `maps` (update operations, as the real server records them) every map below the top as well.
 */
export function ownedLeaves(
  object: KubeObject,
  scope: "main" | "status" | "all",
  shape: FieldShape = NO_SHAPE,
  maps = false,
): FieldPath[] {
  const leaves: FieldPath[] = [];
  for (const [key, value] of Object.entries(object)) {
    if (value === undefined || !inScope(key, scope)) continue;
    if (key === "metadata") metadataLeaves(value, leaves, maps);
    else collectLeaves(value, [key], leaves, { shape, maps });
  }
  return leaves;
}

/** The value at a path; for a path ending in "." whether the map exists ("map") or not (undefined). */
export function valueAt(object: unknown, path: FieldPath): unknown {
  if (path.at(-1) === MAP_ITSELF) return isRecord(valueAt(object, path.slice(0, -1))) ? "map" : undefined;
  let current = object;
  for (const key of path) current = isRecord(current) ? current[key] : undefined;
  return current;
}

function deleteAt(object: unknown, path: FieldPath): void {
  const parents: JsonObject[] = [];
  let current = object;
  for (const key of path.slice(0, -1)) {
    if (!isRecord(current)) return;
    parents.push(current);
    current = current[key];
  }
  const last = path.at(-1);
  if (!isRecord(current) || last === undefined) return;
  delete current[last];
  // Drop maps the removal left empty, as apply does.
  for (let depth = parents.length - 1; depth >= 0; depth--) {
    const parent = parents[depth];
    const key = path[depth];
    if (parent === undefined || key === undefined) break;
    const child = parent[key];
    if (isRecord(child) && Object.keys(child).length === 0) delete parent[key];
    else break;
  }
}

const keyOf = (path: FieldPath): string => JSON.stringify(path);

function overlaps(a: FieldPath, b: FieldPath): boolean {
  const length = Math.min(a.length, b.length);
  for (let index = 0; index < length; index++) if (a[index] !== b[index]) return false;
  return true;
}

export function encodeFields(paths: FieldPath[]): JsonObject {
  const root: JsonObject = {};
  for (const path of paths) {
    let node = root;
    for (const key of path) {
      const field = key === MAP_ITSELF ? MAP_ITSELF : `f:${key}`;
      const child = node[field];
      const next: JsonObject = isRecord(child) ? child : {};
      node[field] = next;
      node = next;
    }
  }
  return root;
}

export function decodeFields(fields: unknown, prefix: FieldPath = []): FieldPath[] {
  if (!isRecord(fields)) return [];
  const children = Object.entries(fields).filter(([key]) => key.startsWith("f:"));
  const itself = MAP_ITSELF in fields ? [[...prefix, MAP_ITSELF]] : [];
  if (children.length === 0 && itself.length === 0) return prefix.length === 0 ? [] : [prefix];
  return [...itself, ...children.flatMap(([key, child]) => decodeFields(child, [...prefix, key.slice(2)]))];
}

interface Ownership {
  entry: ManagedFieldsEntry;
  paths: FieldPath[];
}

function readOwnership(object: KubeObject | undefined): Ownership[] {
  const entries = object?.metadata.managedFields;
  if (!Array.isArray(entries)) return [];
  return entries.filter(isRecord).map((entry) => ({
    entry: entry as unknown as ManagedFieldsEntry,
    paths: decodeFields((entry as unknown as ManagedFieldsEntry).fieldsV1),
  }));
}

function writeOwnership(object: KubeObject, owners: Ownership[]): void {
  const entries = owners
    .filter((owner) => owner.paths.length > 0)
    .map((owner) => ({ ...owner.entry, fieldsV1: encodeFields(owner.paths) }));
  if (entries.length > 0) object.metadata.managedFields = entries;
  else delete object.metadata.managedFields;
}

interface OwnerIdentity {
  manager: string;
  apiVersion: string;
  subresource: string | undefined;
}

function sameOwner(entry: ManagedFieldsEntry, who: OwnerIdentity, operation: "Apply" | "Update"): boolean {
  return entry.manager === who.manager && entry.operation === operation && entry.subresource === who.subresource;
}

function newEntry(who: OwnerIdentity, operation: "Apply" | "Update"): ManagedFieldsEntry {
  return {
    manager: who.manager,
    operation,
    apiVersion: who.apiVersion,
    time: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
    fieldsType: "FieldsV1",
    fieldsV1: {},
    ...(who.subresource === undefined ? {} : { subresource: who.subresource }),
  };
}

/** An ordinary write: the manager takes over every leaf it changed. */
export function recordUpdate(
  previous: KubeObject | undefined,
  next: KubeObject,
  who: OwnerIdentity,
  shape: FieldShape = NO_SHAPE,
): void {
  const owners = readOwnership(previous);
  const scope = who.subresource === "status" ? "status" : "all";
  const before = new Map(
    (previous ? ownedLeaves(previous, scope, shape, true) : []).map((path) => [keyOf(path), path]),
  );
  const changed: FieldPath[] = [];
  for (const path of ownedLeaves(next, scope, shape, true)) {
    if (!deepEqual(valueAt(previous, path), valueAt(next, path))) changed.push(path);
    before.delete(keyOf(path));
  }
  const removed = [...before.values()];
  if (changed.length === 0 && removed.length === 0) {
    writeOwnership(next, owners);
    return;
  }
  for (const owner of owners) {
    owner.paths = owner.paths.filter((path) => ![...changed, ...removed].some((other) => overlaps(path, other)));
  }
  let mine = owners.find((owner) => sameOwner(owner.entry, who, "Update"));
  if (!mine) {
    mine = { entry: newEntry(who, "Update"), paths: [] };
    owners.push(mine);
  }
  mine.entry = { ...mine.entry, time: newEntry(who, "Update").time };
  const known = new Set(mine.paths.map(keyOf));
  mine.paths.push(...changed.filter((path) => !known.has(keyOf(path))));
  writeOwnership(next, owners);
}

interface Conflict {
  owner: ManagedFieldsEntry;
  path: FieldPath;
}

/** How the real server names a manager in conflicts: `"name"`, plus subresource, API version and time for updates. */
function describeManager(entry: ManagedFieldsEntry): string {
  let text = JSON.stringify(entry.manager);
  if (entry.subresource) text += ` with subresource ${JSON.stringify(entry.subresource)}`;
  if (entry.operation !== "Update") return text;
  return entry.time ? `${text} using ${entry.apiVersion} at ${entry.time}` : `${text} using ${entry.apiVersion}`;
}

function fieldText(path: FieldPath): string {
  return path.map((key) => `.${key}`).join("");
}

/** The 409 of a conflicting apply, worded as kube-apiserver words it (one line per manager and field). */
function applyConflict(conflicts: Conflict[]): ApiError {
  const causes = conflicts.map((c) => ({
    reason: "FieldManagerConflict",
    message: `conflict with ${describeManager(c.owner)}`,
    field: fieldText(c.path),
  }));
  const [only] = conflicts;
  if (conflicts.length === 1 && only !== undefined) {
    const message = `Apply failed with 1 conflict: conflict with ${describeManager(only.owner)}: ${fieldText(only.path)}`;
    return new ApiError(409, "Conflict", message, { causes });
  }
  const byManager = new Map<string, string[]>();
  for (const c of conflicts) {
    const manager = describeManager(c.owner);
    byManager.set(manager, [...(byManager.get(manager) ?? []), `- ${fieldText(c.path)}`]);
  }
  const lines = [...byManager.keys()]
    .sort()
    .flatMap((manager) => [`conflicts with ${manager}:`, ...(byManager.get(manager) ?? [])]);
  return new ApiError(409, "Conflict", `Apply failed with ${conflicts.length} conflicts: ${lines.join("\n")}`, {
    causes,
  });
}

/**
 * Server-side apply of `applied` onto `current` by one manager. Throws a 409 naming the conflicting fields
 * unless `force`; fields the manager applied before and now omits are removed unless someone else owns them.
 */
export function serverSideApply(
  current: KubeObject,
  applied: KubeObject,
  who: OwnerIdentity,
  force: boolean,
  merge: (target: unknown, patch: unknown) => unknown,
  shape: FieldShape = NO_SHAPE,
): KubeObject {
  const owners = readOwnership(current);
  const scope = who.subresource === "status" ? "status" : "main";
  const appliedPaths = ownedLeaves(applied, scope, shape);
  const conflicts: Conflict[] = [];
  for (const owner of owners) {
    if (sameOwner(owner.entry, who, "Apply")) continue;
    for (const path of appliedPaths) {
      const clash = owner.paths.find((owned) => overlaps(owned, path));
      if (clash && !deepEqual(valueAt(current, path), valueAt(applied, path)))
        conflicts.push({ owner: owner.entry, path });
    }
  }
  if (conflicts.length > 0 && !force) throw applyConflict(conflicts);
  for (const owner of owners) {
    if (sameOwner(owner.entry, who, "Apply")) continue;
    owner.paths = owner.paths.filter((owned) => !conflicts.some((c) => overlaps(owned, c.path)));
  }
  let mine = owners.find((owner) => sameOwner(owner.entry, who, "Apply"));
  const result = deepClone(current);
  if (mine) {
    const appliedKeys = new Set(appliedPaths.map(keyOf));
    for (const path of mine.paths) {
      if (appliedKeys.has(keyOf(path))) continue;
      const ownedElsewhere = owners.some((owner) => owner !== mine && owner.paths.some((p) => overlaps(p, path)));
      if (!ownedElsewhere) deleteAt(result, path);
    }
  } else {
    mine = { entry: newEntry(who, "Apply"), paths: [] };
    owners.push(mine);
  }
  mine.entry = { ...mine.entry, time: newEntry(who, "Apply").time };
  mine.paths = appliedPaths;
  const merged = merge(result, applied) as KubeObject;
  writeOwnership(merged, owners);
  return merged;
}
