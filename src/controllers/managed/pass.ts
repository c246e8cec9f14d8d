// What one pass of the managed lifecycle carries (the object, its status draft, the services it may use) and its
// contracts with the outside (the cloud connection, the budgets and capacity queue, the reconciler's options).
// Shared by the lifecycle
// (reconciler.ts) and its steps (creation.ts, existing-resource.ts, deletion.ts, operation-tracking.ts, …).

import type { Logger } from "pino";
import type { QueuePosition } from "../../admission/capacity-queue.ts";
import type { Need } from "../../admission/ledger.ts";
import type { PriceTable } from "../../admission/prices.ts";
import type { Reason } from "../../api/common.ts";
import type { ClaimedKind } from "../../api/gpu-cloud-claim.ts";
import type { Operation } from "../../cloud/wire.ts";
import type { Account } from "../accounts/account.ts";
import type { OperationProgress } from "../accounts/cloud-account.ts";
import type { KubeAccess, WriteResult } from "../core/kube-access.ts";
import type { ReconcileTiming } from "../core/lifecycle.ts";
import type { ManagedObject, ManagedSpecBase, ManagedStatusBase } from "../core/object-model.ts";
import type { Verdict } from "../core/verdict.ts";
import type { Claim, ClaimStore } from "./claims.ts";
import type { ExternalClient, KindSpend } from "./external.ts";

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

export type Reservation =
  /** Reserved (or held already) in every budget that covers the object; or none covers it. */
  | { type: "admitted" }
  /** Short in a budget: the object waits in its line (woken when room frees); `message` says why. */
  | { type: "waiting"; message: string }
  /** The ledger's writers kept conflicting: nothing reserved, try again shortly. */
  | { type: "busy"; message: string };

/** The capacity queue as a create sees it (VM types per location; controllers/budgets/capacity.ts). */
export interface CapacityPort {
  /** Where the object waits, when it does (its status says it waits for capacity); undefined otherwise. */
  position(key: string): QueuePosition | undefined;
  /** Whether it may send its create now (its turn, within the room the last probe found). */
  mayTry(key: string): boolean;
  /** Its create was sent: it takes one unit of room, and the next waiter of this replica is woken. */
  started(key: string): void;
  /** A create there found no capacity (availability, or out_of_stock): no room until the next probe. */
  outOfStock(type: string, location: string): void;
  /** A create there succeeded: where the cloud gives no count, more may go (they are woken). */
  succeeded(type: string, location: string): void;
}

/** Budgets (and the capacity queue) for one kind's objects. */
export interface SpendGuard {
  /** The price table in force (the ConfigMap's overrides over the seed's prices). */
  prices(): PriceTable;
  /**
   * From the cached budgets, without a write: the object is recorded as waiting in a budget that covers it and is
   * not among the waiters that fit now; so it stays waiting (its intent need not be written). Undefined: reserve.
   */
  stillWaiting(mr: ManagedObject, need: Need): Reservation | undefined;
  /** Reserve `need` (the object's whole amount) in every budget that covers it: live reads, guarded writes. */
  reserve(mr: ManagedObject, need: Need): Promise<Reservation>;
  /**
   * The resource is as the spec asks and bills `billing` (undefined: nothing, a stopped VM): its entries follow.
   * Written only when the cached budgets show something else.
   */
  billed(mr: ManagedObject, billing: Need | undefined): Promise<void>;
  /**
   * The object holds nothing and waits for nothing (it is let go, or its create was refused). Never throws: a
   * failed release is logged and left to the budget's sweep (an entry left behind only counts more than is spent).
   */
  release(mr: ManagedObject): Promise<void>;
  /** The capacity queue, for kinds whose creates wait for capacity. */
  capacity?: CapacityPort;
}

/** The guard and the kind's spend, as the reconciler is given them (absent: nothing is guarded). */
export interface SpendWiring<Spec extends ManagedSpecBase> {
  guard: SpendGuard;
  model: KindSpend<Spec>;
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
  /**
   * Budgets and the capacity queue (spend.ts): reservations before the cloud calls that raise spend, releases when
   * it stops. Absent: nothing is guarded (kinds that do not bill, tests).
   */
  spend?: SpendWiring<Spec>;
}

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
  /** Give back what the object holds in budgets, and leave their waiting lines (never throws). */
  releaseSpend(mr: ManagedObject): Promise<void>;
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

export function withDraft<Spec extends ManagedSpecBase>(
  mr: ManagedObject<Spec>,
  draft: ManagedStatusBase,
): ManagedObject<Spec> {
  return { ...mr, status: draft };
}
