// Objects no replica reconciles (a shard without a leader, sharding.ts): their status must not go on saying
// "in step with the spec" once the spec has changed. The leader of another shard (runtime/manager.ts
// `onWithoutOwner`) turns the Synced condition of such an object to False (reason WaitingForOwner) when its
// generation is ahead of the one its status describes; it touches nothing else and never the cloud. The write is
// guarded by the object's resourceVersion: the shard's owner, back meanwhile, wins and writes its own verdict.

import type { Logger } from "pino";
import { REASONS } from "../../api/common.ts";
import type { KubeAccess } from "../core/kube-access.ts";
import type { Condition, ManagedObject } from "../core/object-model.ts";
import { formatKubeTime } from "../core/status-building.ts";

/** The status to write for an object without an owner, or undefined when it says nothing untrue. */
export function withoutOwnerStatus(mr: ManagedObject, nowMs: number): ManagedObject["status"] | undefined {
  const generation = mr.metadata.generation;
  const conditions = mr.status.conditions ?? [];
  const synced = conditions.find((condition) => condition.type === "Synced");
  if (mr.status.observedGeneration === generation || synced?.status !== "True") return undefined;
  const waiting: Condition = {
    type: "Synced",
    status: "False",
    reason: REASONS.WaitingForOwner,
    message: `no replica of this object's shard holds its Lease: generation ${generation} waits for one (status describes generation ${mr.status.observedGeneration ?? "none"})`,
    lastTransitionTime: formatKubeTime(nowMs),
    observedGeneration: generation,
  };
  return { ...mr.status, conditions: conditions.map((condition) => (condition === synced ? waiting : condition)) };
}

/**
 * Marks the objects of `keys` (parsed: from the cache, or read when this replica only notes them) whose status would
 * otherwise say Synced for an old spec.
 */
export async function markWithoutOwner(
  keys: readonly string[],
  deps: {
    read(key: string): ManagedObject | undefined | Promise<ManagedObject | undefined>;
    kube: Pick<KubeAccess, "writeStatus">;
    now(): number;
    logger: Logger;
  },
): Promise<void> {
  for (const key of keys) {
    let mr: ManagedObject | undefined;
    try {
      mr = await deps.read(key);
    } catch (error) {
      deps.logger.debug({ err: error, key }, "could not read an object without owner");
      continue;
    }
    const status = mr === undefined ? undefined : withoutOwnerStatus(mr, deps.now());
    if (mr === undefined || status === undefined) continue;
    try {
      const written = await deps.kube.writeStatus(mr, status);
      if (written.type === "written") deps.logger.info({ key }, "no replica owns this object: Synced=False");
    } catch (error) {
      deps.logger.debug({ err: error, key }, "could not mark an object without owner");
    }
  }
}
