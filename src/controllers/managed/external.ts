// The per-kind seam. A kind file (gpu-vm.ts, gpu-disk.ts, …) talks to the cloud and maps data; the generic
// managed reconciler (reconciler.ts) alone decides what happens next (create, update, delete, wait).
// Every method is idempotent and returns without waiting for a long operation: a mutation answers with the
// cloud operation it started, which the reconciler records in status and polls through the trackers.
import type { Reason } from "../../api/common.ts";
import type { Operation } from "../../cloud/wire.ts";
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
      terminal?: { reason: string; message: string };
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

/**
 * An accepted change. A create answers the operation it started (its intent is `createPending`). Every other
 * change that is not idempotent (START, STOP, RESET, UPDATE, RESIZE, PATCH, DELETE) is handed back unsent, as
 * `send`: the reconciler records its intent in status (`status.actionPending`) first and sends it only once
 * that write is confirmed, so that a failed status write can never make it send the action again.
 */
export interface Mutation {
  operation?: Operation;
  /** The request, not sent yet. */
  send?: () => Promise<Operation>;
  /** Its operation name, as the cloud will report it (looked up after a crash or a lost answer). */
  action?: string;
  /** Status fields of what the action serves (e.g. the reset annotation's value), recorded with its intent. */
  intentFields?: Record<string, string>;
  statusFields?: Record<string, unknown>;
  /** Short note for the event stream ("STOP to change type"). */
  note?: string;
  /** Nothing was sent: the location cannot take the resource now (availability); try the next one. */
  capacityUnavailable?: string;
  /** Nothing was sent: the change cannot be made (a shrink, a type outside its family). */
  refused?: { reason: string; message: string };
  /** Nothing was sent: an input is not there yet and will be (a referenced object becoming Ready). */
  waiting?: string;
  /** Nothing was sent: an input only the user can provide is missing (a Secret key, a referenced object). */
  blocked?: { reason: Reason; message: string };
}

/** Outcome of resolving references and preconditions before touching the cloud. */
export type Resolution =
  | { type: "ready" }
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

export interface ObserveOptions {
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
}

/** The seam every kind implements for one object (bound to one credential's cloud connection). */
export interface ExternalClient<Spec extends ManagedSpecBase> {
  /** Resolve references (other objects, Secrets, ConfigMaps). Never calls the cloud mutating endpoints. */
  resolve(mr: ManagedObject<Spec>, signal: AbortSignal): Promise<Resolution>;
  observe(mr: ManagedObject<Spec>, options: ObserveOptions, signal: AbortSignal): Promise<Observation>;
  /** Look a resource up by its exact cloud name (adoption after a conflict or a lost answer). */
  findByName(cloudName: string, signal: AbortSignal): Promise<FoundResource | undefined>;
  create(mr: ManagedObject<Spec>, target: CreateTarget, signal: AbortSignal): Promise<Mutation>;
  /** One step towards the spec (a VM type change is STOP, then UPDATE, then START across reconciles). */
  update(
    mr: ManagedObject<Spec>,
    observed: Extract<Observation, { exists: true }>,
    signal: AbortSignal,
  ): Promise<Mutation>;
  delete(mr: ManagedObject<Spec>, id: string, signal: AbortSignal): Promise<Mutation>;
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

export interface CreateTarget {
  cloudName: string;
  /** Location chosen from the kind's candidate locations (status.locationIndex), when the kind has one. */
  location?: string;
}
