// The one lifecycle every kind shares (crossplane's managed reconciler, split into helpers that return a
// verdict). Order: read → paused? → orphan/observe deletion → credentials → operation in flight → references →
// observe → delete | finalizer → create | update → ready. Conditions, events and status are written in
// `finish()` only, once per reconcile and only when they changed. No worker ever waits on a cloud operation:
// the operation id goes into status, trackers wake the key, and a fallback requeue covers lost wake-ups.
import { isDeepStrictEqual } from "node:util";
import type { Logger } from "pino";
import { ANNOTATIONS, cloudNameOf, FINALIZER, MAX_OPERATION_HISTORY } from "../api/common.ts";
import type { Operation } from "../cloud/wire.ts";
import { parseDuration } from "../runtime/index.ts";
import {
  classify,
  cloudStatus,
  isCloudConflict,
  isCloudNotFound,
  REASON,
  type Reason,
  TERMINAL_REASONS,
  type Verdict,
} from "./classify.ts";
import type {
  Condition,
  ExternalClient,
  ManagedObject,
  ManagedSpecBase,
  ManagedStatusBase,
  Observation,
  Outcome,
} from "./external.ts";

export type Existing = Extract<Observation, { exists: true }>;

/** Progress of a cloud operation as the per-credential trackers know it. */
export type OperationProgress =
  | { state: "pending" }
  | { state: "settled"; operation: Operation; settledAt: number }
  | { state: "vanished"; settledAt: number };

/** A working connection to the cloud for one object: credentials resolved, kind client bound. */
export interface CloudConnection<Spec extends ManagedSpecBase> {
  external: ExternalClient<Spec>;
  projectId: string;
  /** The Secret could not be read; the last good credentials of it are in use. */
  usingCachedCredentials: boolean;
  /**
   * A message (with the billing link) when the organization cannot pay, else undefined. Cached per credential;
   * `fresh` reads it again.
   */
  paymentProblem(signal: AbortSignal, options?: { fresh?: boolean }): Promise<string | undefined>;
  /** Where an operation stands; starts tracking it (waking `ownerKey` when it settles) if it is not yet. */
  operation(operationId: string, ownerKey: string): OperationProgress;
}

export type Connect<Spec extends ManagedSpecBase> = (
  mr: ManagedObject<Spec>,
  signal: AbortSignal,
) => Promise<{ type: "connected"; connection: CloudConnection<Spec> } | { type: "missing"; message: string }>;

export type WriteResult = { type: "written"; resourceVersion: string } | { type: "conflict" } | { type: "gone" };

/** What the reconciler needs from Kubernetes (adapted onto the runtime in index.ts; plain fakes in tests). */
export interface KubeAccess {
  /** The object from the informer cache, unparsed. */
  get(namespace: string, name: string): unknown;
  writeStatus(mr: ManagedObject, status: ManagedStatusBase): Promise<WriteResult>;
  setFinalizer(mr: ManagedObject, present: boolean): Promise<WriteResult>;
  event(mr: ManagedObject, type: "Normal" | "Warning", reason: string, note: string): void;
}

export interface ManagedReconcilerOptions<Spec extends ManagedSpecBase> {
  kind: string;
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
}

const DEFAULT_TIMING: ReconcileTiming = {
  terminalRetryMs: 10 * 60_000,
  capacityRetryMs: 60_000,
  operationFallbackMs: 15_000,
  createGraceMs: 30_000,
  shortMs: 2_000,
  dependencyMs: 30_000,
};

export interface ReconcileRequest {
  namespace: string;
  name: string;
}

export interface ReconcileContext {
  signal: AbortSignal;
  logger: Logger;
}

/** The object's `gpucloud.dev/sync-period` in ms; undefined when absent or not a positive duration. */
function syncPeriodOf(mr: ManagedObject): number | undefined {
  const annotation = mr.metadata.annotations[ANNOTATIONS.syncPeriod];
  if (annotation === undefined) return undefined;
  try {
    const ms = parseDuration(annotation);
    return ms > 0 ? ms : undefined;
  } catch {
    return undefined;
  }
}

/** The object is released (finalizer removed or never held): no status to write. */
const RELEASED = Symbol("released");
type Step = Verdict | typeof RELEASED;

