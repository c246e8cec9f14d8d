// Every cloud resource has exactly one owner. The cloud name an object works with, an index of what every object
// of a kind claims (the resource it holds by status.id, the name of its create intent), and the proof an object
// needs to adopt a resource it finds by name (its own create intent, older than the resource). A second claimant
// gets NameConflict naming the first and never touches the resource.
import { defaultCloudName, legacyDefaultCloudName } from "../api/common.ts";
import { isRecord } from "../util/is-record.ts";
import type { ManagedObject, ManagedStatusBase } from "./external.ts";

/**
 * The cloud name a pass works with: the name of a create in flight; spec.cloudName; the name the object created
 * its resource under with the default of versions before 0.2 (it keeps it); else the collision-free default.
 */
export function cloudNameFor(mr: ManagedObject): string {
  const { namespace, name } = mr.metadata;
  if (mr.status.createPending !== undefined) return mr.status.createPending.cloudName;
  if (mr.spec.cloudName !== undefined) return mr.spec.cloudName;
  const legacy = legacyDefaultCloudName(namespace, name);
  if (mr.status.id !== undefined && mr.status.cloudName === legacy) return legacy;
  return defaultCloudName(namespace, name);
}

/**
 * The earlier default name when it differs from the current one and the object never set its own: a resource
 * under it may be this object's from before an upgrade (status lost), so it is never created around silently.
 */
export function legacyNameToCheck(mr: ManagedObject, cloudName: string): string | undefined {
  if (mr.spec.cloudName !== undefined) return undefined;
  const legacy = legacyDefaultCloudName(mr.metadata.namespace, mr.metadata.name);
  return legacy === cloudName ? undefined : legacy;
}

/** How far the cloud's clock may run behind ours when a resource's creation time proves our own create. */
export const CREATE_PROOF_SKEW_MS = 2_000;

/**
 * Whether this object's own create intent proves it made a resource found by name: the intent names it and the
 * resource was created after the intent was recorded (within the clock skew allowed).
 */
export function provesOwnCreate(status: ManagedStatusBase, cloudName: string, createdAt: string | undefined): boolean {
  const intent = status.createPending;
  if (intent === undefined || intent.cloudName !== cloudName || createdAt === undefined) return false;
  const requested = Date.parse(intent.requestedAt);
  const created = Date.parse(createdAt);
  if (Number.isNaN(requested) || Number.isNaN(created)) return false;
  // Cloud timestamps may have whole seconds only.
  return created >= Math.floor(requested / 1000) * 1000 - CREATE_PROOF_SKEW_MS;
}

/** What one object claims, read from the informer cache. */
export interface Claim {
  key: string;
  /** metadata.creationTimestamp in ms (the older object wins a tie). */
  createdAtMs: number;
  resourceVersion: string;
  projectId?: string;
  /** status.id: the resource it holds. */
  id?: string;
  /** Cloud names it holds: its create intent's, and the name of the resource it holds. */
  names: string[];
}

/** The claimant's side of a question to the index (from its draft status, which may be ahead of the cache). */
export interface Claimant {
  key: string;
  createdAtMs: number;
  projectId: string;
  /** The resource it holds (status.id), if any. */
  id?: string;
  /** It has a create intent (or a reservation) for the name asked about. */
  intends?: boolean;
}

export interface Rival {
  key: string;
  /** Why it is ahead: "holds" the resource (by id or name), or "intends" to create it first. */
  why: "holds" | "intends";
}

