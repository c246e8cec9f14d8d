// Which object manages which cloud resource, as GpuCloudClaims in the operator's namespace (ADR 0021). A claim
// reserves one cloud name slot (account, project, kind, name) for one holder (by uid), created with create-only
// semantics so that any number of racers get one winner, and records the resource's id once known. Tenants
// cannot write claims: a spec or status edit can point an object at anything, but it acts only on the resource
// its claim names. This file keeps the claims as the informer shows them (plus this process's own writes the
// cache has not shown yet) and makes the few writes a claim ever needs.
import { CLAIMED_KINDS, type ClaimedKind, type ClaimSlot, claimNameOf } from "../../api/gpu-cloud-claim.ts";
import type { Account } from "../accounts/account.ts";

/** A kind's name as its claims record it; throws for a kind that holds no cloud resource (a wiring mistake). */
export function claimedKind(kind: string): ClaimedKind {
  const claimed = CLAIMED_KINDS.find((candidate) => candidate === kind);
  if (claimed === undefined) throw new Error(`${kind} holds no cloud resources: it has no claims`);
  return claimed;
}

/** The object holding a claim. */
export interface Holder {
  namespace: string;
  name: string;
  uid: string;
}

export interface Claim extends ClaimSlot {
  /** The claim object's name (claimNameOf(slot)). */
  objectName: string;
  /** The claim object's uid and version: deletes and id writes are guarded by them. */
  uid: string;
  resourceVersion: string;
  /** The claimed resource, once known. */
  id?: string;
  holder: Holder;
}

export type ClaimWrite = { type: "written"; claim: Claim } | { type: "conflict" } | { type: "gone" };

/** The Kubernetes side of the claims (claim-records.ts adapts it onto the runtime; tests keep them in memory). */
export interface ClaimRecords {
  /** Create-only: `exists` when the slot's claim is there already (whoever holds it). */
  create(slot: ClaimSlot, holder: Holder): Promise<{ type: "created"; claim: Claim } | { type: "exists" }>;
  /** Read from the API server, not a cache. */
  get(objectName: string): Promise<Claim | undefined>;
  /** Set (or remove) the resource id, guarded by the claim's resourceVersion. */
  setId(claim: Claim, id: string | undefined): Promise<ClaimWrite>;
  /** Delete, guarded by the claim's uid. */
  delete(claim: Claim): Promise<"deleted" | "gone" | "conflict">;
  /** The claims of a kind naming this resource id, read from the API server (not a cache). */
  listById(kind: ClaimedKind, account: Account, id: string): Promise<Claim[]>;
}

export type Acquired = { type: "held"; claim: Claim } | { type: "taken"; claim: Claim };

/**
 * Names under a key, as one string while there is one (the common case: one claim per holder, one per resource id)
 * and as a set beyond: a Set per entry costs about 150 bytes, and every replica indexes every claim twice.
 */
class NamesByKey {
  readonly #names = new Map<string, string | Set<string>>();

  add(key: string, name: string): void {
    const names = this.#names.get(key);
    if (names === undefined || names === name) this.#names.set(key, name);
    else if (typeof names === "string") this.#names.set(key, new Set([names, name]));
    else names.add(name);
  }

  delete(key: string, name: string): void {
    const names = this.#names.get(key);
    if (names === name) this.#names.delete(key);
    else if (typeof names !== "string" && names?.delete(name) === true && names.size === 1) {
      this.#names.set(key, names.values().next().value as string);
    }
  }

  get(key: string): readonly string[] {
    const names = this.#names.get(key);
    if (names === undefined) return [];
    return typeof names === "string" ? [names] : [...names];
  }
}

const sameAccount = (claim: Claim, account: Account): boolean =>
  claim.apiUrl === account.apiUrl && claim.projectId === account.projectId;

/** Resource versions are opaque; both servers we run against give integers, compared as such when they are. */
function newerOrSame(candidate: string, than: string): boolean {
  if (/^\d+$/.test(candidate) && /^\d+$/.test(than)) return BigInt(candidate) >= BigInt(than);
  return candidate === than;
}

/**
 * The claims of every kind, kept from informer events (`upsert`, `remove`) and from this process's own writes,
 * indexed by slot, holder and resource id. Keys that stopped on a claim (NameConflict) are woken when it changes
 * or goes.
 */
