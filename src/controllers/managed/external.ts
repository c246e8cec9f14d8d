// The per-kind seam. A kind (kinds/gpu-vm.ts, …) talks to the cloud and maps data; the generic managed reconciler
// (reconciler.ts) alone decides what happens next (create, update, delete, wait). Every answer is data of one of a
// few shapes (discriminated unions): a kind cannot answer two contradictory things at once. What `resolve` found
// is handed back to `observe`, `create` and `update` by the reconciler, so a kind keeps no state between calls.
// Every method is idempotent and returns without waiting for a long operation: a change answers with the cloud
// operation it started (a create), or with the request to send once its intent is recorded (any other change).

import type { z } from "zod";
import type { Need } from "../../admission/ledger.ts";
import type { PriceTable } from "../../admission/prices.ts";
import type { Reason } from "../../api/common.ts";
import type { KindInfo } from "../../api/kind-info.ts";
import type { Operation, OperationFamily } from "../../cloud/wire.ts";
import type { Account } from "../accounts/account.ts";
import type { CloudAccount } from "../accounts/cloud-account.ts";
import type { ManagedObject, ManagedSpecBase } from "../core/object-model.ts";

/** What the cloud looks like for one object, as data. The reconciler picks the branch from it. */
export type Observation =
  | { exists: false }
  | {
      exists: true;
      id: string;
      /** The resource's name in the cloud (what a claim reserves when it is adopted by spec.id). */
      name: string;
      /** The resource is usable (VM running or stopped as asked, disk present, …). */
      ready: boolean;
      /** The cloud matches the spec; false → update(). */
      upToDate: boolean;
      /** In a transitional state that an operation we do not track is moving (wait, do not act). */
      busy?: boolean;
      /** Observed fields copied into status (kind-specific: state, IPs, size, …). */
      atProvider: Record<string, unknown>;
      /** Human-readable difference, for debug logs only. */
      diff?: string;
      /** A terminal problem seen while comparing (e.g. an immutable field changed). */
      terminal?: { reason: Reason; message: string };
      /**
       * The create-only values the resource would be created with now (a GpuVm's image, SSH key, scripts), as
       * digests with where each comes from: compared with the ones it was created with (UpToDate condition).
       * Undefined when they cannot be read now (a Secret gone): nothing is concluded then.
       */
      createOnly?: Record<string, CreateOnlyValue>;
      /**
       * When the cloud created the resource (its created_at, or its CREATE operation's start), when known: a
       * resource found by name is adopted only when it is younger than this object's own create intent.
       */
      createdAt?: string;
      /**
       * The resource's updated_at, when the cloud says it (the cloud's clock): an action recorded before it was
       * sent is known carried out once the resource changed after the value seen before sending.
       */
      updatedAt?: string;
      /**
       * The family snapshots' items this observation was computed from, as the snapshots hold them (identity
       * matters: a snapshot keeps an item's object while its lists show it alike). Only from a kind whose
       * observation reads nothing else from the cloud; see `reread` and quiet-resyncs.ts.
       */
      reads?: readonly object[];
    };

/** An observation of a resource that exists. */
export type Existing = Extract<Observation, { exists: true }>;

/** One create-only value, as a digest (never the value: it may be a secret) and where it comes from. */
export interface CreateOnlyValue {
  digest: string;
  /** `spec.sshPublicKey`, `Secret ns/name key k`, … */
  source: string;
}

/** A resource looked up by its exact cloud name. */
export interface FoundResource {
  id: string;
  /** As Observation.createdAt. */
  createdAt?: string;
}

/** A create the cloud accepted: the operation it started (its intent, `createPending`, was recorded before). */
export interface Started {
  type: "started";
  operation: Operation;
  /** Status fields of what was asked (the cloud name, the location, the create-only values' digests). */
  statusFields?: Record<string, unknown>;
}

/**
 * A change that is not idempotent (START, STOP, RESET, UPDATE, RESIZE, PATCH, DELETE), handed back unsent: the
 * reconciler records its intent in status (`status.actionPending`) first and sends it only once that write is
 * confirmed, so that a failed status write can never make it send the action again.
 */
