// Objects whose shard has no leader, with sharding and --leader-elect: how many each controller has (the gauge
// gpucloud_operator_objects_without_owner, the same on every replica), and which of them the leader of the lowest
// shard led hands to their controller's onWithoutOwner, which may say so in their status (nobody reconciles them).
import type { Logger } from "pino";
import type { Controller } from "./controller.ts";
import type { ObjectInformer } from "./informer.ts";
import type { ShardLeases } from "./shard-leases.ts";
import { type Shard, shardOfKey } from "./sharding.ts";

/** A registered controller as these two questions need it. */
export interface OwnedObjects {
  controller: Controller;
  informer: ObjectInformer;
  onWithoutOwner?: (keys: string[]) => void;
}

/** Every object the informer knows: held in full, or only noted (a shard holds its own objects, notes the rest). */
function keysOf(informer: ObjectInformer): string[] {
  return informer.keys();
}

/**
 * Per controller, the objects no held Lease of any shard set covers. 0 without the Leases (no --leader-elect:
 * nothing tells whether other shards run) and until they were first listed.
 */
export function countWithoutOwner(
  controllers: readonly OwnedObjects[],
  leases: ShardLeases | undefined,
): { controller: string; objects: number }[] {
  return controllers.map(({ controller, informer }) => {
    if (leases?.held === undefined) return { controller: controller.name, objects: 0 };
    const objects = keysOf(informer).filter((key) => leases.isOwned(key) === false).length;
    return { controller: controller.name, objects };
  });
}

/**
 * On the leader of the lowest shard led: the keys of objects whose shard has had no leader for twice the lease
 * duration (and no other set covers) go to their controller's onWithoutOwner.
 */
export function reportWithoutOwner(
  controllers: readonly OwnedObjects[],
  leases: ShardLeases,
  options: { shard: Shard; leaseDurationMs: number; leading: boolean; logger: Logger },
): void {
  const { shard, leaseDurationMs, leading, logger } = options;
  if (shard.count <= 1 || !leading || leases.lowestLedShard() !== shard.index) return;
  const leaderless = new Set(leases.leaderlessFor(2 * leaseDurationMs));
  if (leaderless.size === 0) return;
  for (const { controller, informer, onWithoutOwner } of controllers) {
    if (onWithoutOwner === undefined) continue;
    const keys = keysOf(informer).filter(
      (key) => leaderless.has(shardOfKey(key, shard.count)) && leases.isOwned(key) === false,
    );
    if (keys.length === 0) continue;
    try {
      onWithoutOwner(keys);
    } catch (error) {
      logger.error({ err: error, controller: controller.name }, "onWithoutOwner threw");
    }
  }
}