/** The claims of an object; undefined for objects that claim nothing (observe-only, unreadable). */
export function claimOf(raw: unknown): Claim | undefined {
  if (!isRecord(raw) || !isRecord(raw.metadata)) return undefined;
  const { namespace, name, creationTimestamp, resourceVersion } = raw.metadata;
  if (typeof namespace !== "string" || typeof name !== "string") return undefined;
  const spec = isRecord(raw.spec) ? raw.spec : {};
  if (spec.managementPolicy === "Observe") return undefined;
  const status = isRecord(raw.status) ? raw.status : {};
  const text = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined);
  const id = text(status.id);
  const names = [
    isRecord(status.createPending) ? text(status.createPending.cloudName) : undefined,
    id !== undefined ? text(status.cloudName) : undefined,
  ].filter((n): n is string => n !== undefined);
  const projectId = text(status.projectId);
  const createdAtMs = Date.parse(typeof creationTimestamp === "string" ? creationTimestamp : "");
  return {
    key: `${namespace}/${name}`,
    createdAtMs: Number.isNaN(createdAtMs) ? Number.POSITIVE_INFINITY : createdAtMs,
    resourceVersion: typeof resourceVersion === "string" ? resourceVersion : "",
    ...(projectId !== undefined ? { projectId } : {}),
    ...(id !== undefined ? { id } : {}),
    names: [...new Set(names)],
  };
}

/** The older object (then the smaller key) is ahead. */
function older(a: { createdAtMs: number; key: string }, b: { createdAtMs: number; key: string }): boolean {
  return a.createdAtMs !== b.createdAtMs ? a.createdAtMs < b.createdAtMs : a.key < b.key;
}

interface Reservation {
  projectId: string;
  name: string;
  /** The object's resourceVersion when it reserved; a cache past it shows the intent itself. */
  version: string;
  createdAtMs: number;
}

const slot = (projectId: string, value: string): string => `${projectId}\u0000${value}`;

/**
 * The claims of every object of one kind, kept up to date from informer events, plus in-memory reservations
 * that cover the moment between deciding to create and the cache showing the create intent (so that two
 * workers never both create one name).
 */
export class ClaimIndex {
  readonly #claims = new Map<string, Claim>();
  readonly #byId: Holders = new Map();
  readonly #byName: Holders = new Map();
  readonly #reservations = new Map<string, Reservation>();
  /** rival key → keys that stalled on it (woken when it changes or goes). */
  readonly #blocked: Holders = new Map();
  readonly #wake: (key: string) => void;

  constructor(options: { wake?: (key: string) => void } = {}) {
    this.#wake = options.wake ?? (() => undefined);
  }