export interface Action {
  type: "action";
  /** Its operation name, as the cloud will report it (looked up after a crash or a lost answer). */
  action: string;
  /** The request, not sent yet. */
  send(): Promise<Operation>;
  /** Short note for the event stream ("STOP to change type"). */
  note?: string;
  /** Status fields of what the action serves (the reset annotation's value), recorded with its intent. */
  intentFields?: Record<string, string>;
  /**
   * What the object bills once the action is done, when it raises spend (a START, a running VM's change to another
   * type, a disk's growth): reserved in its budgets after the intent, before the request (managed/spend.ts).
   */
  reserve?: Need;
}

/** Nothing to send: the resource is as the spec asks, or only status fields change (a reset acknowledged). */
export interface Unchanged {
  type: "unchanged";
  statusFields?: Record<string, unknown>;
}

/** Nothing was sent: the location cannot take the resource now (availability); the next one is tried. */
export interface CapacityUnavailable {
  type: "capacityUnavailable";
  message: string;
}

/** Nothing was sent: the change cannot be made (a shrink, a type outside its family). */
export interface Refused {
  type: "refused";
  reason: Reason;
  message: string;
}

/** Nothing was sent: an input only the user can provide is missing (a Secret key, a referenced object). */
export interface Blocked {
  type: "blocked";
  reason: Reason;
  message: string;
}

/** What `create` answers. */
export type CreateAnswer = Started | CapacityUnavailable | Blocked;
/** What `update` answers: one step towards the spec. */
export type UpdateAnswer = Unchanged | Action | Refused;

/**
 * Outcome of resolving references and preconditions before touching the cloud: `ready` carries what was resolved
 * (ids of referenced objects, values of Secrets), which the reconciler hands to observe, create and update.
 */
export type Resolution<Resolved> =
  | { type: "ready"; resolved: Resolved }
  /** An input will be there by itself (a referenced object becoming Ready): Reconciling. */
  | { type: "waiting"; message: string }
  /** Only the user can fix it (a reference to something absent or being deleted): Stalled, looked at again. */
  | { type: "blocked"; reason: Reason; message: string }
  | { type: "invalid"; message: string };

/** Why a deletion waits: `needsAction` when only the user can lift it (Stalled), else it lifts by itself. */
export interface DeleteBlocker {
  message: string;
  needsAction: boolean;
}

export interface ObserveOptions<Resolved = unknown> {
  /** Do not trust a snapshot taken before this time (ms since epoch): an operation settled after it. */
  notBefore?: number;
  /** Cloud name to look up when status has no id yet (create pending, adopt, observe-only). */
  cloudName: string;
  /**
   * The family list (at least as fresh as notBefore) is enough: an id it lacks is absent, with no confirming
   * read. Used while following an operation the server cannot show (one request per turn).
   */
  trustList?: boolean;
  /** A change somebody asked for (a spec change): the fresh view is not held back to batch with other reads. */
  urgent?: boolean;
  /**
   * What this pass's `resolve` found; absent when the pass did not resolve (a deletion, an observe-only object,
   * a recorded action looked up first): the observation then compares nothing with the spec.
   */
  resolved?: Resolved;
}

/**
 * The seam every kind implements for one object (bound to one credential's cloud connection). `Resolved` is what
 * `resolve` finds (opaque to the reconciler, which only hands it back).
 */
export interface ExternalClient<Spec extends ManagedSpecBase, Resolved = unknown> {
  /**
   * Resolve references (other objects, Secrets, ConfigMaps). Never calls the cloud mutating endpoints.
   * `cloudName`: the name the resource has, or is created with, in this pass.
   */
  resolve(mr: ManagedObject<Spec>, cloudName: string, signal: AbortSignal): Promise<Resolution<Resolved>>;
  observe(mr: ManagedObject<Spec>, options: ObserveOptions<Resolved>, signal: AbortSignal): Promise<Observation>;
  /** Look a resource up by its exact cloud name (adoption after a conflict or a lost answer). */
  findByName(cloudName: string, signal: AbortSignal): Promise<FoundResource | undefined>;
  create(mr: ManagedObject<Spec>, resolved: Resolved, target: CreateTarget, signal: AbortSignal): Promise<CreateAnswer>;
  /** One step towards the spec (a VM type change is STOP, then UPDATE, then START across reconciles). */
  update(
    mr: ManagedObject<Spec>,
    resolved: Resolved,
    observed: Extract<Observation, { exists: true }>,
    signal: AbortSignal,
  ): Promise<UpdateAnswer>;
  delete(mr: ManagedObject<Spec>, id: string, signal: AbortSignal): Promise<Action>;
  /**
   * Publish what users need to connect (VM connection details) once the resource is ready. Answers a message
   * when it cannot, because the target (a Secret or ConfigMap) exists and is not this object's to write.
   */
  publish?(
    mr: ManagedObject<Spec>,
    observed: Extract<Observation, { exists: true }>,
    signal: AbortSignal,
  ): Promise<string | undefined>;
  /**
   * The items `Observation.reads` names, as the snapshots hold them now (a view no older than the sync period:
   * a staler one is listed again first, as a full pass would). Offered only by a kind whose observation reads
   * nothing from the cloud but those items; the same objects mean a resync would observe the same resource.
   */
  reread?(mr: ManagedObject<Spec>, signal: AbortSignal): Promise<readonly (object | undefined)[]>;
  /** Why deletion must wait (a disk still attached, a network still used), or undefined. */
  deleteBlocker?(mr: ManagedObject<Spec>, observed: Extract<Observation, { exists: true }>): DeleteBlocker | undefined;
}

