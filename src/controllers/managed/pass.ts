// What one pass of the managed lifecycle carries (the object, its status draft, the services it may use) and
// what its steps hand back (a verdict, or RELEASED). Shared by the lifecycle (reconciler.ts) and its
// parts: creation.ts, existing-resource.ts, deletion.ts, operation-tracking.ts, core/status-building.ts.

import type { Logger } from "pino";
import { REASONS, type Reason } from "../../api/common.ts";
import type { ClaimedKind } from "../../api/gpu-cloud-claim.ts";
import type { Operation } from "../../cloud/wire.ts";
import type { Outcome } from "../../runtime/index.ts";
import type { Account } from "../accounts/account.ts";
import type { OperationProgress } from "../accounts/cloud-account.ts";
import { TERMINAL_RETRY_MS, type Verdict } from "../core/classify.ts";
import type { ManagedObject, ManagedSpecBase, ManagedStatusBase } from "../core/object-model.ts";
import type { Claim, ClaimStore } from "./claims.ts";
import type { ExternalClient } from "./external.ts";

/** A working connection to the cloud for one object: credentials resolved, kind client bound. */
export interface CloudConnection<Spec extends ManagedSpecBase> {
  external: ExternalClient<Spec>;
  projectId: string;
  /** The account the credentials name (normalised API URL and project): claims are made in it. */
  account: Account;
  /** The Secret is being deleted, gone or unreadable: its last good credentials serve only deletions. */
  usingCachedCredentials: boolean;
  /** Where the credentials come from, for messages: `Secret ns/name (key apiKey)`. */
  credentialsSource?: string;
  /**
   * A message (with the billing link) when the organization cannot pay, else undefined. Cached per credential;
   * `fresh` reads it again.
   */
  paymentProblem(signal: AbortSignal, options?: { fresh?: boolean }): Promise<string | undefined>;
  /**
   * Where an operation stands; starts tracking it (waking `ownerKey` when it settles) if it is not yet.
   * `startedAt`: its `started_at` as the server gave it, when known (see OperationTracker.track).
   */
  operation(operationId: string, ownerKey: string, startedAt?: string): OperationProgress;
  /**
   * While following an operation the server cannot show: how long until this object's next look at its
   * resource. Turns are spaced one poll interval apart per (account, family), so waiting costs at most one
   * request per interval per family however many objects wait.
   */
  nextFollowTurnMs(): number;
  /**
   * The operations `name` the cloud lists for a resource since about a moment (ms), newest first: what became
   * of an action recorded before it was sent. Empty when none shows (or the server cannot list them).
   */
  findOperations?(resourceId: string, name: string, sinceMs: number, signal: AbortSignal): Promise<Operation[]>;
}

/** `missing`: no usable credentials (reason CredentialsMissing unless told, e.g. ApiUrlNotAllowed); stalls. */
export type Connect<Spec extends ManagedSpecBase> = (
  mr: ManagedObject<Spec>,
  signal: AbortSignal,
) => Promise<
  { type: "connected"; connection: CloudConnection<Spec> } | { type: "missing"; message: string; reason?: Reason }
>;

/**
 * A guarded write: written, lost to another writer (409: re-read), gone, or refused (the API server rejected it,
 * or a value in it does not fit the CRD and cannot be shortened): `invalid` is a bug to report, never retried.
 */
export type WriteResult =
  | { type: "written"; resourceVersion: string }
  | { type: "conflict" }
  | { type: "gone" }
  | { type: "invalid"; message: string };

/** What the reconciler needs from Kubernetes (adapted onto the runtime in index.ts; plain fakes in tests). */
export interface KubeAccess {
  /** The object from the informer cache, unparsed. */
  get(namespace: string, name: string): unknown;
  writeStatus(mr: ManagedObject, status: ManagedStatusBase): Promise<WriteResult>;
  setFinalizer(mr: ManagedObject, present: boolean): Promise<WriteResult>;
  event(mr: ManagedObject, type: "Normal" | "Warning", reason: string, note: string): void;
}

