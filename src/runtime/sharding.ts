// Sharding: K operator replicas share the objects, each reconciling the ones whose stable hash of
// `namespace/name` falls in its shard. Every replica still caches every object (references cross shards), but
// reconciles, cloud calls and queue memory divide by K. With leader election each shard has its own Lease, so a
// shard's objects wait for a replica of that shard, never for another one. The count is part of the Lease's
// name: shard sets of different counts campaign for different Leases, and a replica stands by while a Lease of
// another count is held (shard-leases.ts), so two sets never divide the objects at once. See docs/scaling.md.

export interface Shard {
  index: number;
  count: number;
}

/** FNV-1a (32 bits) of the key: stable across processes, versions and platforms. */
export function hashKey(key: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** The shard a queue key (`namespace/name`, or `name` for cluster-scoped objects) belongs to. */
export function shardOfKey(key: string, count: number): number {
  return count <= 1 ? 0 : hashKey(key) % count;
}

/** Whether a replica of `shard` reconciles this key. */
export function ownsKey(shard: Shard, key: string): boolean {
  return shardOfKey(key, shard.count) === shard.index;
}

/** The Lease of a shard: the plain --leader-election-id without sharding, `<id>-shard-<index>-of-<count>` with it. */
export function shardLeaseName(leaderElectionId: string, shard: Shard): string {
  return shard.count <= 1 ? leaderElectionId : `${leaderElectionId}-shard-${shard.index}-of-${shard.count}`;
}

/**
 * The shard a Lease of this election stands for: its count and index; `count` undefined for the Leases of
 * versions that named them without the count (`<id>-shard-<index>`). Undefined for a Lease of another election.
 */
export function shardOfLease(
  leaderElectionId: string,
  leaseName: string,
): { index: number; count?: number } | undefined {
  if (leaseName === leaderElectionId) return { index: 0, count: 1 };
  const prefix = `${leaderElectionId}-shard-`;
  if (!leaseName.startsWith(prefix)) return undefined;
  const match = /^(\d+)(?:-of-(\d+))?$/.exec(leaseName.slice(prefix.length));
  if (match === null) return undefined;
  const index = Number(match[1]);
  return match[2] === undefined ? { index } : { index, count: Number(match[2]) };
}