  /** An informer add or update. */
  upsert(raw: unknown): void {
    const claim = claimOf(raw);
    const key = claim?.key ?? keyOfRaw(raw);
    if (key === undefined) return;
    const before = this.#claims.get(key);
    this.#unindex(key);
    const reservation = this.#reservations.get(key);
    if (reservation !== undefined && reservation.version !== claim?.resourceVersion) this.#reservations.delete(key);
    if (claim !== undefined) {
      this.#claims.set(key, claim);
      if (claim.projectId !== undefined) {
        if (claim.id !== undefined) add(this.#byId, slot(claim.projectId, claim.id), key);
        for (const name of claim.names) add(this.#byName, slot(claim.projectId, name), key);
      }
    }
    if (before !== undefined && !sameClaim(before, claim)) this.#wakeBlocked(key);
  }

  /** An informer delete. */
  remove(raw: unknown): void {
    const key = keyOfRaw(raw);
    if (key === undefined) return;
    this.#unindex(key);
    this.#reservations.delete(key);
    this.#wakeBlocked(key);
  }

  /** Hold `name` for `key` until the cache shows a newer version of it (its create intent). */
  reserve(key: string, projectId: string, name: string, version: string, createdAtMs: number): void {
    this.#reservations.set(key, { projectId, name, version, createdAtMs });
  }

  /** Another object ahead of the claimant for this resource id. */
  rivalForId(self: Claimant, id: string): Rival | undefined {
    const holders = holdersAt(this.#byId, slot(self.projectId, id))
      .filter((key) => key !== self.key)
      .flatMap((key) => this.#claims.get(key) ?? []);
    const ahead = holders.filter((other) => self.id !== id || older(other, self)).sort(compareAge);
    return ahead[0] !== undefined ? this.#blockedBy(self.key, ahead[0].key, "holds") : undefined;
  }

  /** Another object ahead of the claimant for this cloud name (holding a resource of that name, or creating it). */
  rivalForName(self: Claimant, name: string): Rival | undefined {
    const rivals: { key: string; createdAtMs: number; why: Rival["why"] }[] = [];
    for (const key of holdersAt(this.#byName, slot(self.projectId, name))) {
      const other = this.#claims.get(key);
      if (key === self.key || other === undefined) continue;
      const holds = other.id !== undefined && other.id !== self.id;
      if (holds) rivals.push({ key, createdAtMs: other.createdAtMs, why: "holds" });
      else if (!self.intends || older(other, self))
        rivals.push({ key, createdAtMs: other.createdAtMs, why: "intends" });
    }
    for (const [key, reservation] of this.#reservations) {
      if (key === self.key || reservation.projectId !== self.projectId || reservation.name !== name) continue;
      const other = { key, createdAtMs: reservation.createdAtMs };
      if (!self.intends || older(other, self)) rivals.push({ ...other, why: "intends" });
    }
    const first = rivals.sort((a, b) => (a.why !== b.why ? (a.why === "holds" ? -1 : 1) : compareAge(a, b)))[0];
    return first !== undefined ? this.#blockedBy(self.key, first.key, first.why) : undefined;
  }

  /** Keys of the objects that hold or intend a cloud name in a project (their creates reserve it first). */
  claimantsOfName(projectId: string, name: string): string[] {
    const keys = new Set(this.#byName.get(slot(projectId, name)) ?? []);
    for (const [key, reservation] of this.#reservations) {
      if (reservation.projectId === projectId && reservation.name === name) keys.add(key);
    }
    return [...keys];
  }

  /** Keys of the objects that hold a resource id in a project (to wake them when it is gone). */
  holdersOf(projectId: string, id: string): string[] {
    return holdersAt(this.#byId, slot(projectId, id));
  }

  #blockedBy(key: string, rival: string, why: Rival["why"]): Rival {
    add(this.#blocked, rival, key);
    return { key: rival, why };
  }

  #wakeBlocked(rival: string): void {
    const waiting = holdersAt(this.#blocked, rival);
    this.#blocked.delete(rival);
    for (const key of waiting) this.#wake(key);
  }

  #unindex(key: string): void {
    const claim = this.#claims.get(key);
    if (claim === undefined) return;
    this.#claims.delete(key);
    if (claim.projectId === undefined) return;
    if (claim.id !== undefined) drop(this.#byId, slot(claim.projectId, claim.id), key);
    for (const name of claim.names) drop(this.#byName, slot(claim.projectId, name), key);
  }
}

function compareAge(a: { createdAtMs: number; key: string }, b: { createdAtMs: number; key: string }): number {
  return older(a, b) ? -1 : older(b, a) ? 1 : 0;
}

function sameClaim(a: Claim, b: Claim | undefined): boolean {
  return (
    b !== undefined &&
    a.projectId === b.projectId &&
    a.id === b.id &&
    a.names.length === b.names.length &&
    a.names.every((n, i) => n === b.names[i])
  );
}

function keyOfRaw(raw: unknown): string | undefined {
  if (!isRecord(raw) || !isRecord(raw.metadata)) return undefined;
  const { namespace, name } = raw.metadata;
  return typeof namespace === "string" && typeof name === "string" ? `${namespace}/${name}` : undefined;
}

/**
 * Keys by slot, where nearly every slot has one key (one object per resource id or name): the key itself, and a
 * Set only for the rare slot several objects share. A Set of one costs about 200 bytes; at 10,000 objects with
 * an id and a name each, that was 4 MB.
 */
type Holders = Map<string, string | Set<string>>;

function add(map: Holders, slotKey: string, key: string): void {
  const held = map.get(slotKey);
  if (held === undefined || held === key) map.set(slotKey, key);
  else if (typeof held === "string") map.set(slotKey, new Set([held, key]));
  else held.add(key);
}

function drop(map: Holders, slotKey: string, key: string): void {
  const held = map.get(slotKey);
  if (held === key) map.delete(slotKey);
  else if (typeof held === "object") {
    held.delete(key);
    if (held.size === 1) map.set(slotKey, held.values().next().value as string);
  }
}

function holdersAt(map: Holders, slotKey: string): string[] {
  const held = map.get(slotKey);
  return held === undefined ? [] : typeof held === "string" ? [held] : [...held];
}
