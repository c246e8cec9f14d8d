// What every lifecycle shares, the managed kinds' and the GpuVmPool's: the timing of their passes, and the
// steps that need no cloud: pause, and the release of an object (its claim, what it wrote, our finalizer).
import type { Logger } from "pino";
import { ANNOTATIONS, FINALIZER, REASONS } from "../../api/common.ts";
import type { KubeAccess, WriteResult } from "./kube-access.ts";
import type { ManagedObject, ManagedStatusBase } from "./object-model.ts";
import { conflict, DONE, RELEASED, type Step, TERMINAL_RETRY_MS, type Verdict } from "./verdict.ts";

export interface ReconcileTiming {
  /** How long a terminal stall of the current generation waits before one more try. */
  terminalRetryMs: number;
  /** How long every location stays unasked after all of them answered out of capacity. */
  capacityRetryMs: number;
  /** Fallback requeue while an operation is in flight (the tracker normally wakes the key first). */
  operationFallbackMs: number;
  /** A resource may read as missing this long after its create succeeded (eventual consistency). */
  createGraceMs: number;
  /** Requeue while waiting for a transition we did not start or for a dependency. */
  shortMs: number;
  dependencyMs: number;
  /**
   * How long an operation the server cannot show is followed through its resource before it is given up
   * (then the resource is taken as it is: created again if absent, deleted again if present).
   */
  followTimeoutMs: number;
  /** How often a NameConflict is looked at again (the claims also wake it when the other object's claim changes). */
  nameConflictRetryMs: number;
  /**
   * How long a resource this object holds must stay unseen (every read, a direct GET included, answering "not
   * found") before it counts as gone and is created again. A missing resource proves nothing at first: reads
   * after a create may lag (the eventual consistency a cloud controller manager waits two minutes out).
   */
  goneConfirmMs: number;
  /**
   * How long a recorded action whose operation cannot be found, and whose resource shows no change, may still be
   * sent by the replica that recorded it: the Lease duration plus the API timeout (a replica that lost its Lease
   * sends nothing after it, and a request sent before it has ended). Only then is it decided afresh.
   */
  intentHoldMs: number;
}

export const DEFAULT_TIMING: ReconcileTiming = {
  terminalRetryMs: TERMINAL_RETRY_MS,
  capacityRetryMs: 60_000,
  operationFallbackMs: 15_000,
  createGraceMs: 30_000,
  shortMs: 2_000,
  dependencyMs: 30_000,
  followTimeoutMs: 15 * 60_000,
  nameConflictRetryMs: 2 * 60_000,
  goneConfirmMs: 2 * 60_000,
  // --leader-election-lease-duration (15 s) + --api-timeout (10 s) by default; controllers/index.ts passes the flags'.
  intentHoldMs: 25_000,
};

/**
 * What the shared lifecycle steps that need no cloud (pause, release of the finalizer) use of a pass. A
 * GpuVmPool's pass, which owns Kubernetes objects and no cloud resource, provides it too.
 */
export interface LifecyclePass {
  mr: ManagedObject;
  draft: ManagedStatusBase;
  logger: Logger;
  services: {
    setFinalizer(mr: ManagedObject, present: boolean): Promise<WriteResult>;
    /** Give up the claim the object holds (managed kinds; a GpuVmPool holds none). */
    releaseClaim?(mr: ManagedObject): Promise<void>;
    /** Give back what the object holds in budgets, and leave their waiting lines (managed kinds that bill). */
    releaseSpend?(mr: ManagedObject): Promise<void>;
    options: { kube: Pick<KubeAccess, "event">; onReleased?(mr: ManagedObject): Promise<void> };
  };
}

/** Paused: no cloud call at all. Deleting a paused object releases it and says what was left behind. */
export async function paused(pass: LifecyclePass, deleting: boolean): Promise<Step> {
  if (deleting) {
    const leftBehind = pass.mr.spec.deletionPolicy !== "Orphan" && pass.draft.id !== undefined;
    const note = leftBehind
      ? `paused object deleted: cloud resource ${pass.draft.id} was left behind (no cloud call while paused)`
      : "paused object deleted without a cloud call";
    return release(pass, leftBehind ? "Warning" : "Normal", note);
  }
  const verdictOfPause: Verdict = {
    ready: undefined,
    reason: REASONS.Paused,
    message: `${ANNOTATIONS.paused} is "true": no cloud calls`,
    progressing: false,
    stalled: false,
    outcome: DONE,
  };
  return verdictOfPause;
}

/**
 * Give up the object's claim (its cloud resource, if any, is nobody's from now on) and what it holds in budgets,
 * remove our finalizer (when held) and record why the object was let go. The claim and the budgets go first: a
 * crash in between leaves an object that releases again, never a claim or an entry without its holder.
 */
export async function release(pass: LifecyclePass, type: "Normal" | "Warning", note: string): Promise<Step> {
  await pass.services.releaseClaim?.(pass.mr);
  await pass.services.releaseSpend?.(pass.mr);
  if (pass.mr.metadata.finalizers.includes(FINALIZER)) {
    // What the object wrote goes with it (its owner reference would have Kubernetes do it too).
    await pass.services.options.onReleased?.(pass.mr);
    const written = await pass.services.setFinalizer(pass.mr, false);
    if (written.type === "conflict") return conflict();
  }
  pass.services.options.kube.event(pass.mr, type, REASONS.Deleting, note);
  pass.logger.info({ note }, "finalizer removed");
  return RELEASED;
}