/** What a kind's objects spend (kinds/gpu-vm.ts, kinds/gpu-disk.ts), priced by the table in force. */
export interface KindSpend<Spec extends ManagedSpecBase> {
  /** What a create of the object's resource will bill: reserved before its POST. */
  create(spec: Spec, prices: PriceTable): Need;
  /** What the resource bills as observed (a running VM, a disk), or undefined (a stopped VM). */
  billing(observed: Existing, prices: PriceTable): Need | undefined;
  /** The capacity queue a create of this object waits in, for kinds that wait for capacity. */
  capacityPair?(spec: Spec, location: string): { type: string; location: string } | undefined;
}

export interface CreateTarget {
  cloudName: string;
  /** Location chosen from the kind's candidate locations (status.locationIndex), when the kind has one. */
  location?: string;
}

/** Read access to Kubernetes objects a kind depends on (informer caches; same namespace only). */
export interface KindDeps {
  /** Another managed object, parsed; undefined when absent or unparseable. */
  managed(kind: string, namespace: string, name: string): ManagedObject | undefined;
  /** Every managed object of a kind in a namespace (deletion order checks). */
  listManaged(kind: string, namespace: string): ManagedObject[];
  /**
   * The object of a kind in a namespace that manages the cloud resource `id` of `projectId` (an index lookup);
   * absent in small tests, where managedByCloudId scans listManaged instead.
   */
  managedById?(kind: string, namespace: string, account: Account, id: string): ManagedObject | undefined;
  /**
   * Sharding: an object of a sharded kind that exists but another replica holds (another shard's): it is being
   * read in for this one (true meanwhile), so that a reference to it waits instead of reporting it missing.
   */
  fetching?(kind: string, namespace: string, name: string): boolean;
  /** The price table in force (the operator's ConfigMap over the seed's prices); the seed's when absent. */
  prices?(): PriceTable;
  /** A key of a Secret or ConfigMap, decoded; undefined when the object or key is absent. */
  dataKey(kind: "Secret" | "ConfigMap", namespace: string, name: string, key: string): string | undefined;
  /**
   * Create or update the Secret/ConfigMap with the connection details, owned by the object (owner reference and
   * label). One that exists and is not owned by the object is never written: the answer says so.
   */
  publish?(
    kind: "Secret" | "ConfigMap",
    owner: ManagedObject,
    name: string,
    data: Record<string, string>,
  ): Promise<string | undefined>;
}

/** A Secret or ConfigMap an object writes (and deletes when it goes). */
export interface OwnedObject {
  kind: "Secret" | "ConfigMap";
  name: string;
}

/** A kind: its API descriptor (names, schemas), its cloud family and how to talk to the cloud about one object. */
export interface KindDefinition<Spec extends ManagedSpecBase, Resolved = unknown> {
  info: KindInfo<z.ZodType, z.ZodType<Spec>, z.ZodType>;
  family: OperationFamily;
  locations(spec: Spec): string[];
  /** Names of objects this one refers to, as `Kind/name` (same namespace): their changes wake it. */
  references(spec: Spec): string[];
  external(account: CloudAccount, deps: KindDeps): ExternalClient<Spec, Resolved>;
  /** The Secrets/ConfigMaps an object of this kind writes (deleted with it when it carries its owner reference). */
  ownedObjects?(spec: Spec): OwnedObject[];
  /** What its objects spend, for kinds whose resources bill (GpuVm, GpuDisk): budgets guard their changes. */
  spend?: KindSpend<Spec>;
}
