// What the GpuMachine and GpuCluster lifecycles share as owners of operator objects (GpuVm; GpuNetwork and
// GpuFirewallRules): their finalizer and clusterctl's block-move annotation, pausing what they own (Cluster API's
// pause reaches the objects that make the cloud calls), and letting go.
//
// Pausing is not instantaneous: the owned objects are annotated gpucloud.dev/paused, and each says it paused
// (its Ready reason Paused); one whose create is in flight (status.createPending) finishes it first, so that
// what a clusterctl move copies holds the resource's id. Until all of them have paused, the owner keeps
// clusterctl.cluster.x-k8s.io/block-move (clusterctl pauses the Cluster, then waits for it to go) and its Paused
// condition stays False.
import type { Logger } from "pino";
import { CLUSTER_API_ANNOTATIONS } from "../../api/cluster-api.ts";
import { ANNOTATIONS, FINALIZER, REASONS } from "../../api/common.ts";
import type { KubeAccess } from "../core/kube-access.ts";
import type { ManagedObject, ManagedStatusBase } from "../core/object-model.ts";
import type { GuardedWrites } from "../core/own-writes.ts";
import { after, conflict, DONE, RELEASED, type Step, type Verdict } from "../core/verdict.ts";
import type { OwnedAccess, OwnedKind, SelfPatch } from "./access.ts";
import { type OwnedView, ownedReady, pausedAndAcknowledged } from "./objects.ts";
import type { PauseState } from "./status.ts";

export interface OwnerPassBase<O extends ManagedObject> {
  mr: O;
  draft: ManagedStatusBase;
  key: string;
  logger: Logger;
  /** What the Paused condition says at the end of the pass. */
  pause: PauseState;
}

export interface OwnerServices {
  writes: GuardedWrites;
  kube: Pick<KubeAccess, "event">;
  patchSelf: SelfPatch;
  owned: OwnedAccess;
  shortMs: number;
}

/** A guarded merge patch of the owner's own metadata; false when another writer got there first. */
async function patchOwnMetadata<O extends ManagedObject>(
  services: OwnerServices,
  pass: OwnerPassBase<O>,
  metadata: Record<string, unknown>,
): Promise<boolean> {
  const { mr } = pass;
  const written = await services.patchSelf(mr.metadata.namespace, mr.metadata.name, {
    metadata: { resourceVersion: mr.metadata.resourceVersion, ...metadata },
  });
  if (written.type !== "written") return false;
  services.writes.advance(pass.key, mr.metadata.resourceVersion, written.resourceVersion);
  mr.metadata.resourceVersion = written.resourceVersion;
  return true;
}

/**
 * The finalizer (our cleanup before the object goes) and block-move (clusterctl waits until what this object
 * owns has paused), in one write when either is missing. A verdict when the write lost to another.
 */
export async function ownerMetadata<O extends ManagedObject>(
  services: OwnerServices,
  pass: OwnerPassBase<O>,
): Promise<Verdict | undefined> {
  const { metadata } = pass.mr;
  const hasFinalizer = metadata.finalizers.includes(FINALIZER);
  const blocksMove = CLUSTER_API_ANNOTATIONS.blockMove in metadata.annotations;
  if (hasFinalizer && blocksMove) return undefined;
  const finalizers = hasFinalizer ? metadata.finalizers : [...metadata.finalizers, FINALIZER];
  const annotations = { [CLUSTER_API_ANNOTATIONS.blockMove]: "gpuvm-operator" };
  if (!(await patchOwnMetadata(services, pass, { finalizers, annotations }))) return conflict();
  metadata.finalizers = finalizers;
  metadata.annotations = { ...metadata.annotations, ...annotations };
  return undefined;
}

/** Pause each owned object (one with a create in flight once it has ended); what is not paused yet. */
async function pauseOwned(services: OwnerServices, owned: readonly OwnedView[], kind: OwnedKind): Promise<string[]> {
  const waiting: string[] = [];
  for (const object of owned) {
    const { namespace, name } = object.metadata;
    if (object.metadata.annotations[ANNOTATIONS.paused] !== "true") {
      if (object.status.createPending !== undefined) {
        waiting.push(`${kind} ${name} to finish its create`);
        continue;
      }
      await services.owned.patch(kind, namespace, name, {
        metadata: { annotations: { [ANNOTATIONS.paused]: "true" } },
      });
      waiting.push(`${kind} ${name} to pause`);
    } else if (!pausedAndAcknowledged(object)) {
      waiting.push(`${kind} ${name} to pause`);
    }
  }
  return waiting;
}

/**
 * Cluster API paused the owner: no reconciliation, and what it owns pauses too. Block-move goes once all of it
 * has paused. A paused owner being deleted lets go without deleting anything (the owned objects, paused, make no
 * cloud call either).
 */
export async function pausedOwner<O extends ManagedObject>(
  services: OwnerServices,
  pass: OwnerPassBase<O>,
  why: string,
  owned: readonly { kind: OwnedKind; object: OwnedView }[],
  deleting: boolean,
): Promise<Step> {
  if (deleting) return releaseOwner(services, pass, `deleted while paused (${why}): what it owns is left as it is`);
  const waiting: string[] = [];
  for (const kind of new Set(owned.map((entry) => entry.kind))) {
    const ofKind = owned.filter((entry) => entry.kind === kind).map((entry) => entry.object);
    waiting.push(...(await pauseOwned(services, ofKind, kind)));
  }
  if (waiting.length > 0) {
    const message = `pausing (${why}): waiting for ${waiting.join(", ")}`;
    pass.pause = { paused: false, message };
    return {
      ready: undefined,
      reason: REASONS.NotPaused,
      message,
      progressing: true,
      stalled: false,
      outcome: after(services.shortMs),
    };
  }
  if (CLUSTER_API_ANNOTATIONS.blockMove in pass.mr.metadata.annotations) {
    if (!(await patchOwnMetadata(services, pass, { annotations: { [CLUSTER_API_ANNOTATIONS.blockMove]: null } }))) {
      return conflict();
    }
  }
  pass.pause = { paused: true, message: why };
  const message = `paused (${why}): nothing is reconciled and no cloud call is made`;
  return { ready: undefined, reason: REASONS.Paused, message, progressing: false, stalled: false, outcome: DONE };
}

/**
 * Pin a Ready owned object's cloud id in its spec.id: a copy of it without status (clusterctl move, a restore from
 * a backup) then adopts that resource and never creates another. False when the write lost to another writer.
 */
export async function pinCloudId(owned: OwnedAccess, kind: OwnedKind, object: OwnedView): Promise<boolean> {
  const id = object.status.id;
  if (object.spec.id !== undefined || id === undefined || !ownedReady(object)) return true;
  const { namespace, name } = object.metadata;
  return (await owned.patch(kind, namespace, name, { spec: { id } })) === "written";
}

/** Remove our finalizer and say why the object was let go. */
export async function releaseOwner<O extends ManagedObject>(
  services: OwnerServices,
  pass: OwnerPassBase<O>,
  note: string,
): Promise<Step> {
  if (pass.mr.metadata.finalizers.includes(FINALIZER)) {
    const written = await services.writes.setFinalizer(pass.mr, false);
    if (written.type === "conflict") return conflict();
  }
  services.kube.event(pass.mr, "Normal", REASONS.Deleting, note);
  pass.logger.info({ note }, "finalizer removed");
  return RELEASED;
}