export interface ManagedReconcilerOptions<Spec extends ManagedSpecBase> {
  /** The kind reconciled (its claims name it: claims.ts). */
  kind: ClaimedKind;
  /** Parse an informer object; a message when its spec is invalid. */
  parse(
    raw: unknown,
  ): { ok: true; object: ManagedObject<Spec> } | { ok: false; object?: ManagedObject; message: string };
  /** Candidate locations in order (empty for kinds without a location). */
  locations(spec: Spec): string[];
  kube: KubeAccess;
  connect: Connect<Spec>;
  now?: () => number;
  timing?: Partial<ReconcileTiming>;
  /** Called with the keys an object refers to, so that a change of a target wakes its dependents. */
  onReconciled?(mr: ManagedObject<Spec>): void;
  /** The object is let go (its finalizer is about to be removed): delete what it wrote (connection details). */
  onReleased?(mr: ManagedObject<Spec>): Promise<void>;
  /** Who manages which cloud resource (GpuCloudClaims, claims.ts). */
  claims: ClaimStore;
  /** Where the claims live (for messages that tell an administrator which claim to look at). */
  claimNamespace?: string;
  /** Whether an Observe object may mirror a resource that an object of another namespace manages. */
  allowCrossNamespaceObserve?: boolean;
  /**
   * Fit a status to the kind's CRD schema in place (status-limits.ts); returns what could not be fitted.
   * Every status write goes through it. Without it (tests), statuses are written as drafted.
   */
  fitStatus?(status: ManagedStatusBase): string[];
}

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
  // --leader-election-lease-duration (15 s) + --api-timeout (10 s) by default; index.ts passes the flags'.
  intentHoldMs: 25_000,
};

/**
 * An action this process sent: its operation, or how its request ended without one (`answered`: the server
 * answered an error, so it had finished with the request; else the answer was lost or timed out).
 */
export type SentAction = { requestedAt: string } & ({ operation: Operation } | { answered: boolean });

/** What the steps of a pass may use besides the cloud connection: Kubernetes (guarded writes), time, options. */
export interface PassServices<Spec extends ManagedSpecBase> {
  options: ManagedReconcilerOptions<Spec>;
  timing: ReconcileTiming;
  now(): number;
  /**
   * Status write through the guarded Kubernetes access, fitted to the CRD first (in place); a success moves
   * `mr` to the version it made. A value that cannot be fitted makes it `invalid` without a request.
   */
  writeStatus(mr: ManagedObject, status: ManagedStatusBase): Promise<WriteResult>;
  /** Fit a status to the CRD in place; what could not be fitted. */
  fit(status: ManagedStatusBase): string[];
  /** key → the last action this process sent (found again without a cloud call when status missed it). */
  sentActions: Map<string, SentAction>;
  setFinalizer(mr: ManagedObject, present: boolean): Promise<WriteResult>;
  claims: ClaimStore;
  releaseClaim(mr: ManagedObject): Promise<void>;
  /** key → since when (ms) the resource its claim names has been missing from every read. */
  missingSince: Map<string, { id: string; sinceMs: number }>;
}

/** One reconcile of one object: the object as read, the status being drafted, and what the steps may use. */
export interface Pass<Spec extends ManagedSpecBase> {
  mr: ManagedObject<Spec>;
  draft: ManagedStatusBase;
  key: string;
  cloudName: string;
  signal: AbortSignal;
  logger: Logger;
  services: PassServices<Spec>;
  /** Where this pass's credentials come from (set once connected), for messages. */
  credentialsSource?: string;
  /** The claim this object holds (ownership.ts reconcileClaim), once connected. */
  claim?: Claim;
  /** The UpToDate condition this pass found (create-only values), written with whatever verdict ends it. */
  upToDate?: Verdict["upToDate"];
  /** The snapshot items this pass's observation was computed from (Observation.reads; quiet-resyncs.ts). */
  reads?: readonly object[];
  /** The observed resource's updated_at (Observation.updatedAt), recorded with an action's intent. */
  observedUpdatedAt?: string;
}

/** The object is released (finalizer removed or never held): no status to write. */
export const RELEASED = Symbol("released");
export type Step = Verdict | typeof RELEASED;

export function verdict(
  reason: Reason,
  message: string,
  outcome: Outcome,
  flags: { ready?: boolean; progressing?: boolean; stalled?: boolean; event?: "Normal" | "Warning" } = {},
): Verdict {
  return {
    ready: flags.ready ?? false,
    reason,
    message,
    progressing: flags.progressing ?? false,
    stalled: flags.stalled ?? false,
    outcome,
    ...(flags.event ? { event: flags.event } : {}),
  };
}

export const after = (ms: number): Outcome => ({ type: "requeueAfter", ms });

/** Nothing to poll: the runtime resyncs the key after its sync period (jittered, per-object annotation). */
export const DONE: Outcome = { type: "done" };

/** A Kubernetes 409 on our own write: the cache is behind. Requeue silently; the next pass re-reads. */
export function conflict(): Verdict {
  return { ...verdict(REASONS.Updating, "", after(0)), silent: true };
}

export function withDraft<Spec extends ManagedSpecBase>(
  mr: ManagedObject<Spec>,
  draft: ManagedStatusBase,
): ManagedObject<Spec> {
  return { ...mr, status: draft };
}

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
    options: { kube: Pick<KubeAccess, "event">; onReleased?(mr: ManagedObject): Promise<void> };
  };
}