export class ClaimStore {
  readonly #records: ClaimRecords;
  readonly #byObject = new Map<string, Claim>();
  /** holder uid → names of the claims it holds. */
  readonly #byHolder = new NamesByKey();
  /** resource id → names of the claims naming it (of any kind and account: ids seldom meet across them). */
  readonly #byId = new NamesByKey();
  /** Own writes the cache has not shown yet: object name → the claim written (or null: deleted). */
  readonly #ahead = new Map<string, Claim | null>();
  /** claim object name → `kind/namespace/name` keys that stopped on it. */
  readonly #blocked = new Map<string, Set<string>>();
  readonly #wake: (kind: string, key: string) => void;

  constructor(records: ClaimRecords, options: { wake?: (kind: string, key: string) => void } = {}) {
    this.#records = records;
    this.#wake = options.wake ?? (() => undefined);
  }

  /** An informer add or update (the claim as parsed; see claimOfObject in claim-records.ts). */
  upsert(claim: Claim): void {
    const ahead = this.#ahead.get(claim.objectName);
    if (ahead !== undefined) {
      // Our own write is newer than what the cache shows: keep it until the cache catches up.
      if (ahead !== null && !newerOrSame(claim.resourceVersion, ahead.resourceVersion)) return;
      if (ahead === null && claim.uid === this.#byObject.get(claim.objectName)?.uid) return;
      this.#ahead.delete(claim.objectName);
    }
    this.#set(claim);
  }

  /** An informer delete. */
  remove(objectName: string): void {
    if (this.#ahead.get(objectName) === null) this.#ahead.delete(objectName);
    this.#unset(objectName);
  }

  /** The claim an object holds for its kind (one per object). */
  heldBy(kind: ClaimedKind, uid: string): Claim | undefined {
    for (const objectName of this.#byHolder.get(uid)) {
      const claim = this.#byObject.get(objectName);
      if (claim?.kind === kind) return claim;
    }
    return undefined;
  }

  /** Every claim an object holds (of any kind), as cached. */
  allHeldBy(uid: string): Claim[] {
    return this.#byHolder.get(uid).flatMap((objectName) => this.#byObject.get(objectName) ?? []);
  }

  /** The claim naming a resource id, as cached. */
  ofId(kind: ClaimedKind, account: Account, id: string): Claim | undefined {
    return this.allOfId(kind, account, id)[0];
  }

  /** Every claim naming a resource id, as cached (more than one only if a resource was claimed under two names). */
  allOfId(kind: ClaimedKind, account: Account, id: string): Claim[] {
    return this.#byId
      .get(id)
      .flatMap((objectName) => this.#byObject.get(objectName) ?? [])
      .filter((claim) => claim.kind === kind && sameAccount(claim, account));
  }

  /** The claim of a slot, as cached. */
  ofSlot(slot: ClaimSlot): Claim | undefined {
    return this.#byObject.get(claimNameOf(slot));
  }

  /**
   * Take the slot for `holder`, or learn who has it. Create-only: two racers never both win. A key that loses
   * is woken when the winner's claim changes or goes.
   */
  async acquire(slot: ClaimSlot, holder: Holder, waiterKey: string): Promise<Acquired> {
    const objectName = claimNameOf(slot);
    const cached = this.#byObject.get(objectName);
    if (cached !== undefined) return this.#outcome(cached, holder, waiterKey);
    const created = await this.#records.create(slot, holder);
    if (created.type === "created") {
      this.#wrote(created.claim);
      return { type: "held", claim: created.claim };
    }
    const existing = await this.#records.get(objectName);
    if (existing === undefined) {
      // Released between our create and our read: the next pass tries again.
      this.#block(objectName, waiterKey);
      this.#wake(slot.kind, waiterKey);
      throw new ClaimRaceError(`the claim on cloud name ${slot.cloudName} changed hands while it was taken`);
    }
    this.upsert(existing);
    return this.#outcome(existing, holder, waiterKey);
  }

  /** Record the claimed resource's id (or remove it): `conflict` when the claim changed meanwhile. */
  async recordId(claim: Claim, id: string | undefined): Promise<ClaimWrite> {
    if (claim.id === id) return { type: "written", claim };
    const written = await this.#records.setId(claim, id);
    if (written.type === "written") this.#wrote(written.claim);
    if (written.type === "gone") this.#deleted(claim.objectName);
    return written;
  }

  /** Give a claim up: the slot is free for anyone again. */
  async release(claim: Claim): Promise<void> {
    const deleted = await this.#records.delete(claim);
    if (deleted === "conflict") {
      // Another object by that name now (never ours to delete), or a claim we no longer know: read it again.
      const now = await this.#records.get(claim.objectName);
      if (now !== undefined) this.upsert(now);
      if (now?.holder.uid === claim.holder.uid)
        throw new ClaimRaceError(`claim ${claim.objectName} changed while it was released`);
      return;
    }
    this.#deleted(claim.objectName);
  }

  /** Who claims a resource id, read from the API server: for adopting by spec.id, where a stale cache must not decide. */
  async claimOfIdFresh(kind: ClaimedKind, account: Account, id: string): Promise<Claim | undefined> {
    const listed = await this.#records.listById(kind, account, id);
    for (const claim of listed) this.upsert(claim);
    return listed.find((claim) => claim.id === id);
  }

  /** Every claim as cached (the sweep of claims whose holder is gone reads it). */
  all(): Claim[] {
    return [...this.#byObject.values()];
  }

  get(objectName: string): Claim | undefined {
    return this.#byObject.get(objectName);
  }

  /** Remember that `waiterKey` (`namespace/name` of a `kind` object) stopped on this claim. */
  block(claim: Claim, waiterKey: string): void {
    this.#block(claim.objectName, waiterKey);
  }

  #outcome(claim: Claim, holder: Holder, waiterKey: string): Acquired {
    if (claim.holder.uid === holder.uid) return { type: "held", claim };
    this.#block(claim.objectName, waiterKey);
    return { type: "taken", claim };
  }

  #block(objectName: string, waiterKey: string): void {
    const keys = this.#blocked.get(objectName) ?? new Set<string>();
    keys.add(waiterKey);
    this.#blocked.set(objectName, keys);
  }

  #wrote(claim: Claim): void {
    this.#ahead.set(claim.objectName, claim);
    this.#set(claim);
  }

  #deleted(objectName: string): void {
    if (this.#byObject.has(objectName)) this.#ahead.set(objectName, null);
    this.#unset(objectName);
  }

  #set(claim: Claim): void {
    const name = claim.objectName;
    const before = this.#byObject.get(name);
    // Entries are replaced in place, never deleted and added again: a Map keeps a deleted entry's slot until it
    // grows, and every claim is written several times (its create, its id).
    this.#byObject.set(name, claim);
    if (before?.holder.uid !== claim.holder.uid) {
      if (before !== undefined) this.#byHolder.delete(before.holder.uid, name);
      this.#byHolder.add(claim.holder.uid, name);
    }
    if (before?.id !== claim.id) {
      if (before?.id !== undefined) this.#byId.delete(before.id, name);
      if (claim.id !== undefined) this.#byId.add(claim.id, name);
    }
    if (before !== undefined && (before.holder.uid !== claim.holder.uid || before.id !== claim.id)) {
      this.#wakeBlocked(name, claim.kind);
    }
  }

  #unset(objectName: string): void {
    const before = this.#byObject.get(objectName);
    this.#unindex(objectName);
    if (before !== undefined) this.#wakeBlocked(objectName, before.kind);
  }

  #unindex(objectName: string): void {
    const claim = this.#byObject.get(objectName);
    if (claim === undefined) return;
    this.#byObject.delete(objectName);
    this.#byHolder.delete(claim.holder.uid, objectName);
    if (claim.id !== undefined) this.#byId.delete(claim.id, objectName);
  }

  #wakeBlocked(objectName: string, kind: string): void {
    const keys = this.#blocked.get(objectName);
    if (keys === undefined) return;
    this.#blocked.delete(objectName);
    for (const key of keys) this.#wake(kind, key);
  }
}

/** A claim changed hands while this pass worked with it: not an error to report, the next pass decides again. */
export class ClaimRaceError extends Error {
  override name = "ClaimRaceError";
}
