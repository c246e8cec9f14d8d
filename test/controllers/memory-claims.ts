// GpuCloudClaims kept in memory for tests of the lifecycle without a Kubernetes API: the records behave as the API
// server does (create-only, guarded writes, uid preconditions) and feed the store as an informer would.

import { type ClaimSlot, claimNameOf } from "../../src/api/gpu-cloud-claim.ts";
import type { Account } from "../../src/controllers/accounts/account.ts";
import {
  type Claim,
  type ClaimRecords,
  ClaimStore,
  type ClaimWrite,
  type Holder,
} from "../../src/controllers/managed/claims.ts";

export class MemoryClaimRecords implements ClaimRecords {
  readonly objects = new Map<string, Claim>();
  /** Every write, in order (`create <cloudName>`, `id <cloudName> <id|->`, `delete <cloudName>`). */
  readonly writes: string[] = [];
  #version = 100;
  #uid = 0;
  /** Informer events go here (set by memoryClaims). */
  informer: ClaimStore | undefined;

  async create(slot: ClaimSlot, holder: Holder): Promise<{ type: "created"; claim: Claim } | { type: "exists" }> {
    const objectName = claimNameOf(slot);
    if (this.objects.has(objectName)) return { type: "exists" };
    const claim: Claim = { ...slot, objectName, uid: `claim-${++this.#uid}`, resourceVersion: this.#next(), holder };
    this.objects.set(objectName, claim);
    this.writes.push(`create ${slot.cloudName}`);
    this.informer?.upsert(claim);
    return { type: "created", claim };
  }

  async get(objectName: string): Promise<Claim | undefined> {
    return this.objects.get(objectName);
  }

  async setId(claim: Claim, id: string | undefined): Promise<ClaimWrite> {
    const now = this.objects.get(claim.objectName);
    if (now === undefined) return { type: "gone" };
    if (now.resourceVersion !== claim.resourceVersion) return { type: "conflict" };
    const { id: _old, ...rest } = now;
    const written: Claim = { ...rest, resourceVersion: this.#next(), ...(id !== undefined ? { id } : {}) };
    this.objects.set(claim.objectName, written);
    this.writes.push(`id ${claim.cloudName} ${id ?? "-"}`);
    this.informer?.upsert(written);
    return { type: "written", claim: written };
  }

  async delete(claim: Claim): Promise<"deleted" | "gone" | "conflict"> {
    const now = this.objects.get(claim.objectName);
    if (now === undefined) return "gone";
    if (now.uid !== claim.uid) return "conflict";
    this.objects.delete(claim.objectName);
    this.writes.push(`delete ${claim.cloudName}`);
    this.informer?.remove(claim.objectName);
    return "deleted";
  }

  async listById(kind: string, account: Account, id: string): Promise<Claim[]> {
    return [...this.objects.values()].filter(
      (claim) =>
        claim.kind === kind &&
        claim.id === id &&
        claim.apiUrl === account.apiUrl &&
        claim.projectId === account.projectId,
    );
  }

  /** A new process's store over these claims: it lists them first, then follows their changes (an informer). */
  attach(options: { wake?: (kind: string, key: string) => void } = {}): ClaimStore {
    const store = new ClaimStore(this, options);
    for (const claim of this.objects.values()) store.upsert(claim);
    this.informer = store;
    return store;
  }

  /** A claim made before the test starts (as another process would have). */
  seed(slot: ClaimSlot, holder: Holder, id?: string): Claim {
    const objectName = claimNameOf(slot);
    const claim: Claim = {
      ...slot,
      objectName,
      uid: `claim-${++this.#uid}`,
      resourceVersion: this.#next(),
      holder,
      ...(id !== undefined ? { id } : {}),
    };
    this.objects.set(objectName, claim);
    this.informer?.upsert(claim);
    return claim;
  }

  #next(): string {
    this.#version += 1;
    return String(this.#version);
  }
}

export function memoryClaims(options: { wake?: (kind: string, key: string) => void } = {}): {
  records: MemoryClaimRecords;
  store: ClaimStore;
} {
  const records = new MemoryClaimRecords();
  return { records, store: records.attach(options) };
}