interface Pass<Spec extends ManagedSpecBase> {
  mr: ManagedObject<Spec>;
  draft: ManagedStatusBase;
  key: string;
  cloudName: string;
  signal: AbortSignal;
  logger: Logger;
}

function verdict(
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

const after = (ms: number): Outcome => ({ type: "requeueAfter", ms });
const keyOf = (mr: ManagedObject): string => `${mr.metadata.namespace}/${mr.metadata.name}`;

/** Kubernetes writes metav1.Time (condition lastTransitionTime) at whole seconds: RFC 3339 without a fraction. */
export function formatKubeTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/**
 * What our own writes did to one object: every resourceVersion they replaced and the one the last write made.
 * A pass can write several times (finalizer, create intent, final status), and the watch event of each write
 * wakes the key; a cache still at any replaced version has not seen all of our writes yet.
 */
interface OwnWrites {
  superseded: Set<string>;
  last: string;
}
/** Nothing to poll: the runtime resyncs the key after its sync period (jittered, per-object annotation). */
const DONE: Outcome = { type: "done" };

export class ManagedReconciler<Spec extends ManagedSpecBase> {
  readonly #options: ManagedReconcilerOptions<Spec>;
  readonly #timing: ReconcileTiming;
  readonly #now: () => number;
  /** key → the versions our writes replaced and the last one they made (to recognise a cache not caught up). */
  readonly #ownWrites = new Map<string, OwnWrites>();

  constructor(options: ManagedReconcilerOptions<Spec>) {
    this.#options = options;
    this.#timing = { ...DEFAULT_TIMING, ...options.timing };
    this.#now = options.now ?? Date.now;
  }

  async reconcile(request: ReconcileRequest, ctx: ReconcileContext): Promise<Outcome> {
    const key = `${request.namespace}/${request.name}`;
    const raw = this.#options.kube.get(request.namespace, request.name);
    if (raw === undefined) {
      this.#ownWrites.delete(key);
      return { type: "done" };
    }
    const parsed = this.#options.parse(raw);
    const cachedVersion = parsed.object?.metadata.resourceVersion ?? "";
    const own = this.#ownWrites.get(key);
    if (own?.superseded.has(cachedVersion)) {
      // The cache shows the object as it was before (or between) our last pass's writes: acting on it would
      // repeat work (a second POST, a 409, an adoption of our own create). The watch event of our last write
      // wakes the key; this is only the fallback.
      ctx.logger.debug({ cachedVersion, waitingFor: own.last }, "cache behind our own write");
      return after(this.#timing.shortMs * 5);
    }
    // At our last version, or at a later one somebody else wrote (our writes are guarded by resourceVersion, so
    // no foreign version falls between them): caught up.
    this.#ownWrites.delete(key);
    return this.#reconcileParsed(parsed, key, ctx);
  }

  /** Status write through the guarded Kubernetes access; a success moves `mr` to the version it made. */
  async #writeStatus(mr: ManagedObject, status: ManagedStatusBase): Promise<WriteResult> {
    const written = await this.#options.kube.writeStatus(mr, status);
    if (written.type === "written") this.#advance(mr, written.resourceVersion);
    return written;
  }

  async #setFinalizer(mr: ManagedObject, present: boolean): Promise<WriteResult> {
    const written = await this.#options.kube.setFinalizer(mr, present);
    if (written.type === "written") this.#advance(mr, written.resourceVersion);
    return written;
  }

  /** Remember that our write replaced the object's current version (see OwnWrites). */
  #advance(mr: ManagedObject, version: string): void {
    const from = mr.metadata.resourceVersion;
    if (version === from) return; // "unchanged": nothing was written
    const key = keyOf(mr);
    const own = this.#ownWrites.get(key) ?? { superseded: new Set<string>(), last: version };
    own.superseded.add(from);
    own.last = version;
    this.#ownWrites.set(key, own);
    mr.metadata.resourceVersion = version;
  }

  async #reconcileParsed(
    parsed: ReturnType<ManagedReconcilerOptions<Spec>["parse"]>,
    key: string,
    ctx: ReconcileContext,
  ): Promise<Outcome> {
    if (!parsed.ok) {
      if (parsed.object === undefined) return { type: "terminal", error: new Error(parsed.message) };
      const draft = structuredClone(parsed.object.status);
      const invalid = verdict(REASON.InvalidSpec, parsed.message, DONE, {
        stalled: true,
        event: "Warning",
      });
      return this.#finish(parsed.object, draft, invalid, ctx.logger);
    }
    const mr = parsed.object;
    const pass: Pass<Spec> = {
      mr,
      draft: structuredClone(mr.status),
      key,
      cloudName: mr.status.createPending?.cloudName ?? cloudNameOf(mr),
      signal: ctx.signal,
      logger: ctx.logger,
    };
    let step: Step;
    try {
      step = await this.#lifecycle(pass);
    } catch (error) {
      step = classify(error);
      ctx.logger.debug({ err: error, reason: step.reason }, "reconcile failed");
    }
    if (step === RELEASED) return { type: "done" };
    this.#options.onReconciled?.(mr);
    return this.#finish(mr, pass.draft, step, ctx.logger);
  }

  async #lifecycle(pass: Pass<Spec>): Promise<Step> {
    const { mr } = pass;
    const deleting = mr.metadata.deletionTimestamp !== undefined;
    const holdsFinalizer = mr.metadata.finalizers.includes(FINALIZER);
    if (deleting && !holdsFinalizer) return RELEASED;
    if (mr.metadata.annotations[ANNOTATIONS.paused] === "true") return this.#paused(pass, deleting);
    if (deleting && (mr.spec.deletionPolicy === "Orphan" || mr.spec.managementPolicy === "Observe")) {
      return this.#release(pass, "Normal", "the cloud resource is kept (deletionPolicy Orphan or Observe)");
    }
    const stall = this.#stillStalled(pass, deleting);
    if (stall !== undefined) return stall;

    const connected = await this.#options.connect(mr, pass.signal);
    if (connected.type === "missing") {
      const untouched = pass.draft.id === undefined && pass.draft.createPending === undefined;
      if (deleting && untouched) return this.#release(pass, "Normal", "no cloud resource was ever created");
      // Deleting needs the credentials too; say how else to let the object go.
      const message = deleting
        ? `${connected.message}; the cloud resource cannot be deleted without them (or set deletionPolicy: Orphan to keep it and release the object)`
        : connected.message;
      pass.draft.lastError = message;
      return verdict(REASON.CredentialsMissing, message, after(this.#timing.dependencyMs), {
        stalled: true,
        event: "Warning",
      });
    }
    pass.draft.projectId = connected.connection.projectId;
    return this.#withConnection(pass, connected.connection, deleting, holdsFinalizer);
  }

  /** Credentials are good: settle the operation in flight, resolve references, observe, then act. */
  async #withConnection(
    pass: Pass<Spec>,
    connection: CloudConnection<Spec>,
    deleting: boolean,
    holdsFinalizer: boolean,
  ): Promise<Step> {
    const { mr } = pass;
    const settled = this.#settleOperation(pass, connection);
    if (settled.verdict !== undefined) return settled.verdict;
    if (settled.failure !== undefined) return this.#handleFailedOperation(pass, connection, settled.failure);

    // An object with its own (shorter) sync period is checked against a list at most that old: the shared
    // snapshot may otherwise be as old as --sync-period, and drift would go unseen at the object's resyncs.
    const ownPeriodMs = syncPeriodOf(mr);
    const periodic = ownPeriodMs !== undefined ? this.#now() - ownPeriodMs : undefined;
    if (mr.spec.managementPolicy === "Observe") return this.#mirror(pass, connection, settled.notBefore ?? periodic);
    if (!deleting) {
      const waiting = await this.#resolve(pass, connection);
      if (waiting !== undefined) return waiting;
    }
    // A spec change of an existing resource is compared against a fresh list (coalesced with other keys), not
    // the periodic snapshot. A new object needs none: a create under its deterministic name cannot duplicate.
    const specChanged = mr.status.observedGeneration !== mr.metadata.generation && pass.draft.id !== undefined;
    // A resource last seen in transition is looked at afresh too, or it would wait for the next periodic list.
    const lastReason = mr.status.conditions?.find((c) => c.type === "Ready")?.reason;
    const inTransition =
      pass.draft.id !== undefined && (lastReason === REASON.WaitingForOperation || lastReason === REASON.Creating);
    const notBefore = settled.notBefore ?? (specChanged || inTransition ? this.#now() : periodic);
    const observed = await connection.external.observe(
      this.#withDraft(mr, pass.draft),
      { cloudName: pass.cloudName, ...(notBefore !== undefined ? { notBefore } : {}) },
      pass.signal,
    );
    if (deleting) return this.#delete(pass, connection, observed);
    if (!holdsFinalizer) {
      const written = await this.#setFinalizer(mr, true);
      if (written.type !== "written") return this.#conflict();
    }
    if (!observed.exists) return this.#absent(pass, connection);
    return this.#present(pass, connection, observed);
  }

  /** References and inputs (other objects, Secrets, ConfigMaps) must be there before the cloud is touched. */
  async #resolve(pass: Pass<Spec>, connection: CloudConnection<Spec>): Promise<Verdict | undefined> {
    const resolution = await connection.external.resolve(pass.mr, pass.signal);
    if (resolution.type === "waiting") {
      return verdict(REASON.WaitingForDependency, resolution.message, after(this.#timing.dependencyMs), {
        progressing: true,
      });
    }
    if (resolution.type === "invalid") {
      return verdict(REASON.InvalidSpec, resolution.message, DONE, {
        stalled: true,
        event: "Warning",
      });
    }
    return undefined;
  }

  /** Paused: no cloud call at all. Deleting a paused object releases it and says what was left behind. */
  async #paused(pass: Pass<Spec>, deleting: boolean): Promise<Step> {
    if (deleting) {
      const leftBehind = pass.mr.spec.deletionPolicy !== "Orphan" && pass.draft.id !== undefined;
      const note = leftBehind
        ? `paused object deleted: cloud resource ${pass.draft.id} was left behind (no cloud call while paused)`
        : "paused object deleted without a cloud call";
      return this.#release(pass, leftBehind ? "Warning" : "Normal", note);
    }
    return {
      ready: undefined,
      reason: REASON.Paused,
      message: `${ANNOTATIONS.paused} is "true": no cloud calls`,
      progressing: false,
      stalled: false,
      outcome: { type: "done" },
    };
  }

  async #release(pass: Pass<Spec>, type: "Normal" | "Warning", note: string): Promise<Step> {
    if (pass.mr.metadata.finalizers.includes(FINALIZER)) {
      const written = await this.#setFinalizer(pass.mr, false);
      if (written.type === "conflict") return this.#conflict();
    }
    this.#options.kube.event(pass.mr, type, REASON.Deleting, note);
    pass.logger.info({ note }, "finalizer removed");
    return RELEASED;
  }

  /** A terminal stall stays put until the spec changes or a long backoff passes: no hot loop. */
  #stillStalled(pass: Pass<Spec>, deleting: boolean): Verdict | undefined {
    if (pass.mr.status.observedGeneration !== pass.mr.metadata.generation) return undefined;
    const stalledCondition = pass.mr.status.conditions?.find((c) => c.type === "Stalled");
    if (stalledCondition?.status !== "True") return undefined;
    // A stall from before the deletion must not delay it; a NotSupported met while deleting holds. (The
    // deletion timestamp has whole seconds: a stall counts as "while deleting" from the next second on.)
    if (deleting) {
      const deletedAt = Date.parse(pass.mr.metadata.deletionTimestamp ?? "");
      const stalledAt = Date.parse(stalledCondition.lastTransitionTime);
      if (stalledCondition.reason !== REASON.NotSupported || !(stalledAt >= deletedAt + 1000)) return undefined;
    }
    // Capacity is retried on a timer: the location walk rewrites status, and our own write must not restart it.
    const retryMs = TERMINAL_REASONS.has(stalledCondition.reason)
      ? this.#timing.terminalRetryMs
      : stalledCondition.reason === REASON.CapacityUnavailable
        ? this.#timing.capacityRetryMs
        : undefined;
    if (retryMs === undefined) return undefined;
    const since = Date.parse(stalledCondition.lastTransitionTime);
    const waited = Number.isNaN(since) ? Number.POSITIVE_INFINITY : this.#now() - since;
    const remaining = retryMs - waited;
    if (remaining <= 0) return undefined;
    return verdict(stalledCondition.reason as Reason, stalledCondition.message, after(remaining), { stalled: true });
  }

  /** Move a finished operation from "in flight" to history; a still running one ends this reconcile. */
  #settleOperation(
    pass: Pass<Spec>,
    connection: CloudConnection<Spec>,
  ): { verdict?: Verdict; notBefore?: number; failure?: { code: string; message: string } } {
    const current = pass.draft.operation;
    if (current === undefined || current.state !== "IN_PROGRESS") return {};
    const progress = connection.operation(current.id, pass.key);
    if (progress.state === "pending") {
      const reason = current.name === "DELETE" ? REASON.Deleting : REASON.WaitingForOperation;
      return {
        verdict: verdict(
          reason,
          `waiting for ${current.name} operation ${current.id}`,
          after(this.#timing.operationFallbackMs),
          {
            progressing: true,
            ready: this.#wasReady(pass.mr),
          },
        ),
      };
    }
    const final =
      progress.state === "settled"
        ? { ...current, state: progress.operation.state, completedAt: progress.operation.completed_at }
        : { ...current, state: "SUCCEEDED", completedAt: "" };
    pass.draft.operation = final;
    pass.draft.operations = [final, ...(pass.draft.operations ?? []).filter((o) => o.id !== final.id)].slice(
      0,
      MAX_OPERATION_HISTORY,
    );
    if (final.name === "CREATE" && final.state === "SUCCEEDED") delete pass.draft.createPending;
    if (progress.state === "settled" && progress.operation.state === "FAILED") {
      const message = failureText(progress.operation);
      pass.draft.lastError = message;
      return { notBefore: progress.settledAt, failure: { code: failureCode(progress.operation), message } };
    }
    return { notBefore: progress.settledAt };
  }

  async #handleFailedOperation(
    pass: Pass<Spec>,
    connection: CloudConnection<Spec>,
    { code, message }: { code: string; message: string },
  ): Promise<Verdict> {
    if (pass.draft.operation?.name === "CREATE") {
      delete pass.draft.createPending;
      delete pass.draft.id;
      if (code === "already_exists") {
        const id = await connection.external.findByName(pass.cloudName, pass.signal);
        if (id !== undefined) return this.#adopt(pass, id);
        return verdict(REASON.NameConflict, message, after(this.#timing.shortMs), { progressing: true });
      }
      if (code === "out_of_stock") return this.#nextLocation(pass, message);
    }
    if (code === "out_of_stock") {
      return verdict(
        REASON.CapacityUnavailable,
        message,
        { type: "retry", error: new Error(message) },
        {
          stalled: true,
          event: "Warning",
        },
      );
    }
    return verdict(REASON.OperationFailed, message, DONE, { stalled: true, event: "Warning" });
  }

  #nextLocation(pass: Pass<Spec>, message: string): Verdict {
    const locations = this.#options.locations(pass.mr.spec);
    const index = (pass.draft.locationIndex ?? 0) + 1;
    if (index < locations.length) {
      pass.draft.locationIndex = index;
      return verdict(REASON.CapacityUnavailable, `${message}; trying location ${locations[index]}`, after(0), {
        progressing: true,
        event: "Warning",
      });
    }
    pass.draft.locationIndex = 0;
    const all = locations.length > 0 ? ` in ${locations.join(", ")}` : "";
    return verdict(REASON.CapacityUnavailable, `no capacity${all}: ${message}`, after(this.#timing.capacityRetryMs), {
      stalled: true,
      event: "Warning",
    });
  }

  async #adopt(pass: Pass<Spec>, id: string): Promise<Verdict> {
    pass.draft.id = id;
    delete pass.draft.createPending;
    this.#options.kube.event(
      pass.mr,
      "Normal",
      REASON.Creating,
      `adopted cloud resource ${id} named ${pass.cloudName}`,
    );
    return verdict(REASON.Creating, `adopted ${id}`, after(0), { progressing: true });
  }

  /** managementPolicy Observe: mirror the cloud into status; never write to it. */
  async #mirror(pass: Pass<Spec>, connection: CloudConnection<Spec>, notBefore?: number): Promise<Verdict> {
    const observed = await connection.external.observe(
      pass.mr,
      { cloudName: pass.cloudName, ...(notBefore !== undefined ? { notBefore } : {}) },
      pass.signal,
    );
    if (!observed.exists) {
      const what = pass.mr.spec.id ?? pass.cloudName;
      return verdict(REASON.Observed, `no cloud resource ${what} to observe`, after(this.#timing.dependencyMs));
    }
    Object.assign(pass.draft, observed.atProvider);
    pass.draft.id = observed.id;
    return verdict(REASON.Observed, "observing the cloud resource (no changes are made)", DONE, {
      ready: observed.ready,
    });
  }

  async #delete(pass: Pass<Spec>, connection: CloudConnection<Spec>, observed: Observation): Promise<Step> {
    if (!observed.exists) return this.#release(pass, "Normal", "cloud resource deleted");
    const blocker = connection.external.deleteBlocker?.(pass.mr, observed);
    if (blocker !== undefined) {
      return verdict(REASON.WaitingForDependency, blocker, after(this.#timing.shortMs * 5), { progressing: true });
    }
    if (observed.busy) {
      return verdict(
        REASON.Deleting,
        "waiting for the resource to settle before deleting",
        after(this.#timing.shortMs),
        {
          progressing: true,
        },
      );
    }
    try {
      const mutation = await connection.external.delete(pass.mr, observed.id, pass.signal);
      if (mutation.operation === undefined) return this.#release(pass, "Normal", "cloud resource deleted");
      this.#record(pass, connection, mutation.operation);
      pass.logger.info({ id: observed.id, operation: mutation.operation.operation_id }, "delete requested");
      return verdict(REASON.Deleting, `deleting ${observed.id}`, after(this.#timing.operationFallbackMs), {
        progressing: true,
        event: "Normal",
      });
    } catch (error) {
      if (isCloudNotFound(error)) return this.#release(pass, "Normal", "cloud resource already gone");
      if (isCloudConflict(error)) {
        const text = error instanceof Error ? error.message : String(error);
        return verdict(REASON.WaitingForDependency, text, after(this.#timing.shortMs * 5), { progressing: true });
      }
      throw error;
    }
  }

  async #absent(pass: Pass<Spec>, connection: CloudConnection<Spec>): Promise<Verdict> {
    const { mr, draft } = pass;
    if (mr.spec.id !== undefined) {
      return verdict(REASON.InvalidSpec, `cloud resource ${mr.spec.id} (spec.id) does not exist`, DONE, {
        stalled: true,
        event: "Warning",
      });
    }
    if (draft.id !== undefined && this.#withinCreateGrace(draft)) {
      return verdict(REASON.Creating, `waiting for ${draft.id} to become readable`, after(this.#timing.shortMs), {
        progressing: true,
      });
    }
    if (draft.id !== undefined) {
      this.#options.kube.event(mr, "Warning", REASON.Creating, `cloud resource ${draft.id} is gone; creating it again`);
      delete draft.id;
    }
    return this.#create(pass, connection);
  }

  #withinCreateGrace(draft: ManagedStatusBase): boolean {
    const create = (draft.operations ?? []).find((o) => o.name === "CREATE" && o.state === "SUCCEEDED");
    if (create?.completedAt === undefined || create.completedAt === "") return false;
    const completed = Date.parse(create.completedAt);
    return !Number.isNaN(completed) && this.#now() - completed < this.#timing.createGraceMs;
  }

  /**
   * The payment method may have gone since it was last read (it is cached): a create refused with 403 is read
   * as PaymentMethodRequired when the organization says so, not as invalid credentials.
   */
  async #paymentRefusal(
    pass: Pass<Spec>,
    connection: CloudConnection<Spec>,
    error: unknown,
  ): Promise<Verdict | undefined> {
    if (cloudStatus(error) !== 403) return undefined;
    const problem = await connection.paymentProblem(pass.signal, { fresh: true });
    if (problem === undefined) return undefined;
    delete pass.draft.createPending;
    return verdict(REASON.PaymentMethodRequired, problem, after(this.#timing.dependencyMs * 2), {
      stalled: true,
      event: "Warning",
    });
  }

  async #create(pass: Pass<Spec>, connection: CloudConnection<Spec>): Promise<Verdict> {
    const { mr, draft } = pass;
    const paymentProblem = await connection.paymentProblem(pass.signal);
    if (paymentProblem !== undefined) {
      return verdict(REASON.PaymentMethodRequired, paymentProblem, after(this.#timing.dependencyMs * 2), {
        stalled: true,
        event: "Warning",
      });
    }
    const locations = this.#options.locations(mr.spec);
    const location = locations[draft.locationIndex ?? 0] ?? locations[0];
    const intent = draft.createPending;
    if (intent === undefined || intent.cloudName !== pass.cloudName || intent.location !== location) {
      // The intent is written and confirmed before the POST: a crash after it makes the next pass look up the
      // name first instead of creating a second resource.
      draft.createPending = {
        cloudName: pass.cloudName,
        ...(location !== undefined ? { location } : {}),
        requestedAt: new Date(this.#now()).toISOString(),
      };
      const written = await this.#writeStatus(mr, draft);
      if (written.type !== "written") return this.#conflict();
      mr.status = structuredClone(draft);
    } else {
      const existing = await connection.external.findByName(pass.cloudName, pass.signal);
      if (existing !== undefined) return this.#adopt(pass, existing);
    }
    try {
      const target = { cloudName: pass.cloudName, ...(location !== undefined ? { location } : {}) };
      const mutation = await connection.external.create(mr, target, pass.signal);
      if (mutation.capacityUnavailable !== undefined) {
        delete draft.createPending;
        return this.#nextLocation(pass, mutation.capacityUnavailable);
      }
      if (mutation.refused !== undefined) {
        return verdict(mutation.refused.reason as Reason, mutation.refused.message, DONE, {
          stalled: true,
          event: "Warning",
        });
      }
      if (mutation.operation === undefined)
        return verdict(REASON.Creating, "create requested", after(this.#timing.shortMs), { progressing: true });
      draft.id = mutation.operation.metadata.id;
      Object.assign(draft, mutation.statusFields);
      this.#record(pass, connection, mutation.operation);
      pass.logger.info({ id: draft.id, location, operation: mutation.operation.operation_id }, "create requested");
      return verdict(
        REASON.Creating,
        `creating ${pass.cloudName}${location ? ` in ${location}` : ""}`,
        after(this.#timing.operationFallbackMs),
        {
          progressing: true,
          event: "Normal",
        },
      );
    } catch (error) {
      const refused = await this.#paymentRefusal(pass, connection, error);
      if (refused !== undefined) return refused;
      if (!isCloudConflict(error)) throw error;
      // The name is ours (deterministic): a conflict means an earlier create went through. Adopt it.
      const id = await connection.external.findByName(pass.cloudName, pass.signal);
      if (id !== undefined) return this.#adopt(pass, id);
      return verdict(
        REASON.NameConflict,
        `name ${pass.cloudName} is in use but not readable yet`,
        after(this.#timing.shortMs),
        {
          progressing: true,
        },
      );
    }
  }

  async #present(pass: Pass<Spec>, connection: CloudConnection<Spec>, observed: Existing): Promise<Verdict> {
    const { mr, draft } = pass;
    draft.id = observed.id;
    delete draft.createPending;
    Object.assign(draft, observed.atProvider);
    if (observed.terminal !== undefined) {
      return verdict(observed.terminal.reason as Reason, observed.terminal.message, DONE, {
        stalled: true,
        event: "Warning",
        ready: false,
      });
    }
    if (observed.busy) {
      return verdict(REASON.WaitingForOperation, "the cloud resource is in transition", after(this.#timing.shortMs), {
        progressing: true,
      });
    }
    if (!observed.upToDate) {
      pass.logger.debug({ diff: observed.diff }, "not up to date");
      const mutation = await connection.external.update(this.#withDraft(mr, draft), observed, pass.signal);
      Object.assign(draft, mutation.statusFields);
      if (mutation.refused !== undefined) {
        return verdict(mutation.refused.reason as Reason, mutation.refused.message, DONE, {
          stalled: true,
          event: "Warning",
          ready: observed.ready,
        });
      }
      if (mutation.operation !== undefined) {
        this.#record(pass, connection, mutation.operation);
        const note = mutation.note ?? `${mutation.operation.metadata.operation_name} requested`;
        this.#options.kube.event(mr, "Normal", REASON.Updating, note);
        pass.logger.info({ id: observed.id, operation: mutation.operation.operation_id, note }, "update requested");
        return verdict(REASON.Updating, note, after(this.#timing.operationFallbackMs), { progressing: true });
      }
    }
    if (!observed.ready) {
      return verdict(REASON.Creating, "waiting for the cloud resource to become ready", after(this.#timing.shortMs), {
        progressing: true,
      });
    }
    await connection.external.publish?.(mr, observed, pass.signal);
    delete draft.lastError;
    const cached = connection.usingCachedCredentials ? " (using cached credentials: the Secret is unreadable)" : "";
    return verdict(REASON.Available, `cloud resource ${observed.id} is available${cached}`, DONE, {
      ready: true,
      event: "Normal",
    });
  }

  #record(pass: Pass<Spec>, connection: CloudConnection<Spec>, operation: Operation): void {
    const recorded = {
      id: operation.operation_id,
      name: operation.metadata.operation_name,
      state: operation.state,
      ...(operation.started_at ? { startedAt: operation.started_at } : {}),
    };
    pass.draft.operation = recorded;
    pass.draft.operations = [recorded, ...(pass.draft.operations ?? [])].slice(0, MAX_OPERATION_HISTORY);
    if (operation.state === "IN_PROGRESS") connection.operation(operation.operation_id, pass.key);
  }

  #withDraft(mr: ManagedObject<Spec>, draft: ManagedStatusBase): ManagedObject<Spec> {
    return { ...mr, status: draft };
  }

  #wasReady(mr: ManagedObject): boolean {
    return mr.status.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
  }

  #conflict(): Verdict {
    // A Kubernetes 409 on our own write: the cache is behind. Requeue silently; the next pass re-reads.
    return { ...verdict(REASON.Updating, "", after(0)), silent: true };
  }

  /** Write conditions, observedGeneration and status once; emit an event when the Ready story changed. */
  async #finish(mr: ManagedObject, draft: ManagedStatusBase, result: Verdict, logger: Logger): Promise<Outcome> {
    if (result.silent) return result.outcome;
    const previous = mr.status.conditions ?? [];
    const previousReady = previous.find((c) => c.type === "Ready");
    const readyStatus =
      result.ready === undefined ? (previousReady?.status ?? "False") : result.ready ? "True" : "False";
    const at = formatKubeTime(this.#now());
    const generation = mr.metadata.generation;
    const condition = (type: string, status: Condition["status"]): Condition => {
      const old = previous.find((c) => c.type === type);
      const transition = old?.status === status ? old.lastTransitionTime : at;
      return {
        type,
        status,
        reason: result.reason,
        message: result.message,
        lastTransitionTime: transition,
        observedGeneration: generation,
      };
    };
    draft.conditions = [
      condition("Ready", readyStatus),
      condition("Reconciling", result.progressing ? "True" : "False"),
      condition("Stalled", result.stalled ? "True" : "False"),
    ];
    draft.observedGeneration = generation;
    if (result.stalled) draft.lastError = result.message;
    if (!isDeepStrictEqual(mr.status, draft)) {
      const written = await this.#writeStatus(mr, draft);
      if (written.type === "conflict") return after(0);
    }
    const storyChanged = previousReady?.reason !== result.reason || previousReady?.status !== readyStatus;
    if (storyChanged && result.event !== undefined) {
      this.#options.kube.event(mr, result.event, result.reason, result.message);
    }
    logger.debug({ reason: result.reason, ready: readyStatus, outcome: result.outcome.type }, "reconciled");
    return result.outcome;
  }
}

function failureText(operation: Operation): string {
  const result = operation.result as { code?: unknown; message?: unknown } | null;
  const code = typeof result?.code === "string" ? result.code : "unknown";
  const message = typeof result?.message === "string" ? result.message : "";
  return `${operation.metadata.operation_name} failed: ${code}${message ? `: ${message}` : ""}`;
}

function failureCode(operation: Operation): string {
  const result = operation.result as { code?: unknown } | null;
  return typeof result?.code === "string" ? result.code : "unknown";
}
