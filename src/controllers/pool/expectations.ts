// What a GpuVmPool's last writes to its GpuVms should soon show in the informer cache (controller-runtime's
// "expectations"): GpuVms it created (not visible yet), deleted (still visible without a deletion timestamp) or
// changed (still at the old generation). Until the cache shows them, the pool does not count on the cache for
// those replicas: a GpuVm it deleted is not adopted back, a GpuVm it changed is not counted Ready, and a pool
// being deleted does not let go while a GpuVm it created may still appear. Each expectation expires (a lost
// watch event must not block a pool forever).
import type { Member } from "./members.ts";

const EXPECTATION_TTL_MS = 60_000;

interface PoolExpectations {
  created: Map<string, number>;
  deleted: Map<string, { uid: string; at: number }>;
  changed: Map<string, { generation: number; at: number }>;
}

export class Expectations {
  readonly #byPool = new Map<string, PoolExpectations>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  #of(poolKey: string): PoolExpectations {
    let entry = this.#byPool.get(poolKey);
    if (entry === undefined) {
      entry = { created: new Map(), deleted: new Map(), changed: new Map() };
      this.#byPool.set(poolKey, entry);
    }
    return entry;
  }

  created(poolKey: string, name: string): void {
    this.#of(poolKey).created.set(name, this.#now());
  }

  deleted(poolKey: string, name: string, uid: string): void {
    this.#of(poolKey).deleted.set(name, { uid, at: this.#now() });
  }

  changed(poolKey: string, name: string, generation: number): void {
    this.#of(poolKey).changed.set(name, { generation, at: this.#now() });
  }

  /** Drop what the cache (the pool's GpuVms, by name) now shows, and what has expired. */
  observe(poolKey: string, members: ReadonlyMap<string, Member>): void {
    const entry = this.#byPool.get(poolKey);
    if (entry === undefined) return;
    const expired = (at: number) => this.#now() - at > EXPECTATION_TTL_MS;
    for (const [name, at] of entry.created) if (members.has(name) || expired(at)) entry.created.delete(name);
    for (const [name, { uid, at }] of entry.deleted) {
      const member = members.get(name);
      if (member === undefined || member.uid !== uid || member.deletionTimestamp !== undefined || expired(at))
        entry.deleted.delete(name);
    }
    for (const [name, { generation, at }] of entry.changed) {
      const member = members.get(name);
      if (member === undefined || member.generation >= generation || expired(at)) entry.changed.delete(name);
    }
  }

  /** The cache still shows this GpuVm although the pool deleted it. */
  isDeleting(poolKey: string, name: string): boolean {
    return this.#byPool.get(poolKey)?.deleted.has(name) ?? false;
  }

  /** The cache still shows this GpuVm before the pool's last change to it. */
  isChanging(poolKey: string, name: string): boolean {
    return this.#byPool.get(poolKey)?.changed.has(name) ?? false;
  }

  /** GpuVms created and not seen yet. */
  unseen(poolKey: string): string[] {
    return [...(this.#byPool.get(poolKey)?.created.keys() ?? [])];
  }

  /** Anything still expected (the pass waits for the cache before it counts on it). */
  pending(poolKey: string): boolean {
    const entry = this.#byPool.get(poolKey);
    return entry !== undefined && entry.created.size + entry.deleted.size + entry.changed.size > 0;
  }

  forget(poolKey: string): void {
    this.#byPool.delete(poolKey);
  }
}
