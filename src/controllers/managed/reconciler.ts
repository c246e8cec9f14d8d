// The one lifecycle every kind shares (crossplane's managed reconciler, split into steps that return a verdict).
// Order: read → paused? → orphan/observe deletion → credentials → operation in flight → references → observe →
// delete | finalizer → create | update → ready. The steps live beside this file, by responsibility:
//   creation.ts (absent → crash-safe create, adoption, location walk), existing-resource.ts (update, ready,
//   observe-only mirror), deletion.ts (delete the cloud resource), operation-tracking.ts / operation-failures.ts
//   (operations in flight and what a FAILED one means), operation-following.ts (an operation the server cannot
//   show, followed through its resource); pause and release, and the end of a pass (conditions, the one status
//   write) are shared with the pool: core/lifecycle.ts, core/status-building.ts.
// Conditions, events and status are written in `finish()` only, once per reconcile and only when they changed.
// No worker ever waits on a cloud operation: the operation id goes into status, trackers wake the key, and a
// fallback requeue covers lost wake-ups.

import { CLUSTER_API_ANNOTATIONS } from "../../api/cluster-api.ts";
import { ANNOTATIONS, FINALIZER, MIN_SYNC_PERIOD_MS, REASONS } from "../../api/common.ts";
import {
  formatDuration,
  keyOf,
  type Outcome,
  type ReconcileContext,
  type ReconcileRequest,
  syncPeriodOf,
} from "../../runtime/index.ts";
import { cloneJson } from "../../util/json-values.ts";
import { classify } from "../core/classify.ts";
import { DEFAULT_TIMING, paused, type ReconcileTiming, release } from "../core/lifecycle.ts";
import type { ManagedObject, ManagedSpecBase } from "../core/object-model.ts";
import { GuardedWrites } from "../core/own-writes.ts";
import { finish } from "../core/status-building.ts";
import {
  after,
  conflict,
  DONE,
  isReason,
  RELEASED,
  type Step,
  TERMINAL_REASONS,
  type Verdict,
  verdict,
} from "../core/verdict.ts";
import { resourceSeen } from "./absence.ts";
import { resolvePendingAction } from "./action-intents.ts";
import { unlessOwned } from "./adoption.ts";
import { createAbsent } from "./creation.ts";
import { deleteResource } from "./deletion.ts";
import { mirror, reconcileExisting } from "./existing-resource.ts";
import type { Observation } from "./external.ts";
import { handleFailedOperation } from "./operation-failures.ts";
import { followOperation } from "./operation-following.ts";
import { type Settlement, settleOperation } from "./operation-tracking.ts";
import { cloudNameFor, reconcileClaim } from "./ownership.ts";
import {
  type CloudConnection,
  type ManagedReconcilerOptions,
  type Pass,
  type PassServices,
  withDraft,
} from "./pass.ts";
import { QuietResyncs } from "./quiet-resyncs.ts";
import { capacityPairOf, releaseSpend } from "./spend.ts";

/** A create just succeeded: its capacity queue's pair may take more (where the cloud gives no count). */
function createSucceeded<Spec extends ManagedSpecBase>(pass: Pass<Spec>): void {
  const operation = pass.draft.operation;
  if (operation?.name !== "CREATE" || operation.state !== "SUCCEEDED") return;
  const locations = pass.services.options.locations(pass.mr.spec);
  const queue = capacityPairOf(pass, locations[pass.draft.locationIndex ?? 0] ?? locations[0]);
  queue?.capacity.succeeded(queue.type, queue.location);
}

/** A failing key is held this long after its first failure, doubling with each further one. */
const FAILURE_HOLD_BASE_MS = 500;
const FAILURE_HOLD_MAX_MS = 60_000;

export class ManagedReconciler<Spec extends ManagedSpecBase> {
  readonly #options: ManagedReconcilerOptions<Spec>;
  readonly #timing: ReconcileTiming;
  readonly #now: () => number;
  readonly #services: PassServices<Spec>;
  /** key → the versions our writes replaced and the last one they made (to recognise a cache not caught up). */
  readonly #ownWrites: GuardedWrites;
  /** key → consecutive failed passes, and until when (at which object version) the key is held. */
  readonly #failures = new Map<string, { count: number; version: string; until: number }>();
  /** key → the sync-period annotation value last reported as raised to the floor (one Event per value). */
  readonly #raisedSyncPeriods = new Map<string, string>();
  /** Objects whose resyncs end at once while nothing they read has changed (see quiet-resyncs.ts). */
  readonly #quiet = new QuietResyncs();

  constructor(options: ManagedReconcilerOptions<Spec>) {
    this.#options = options;
    this.#timing = { ...DEFAULT_TIMING, ...options.timing };
    this.#now = options.now ?? Date.now;
    this.#ownWrites = new GuardedWrites(options.kube, options.fitStatus);
    this.#services = {
      options,
      timing: this.#timing,
      now: () => this.#now(),
      writeStatus: (mr, status) => this.#ownWrites.writeStatus(mr, status),
      fit: (status) => options.fitStatus?.(status) ?? [],
      sentActions: new Map(),
      setFinalizer: (mr, present) => this.#ownWrites.setFinalizer(mr, present),
      claims: options.claims,
      releaseClaim: async (mr) => {
        const claim = options.claims.heldBy(options.kind, mr.metadata.uid);
        if (claim !== undefined) await options.claims.release(claim);
      },
      releaseSpend: (mr) => releaseSpend(options.spend, mr),
      missingSince: new Map(),
    };
  }

  /** An update event at this version only echoes our own write (see OwnWrites.isEcho): it needs no pass. */
  isEcho(key: string, resourceVersion: string): boolean | Promise<boolean> {
    return this.#ownWrites.isEcho(key, resourceVersion);
  }

  async reconcile(request: ReconcileRequest, ctx: ReconcileContext): Promise<Outcome> {
    const key = keyOf(request.namespace, request.name);
    const raw = this.#options.kube.get(request.namespace, request.name);
    if (raw === undefined) {
      this.#ownWrites.forget(key);
      this.#failures.delete(key);
      this.#raisedSyncPeriods.delete(key);
      this.#quiet.forget(key);
      this.#services.missingSince.delete(key);
      return { type: "done" };
    }
    const parsed = this.#options.parse(raw);
    const cachedVersion = parsed.object?.metadata.resourceVersion ?? "";
    const waitingFor = this.#ownWrites.behind(key, cachedVersion);
    if (waitingFor !== undefined) {
      // The cache shows the object as it was before (or between) our last pass's writes: acting on it would
      // repeat work (a second POST, a 409, an adoption of our own create). The watch event of our last write
      // wakes the key; this is only the fallback.
      ctx.logger.debug({ cachedVersion, waitingFor }, "cache behind our own write");
      return after(this.#timing.shortMs * 5);
    }
    const held = this.#failures.get(key);
    const now = this.#now();
    if (held !== undefined && held.version === cachedVersion && now < held.until) {
      // The last pass failed, and nobody changed the object since: the watch event of our own status writes
      // (an action's intent, then its removal) must not turn a failing action into a hot loop.
      ctx.logger.debug({ heldForMs: held.until - now }, "holding a failing key");
      return after(held.until - now);
    }
    const outcome = await this.#reconcileParsed(parsed, key, ctx);
    this.#noteFailure(key, outcome, parsed.object?.metadata.resourceVersion ?? cachedVersion);
    return outcome;
  }

  /** A pass that ended in a retry holds the key (doubling, up to a minute) until the object changes. */
  #noteFailure(key: string, outcome: Outcome, version: string): void {
    if (outcome.type !== "retry") {
      this.#failures.delete(key);
      return;
    }
    const count = (this.#failures.get(key)?.count ?? 0) + 1;
    const holdMs = Math.min(FAILURE_HOLD_BASE_MS * 2 ** (count - 1), FAILURE_HOLD_MAX_MS);
    this.#failures.set(key, { count, version, until: this.#now() + holdMs });
  }

  /**
   * The object's `gpucloud.dev/sync-period` in ms (raised to MIN_SYNC_PERIOD_MS, reported once per value with a
   * Warning Event); undefined when absent or not a positive duration.
   */
  #ownSyncPeriod(pass: Pass<Spec>): number | undefined {
    const { mr, key } = pass;
    const annotation = mr.metadata.annotations[ANNOTATIONS.syncPeriod];
    if (annotation === undefined) return undefined;
    const period = syncPeriodOf(annotation, MIN_SYNC_PERIOD_MS);
    if ("error" in period) return undefined;
    if (period.raisedFrom !== undefined && this.#raisedSyncPeriods.get(key) !== annotation) {
      this.#raisedSyncPeriods.set(key, annotation);
      this.#options.kube.event(
        mr,
        "Warning",
        "SyncPeriodRaised",
        `${ANNOTATIONS.syncPeriod} ${annotation} is below the floor of ${formatDuration(MIN_SYNC_PERIOD_MS)}: ${formatDuration(MIN_SYNC_PERIOD_MS)} is used`,
      );
    }
    return period.ms;
  }

  async #reconcileParsed(
    parsed: ReturnType<ManagedReconcilerOptions<Spec>["parse"]>,
    key: string,
    ctx: ReconcileContext,
  ): Promise<Outcome> {
    if (!parsed.ok) {
      if (parsed.object === undefined) return { type: "terminal", error: new Error(parsed.message) };
      const draft = cloneJson(parsed.object.status);
      const invalid = verdict(REASONS.InvalidSpec, parsed.message, DONE, {
        stalled: true,
        event: "Warning",
      });
      return finish(this.#services, parsed.object, draft, invalid, ctx.logger);
    }
    const mr = parsed.object;
    if (ctx.priority === "low" && (await this.#quietResync(key, mr, ctx))) return { type: "done" };
    const pass: Pass<Spec> = {
      mr,
      draft: cloneJson(mr.status),
      key,
      cloudName: cloudNameFor(mr),
      signal: ctx.signal,
      logger: ctx.logger,
      services: this.#services,
    };
    let step: Step;
    try {
      step = await this.#lifecycle(pass);
    } catch (error) {
      step = classify(error);
      if (step.reason === REASONS.CredentialsInvalid && pass.credentialsSource !== undefined) {
        // Say which Secret and key to fix, not only what the cloud said.
        const message = `the cloud rejected the credentials in ${pass.credentialsSource}: ${step.message}; correct the key in the Secret (the change is picked up at once)`;
        step = { ...step, message };
      }
      // An expected failure (the cloud or Kubernetes answered an error) is said in status; a bug is logged loudly.
      if (step.reason === REASONS.InternalError) ctx.logger.error({ err: error }, "reconcile failed: internal error");
      else ctx.logger.debug({ reason: step.reason, detail: step.message }, "reconcile failed");
    }
    if (ctx.signal.aborted) {
      // Cancelled (the Lease lost, shutdown): what it concluded is not said, and its writes are fenced anyway;
      // whoever leads next looks afresh.
      ctx.logger.debug("pass cancelled: nothing written");
      return { type: "retry", error: new Error("pass cancelled") };
    }
    if (step === RELEASED) {
      this.#quiet.forget(key);
      return { type: "done" };
    }
    const available = step.reason === REASONS.Available && step.outcome.type === "done";
    this.#quiet.record(key, mr.metadata.resourceVersion, available ? pass.reads : undefined);
    this.#options.onReconciled?.(mr);
    const ended = pass.upToDate !== undefined ? { ...step, upToDate: pass.upToDate } : step;
    return finish(this.#services, mr, pass.draft, ended, ctx.logger);
  }

  async #lifecycle(pass: Pass<Spec>): Promise<Step> {
    const { mr } = pass;
    const deleting = mr.metadata.deletionTimestamp !== undefined;
    const holdsFinalizer = mr.metadata.finalizers.includes(FINALIZER);
    if (deleting && !holdsFinalizer) {
      // Let go without us (the finalizer removed by hand): its claim must not outlive it.
      await this.#services.releaseClaim(mr);
      await this.#services.releaseSpend(mr);
      return RELEASED;
    }
    if (deleting && CLUSTER_API_ANNOTATIONS.deleteForMove in mr.metadata.annotations) {
      // clusterctl move deletes what it copied to another management cluster: the copy manages the resource now.
      return release(
        pass,
        "Normal",
        `moved by clusterctl (${CLUSTER_API_ANNOTATIONS.deleteForMove}): the cloud resource is kept`,
      );
    }
    if (mr.metadata.annotations[ANNOTATIONS.paused] === "true") return paused(pass, deleting);
    if (deleting && (mr.spec.deletionPolicy === "Orphan" || mr.spec.managementPolicy === "Observe")) {
      return release(pass, "Normal", "the cloud resource is kept (deletionPolicy Orphan or Observe)");
    }
    const stall = this.#stillStalled(pass, deleting);
    if (stall !== undefined) return stall;

    const connected = await this.#options.connect(mr, pass.signal);
    if (connected.type === "missing") {
      const untouched = pass.draft.id === undefined && pass.draft.createPending === undefined;
      if (deleting && untouched) return release(pass, "Normal", "no cloud resource was ever created");
      // Deleting needs the credentials too; say how else to let the object go.
      const message = deleting
        ? `${connected.message}; the cloud resource cannot be deleted without them (or set deletionPolicy: Orphan to keep it and release the object)`
        : connected.message;
      pass.draft.lastError = message;
      return verdict(connected.reason ?? REASONS.CredentialsMissing, message, after(this.#timing.dependencyMs), {
        stalled: true,
        event: "Warning",
      });
    }
    const connection = connected.connection;
    pass.credentialsSource = connection.credentialsSource;
    if (connection.usingCachedCredentials && !deleting) {
      // The last good credentials of a Secret that is gone or unreadable serve one purpose: deleting what was
      // created with them. Nothing new is created or changed with credentials nobody can see any more.
      const source = connection.credentialsSource ?? "the credentials Secret";
      const message = `${source} is being deleted, gone or unreadable: its credentials are kept only to delete the resources created with them; restore the Secret to create or change anything`;
      pass.draft.lastError = message;
      return verdict(REASONS.CredentialsMissing, message, after(this.#timing.dependencyMs), {
        stalled: true,
        event: "Warning",
      });
    }
    pass.draft.projectId = connection.projectId;
    return this.#withConnection(pass, connection, deleting, holdsFinalizer);
  }

  /** A resync (the `low` lane: no event asked for it) that would see what the last good pass saw. */
  async #quietResync(key: string, mr: ManagedObject<Spec>, ctx: ReconcileContext): Promise<boolean> {
    // An object with its own sync period is checked against a list at most that old (#ownSyncPeriod), which the
    // shared snapshot need not be: its resyncs stay full passes.
    if (mr.metadata.annotations[ANNOTATIONS.syncPeriod] !== undefined) return false;
    const connect = async () => {
      const connected = await this.#options.connect(mr, ctx.signal);
      return connected.type === "connected" ? connected.connection : undefined;
    };
    const quiet = await this.#quiet.unchanged(key, mr, connect, ctx.signal, ctx.logger);
    if (quiet) ctx.logger.debug("resync: nothing changed since the last good pass");
    return quiet;
  }

  /** Credentials are good: settle the operation in flight, resolve references, observe, then act. */
  async #withConnection(
    pass: Pass<Spec>,
    connection: CloudConnection<Spec>,
    deleting: boolean,
    holdsFinalizer: boolean,
  ): Promise<Step> {
    const { mr } = pass;
    if (mr.spec.managementPolicy !== "Observe") {
      const stop = reconcileClaim(pass, connection.account, deleting);
      if (stop !== undefined) return stop;
    }
    const resolved = await resolvePendingAction(pass, connection);
    if (resolved.hold !== undefined) return resolved.hold;
    const resolvedAt = resolved.notBefore;
    const settled = settleOperation(pass, connection);
    if (settled.verdict !== undefined) return settled.verdict;
    if (settled.notBefore !== undefined) createSucceeded(pass);
    if (settled.failure !== undefined) return handleFailedOperation(pass, connection, settled.failure);

    // An object with its own (shorter) sync period is checked against a list at most that old: the shared
    // snapshot may otherwise be as old as --sync-period, and drift would go unseen at the object's resyncs.
    const ownPeriodMs = this.#ownSyncPeriod(pass);
    const periodic = ownPeriodMs !== undefined ? this.#now() - ownPeriodMs : undefined;
    if (mr.spec.managementPolicy === "Observe") return mirror(pass, connection, settled.notBefore ?? periodic);
    // A deletion resolves nothing: a reference being deleted too must not hold it up.
    const inputs = deleting ? undefined : await this.#resolve(pass, connection);
    if (inputs !== undefined && !("resolved" in inputs)) return inputs;
    // A recorded action just resolved (found or dropped) changed what the lists show: observe afresh.
    const fresh = settled.notBefore ?? resolvedAt;
    const look = await this.#look(
      pass,
      connection,
      { ...settled, ...(fresh !== undefined ? { notBefore: fresh } : {}) },
      periodic,
      inputs,
    );
    if ("waiting" in look) return look.waiting;
    const { observed } = look;
    if (observed.exists) {
      resourceSeen(pass);
      // One owner per resource: another object's (or a foreign) resource is never changed nor deleted.
      const notOwned = await unlessOwned(pass, connection, observed, deleting);
      if (notOwned !== undefined) return notOwned;
    }
    if (inputs === undefined) return deleteResource(pass, connection, observed);
    if (!holdsFinalizer) {
      const written = await this.#ownWrites.setFinalizer(mr, true);
      if (written.type !== "written") return conflict();
    }
    if (!observed.exists) return createAbsent(pass, connection, inputs.resolved);
    return reconcileExisting(pass, connection, observed, inputs.resolved);
  }

  /**
   * A spec change of an existing resource is compared against a fresh list (coalesced with other keys), not the
   * periodic snapshot; so is a resource last seen in transition, or it would wait for the next periodic list.
   * A new object needs none: a create under its deterministic name cannot duplicate; one with a create intent
   * but no id does.
   */
  #needsFreshList(pass: Pass<Spec>): boolean {
    const { mr } = pass;
    // A create whose answer never came (a lost answer, a crash): the resource may be seconds old. Looking for it
    // in an older list would miss it, and a deletion would leave it behind.
    if (pass.draft.id === undefined) return pass.draft.createPending !== undefined;
    if (mr.status.observedGeneration !== mr.metadata.generation) return true;
    const lastReason = mr.status.conditions?.find((c) => c.type === "Ready")?.reason;
    return lastReason === REASONS.WaitingForOperation || lastReason === REASONS.Creating;
  }

  /**
   * Observe the resource against a list fresh enough for this pass. While following an operation the server
   * cannot show: one fresh list (or read) per turn, trusted as it is, and the verdict to wait with until the
   * resource shows the operation's effect.
   */
  async #look(
    pass: Pass<Spec>,
    connection: CloudConnection<Spec>,
    settled: Settlement,
    periodic: number | undefined,
    inputs: { resolved: unknown } | undefined,
  ): Promise<{ waiting: Verdict } | { observed: Observation }> {
    const following = settled.follow !== undefined;
    const notBefore = following
      ? this.#now()
      : (settled.notBefore ?? (this.#needsFreshList(pass) ? this.#now() : periodic));
    // A spec change is what somebody waits for: its fresh view goes at once (settled operations are batched).
    const urgent = !following && pass.mr.status.observedGeneration !== pass.mr.metadata.generation;
    const observed = await connection.external.observe(
      withDraft(pass.mr, pass.draft),
      {
        cloudName: pass.cloudName,
        ...(notBefore !== undefined ? { notBefore } : {}),
        trustList: following,
        ...(urgent ? { urgent } : {}),
        ...(inputs !== undefined ? { resolved: inputs.resolved } : {}),
      },
      pass.signal,
    );
    if (settled.follow !== undefined) {
      const waiting = followOperation(pass, connection, settled.follow, observed);
      if (waiting !== undefined) return { waiting };
    }
    if (observed.exists && observed.reads !== undefined) pass.reads = observed.reads;
    if (observed.exists && observed.updatedAt !== undefined) pass.observedUpdatedAt = observed.updatedAt;
    return { observed };
  }

  /**
   * References and inputs (other objects, Secrets, ConfigMaps) must be there before the cloud is touched: what
   * the kind resolved (handed back to it by observe, create and update), or the verdict to stop with.
   */
  async #resolve(pass: Pass<Spec>, connection: CloudConnection<Spec>): Promise<Verdict | { resolved: unknown }> {
    // The draft, not the status as read: this pass may already have settled an operation (and what it served).
    const resolution = await connection.external.resolve(withDraft(pass.mr, pass.draft), pass.cloudName, pass.signal);
    if (resolution.type === "waiting") {
      return verdict(REASONS.WaitingForDependency, resolution.message, after(this.#timing.dependencyMs), {
        progressing: true,
      });
    }
    if (resolution.type === "blocked") {
      // The user's to fix; still looked at again (and woken when the target changes), so it resolves by itself.
      return verdict(resolution.reason, resolution.message, after(this.#timing.dependencyMs), {
        stalled: true,
        event: "Warning",
      });
    }
    if (resolution.type === "invalid") {
      return verdict(REASONS.InvalidSpec, resolution.message, DONE, {
        stalled: true,
        event: "Warning",
      });
    }
    return { resolved: resolution.resolved };
  }

  /** A terminal stall stays put until the spec changes or a long backoff passes: no hot loop. */
  #stillStalled(pass: Pass<Spec>, deleting: boolean): Verdict | undefined {
    if (pass.mr.status.observedGeneration !== pass.mr.metadata.generation) return undefined;
    const stalledCondition = pass.mr.status.conditions?.find((c) => c.type === "Stalled");
    if (stalledCondition?.status !== "True" || !isReason(stalledCondition.reason)) return undefined;
    const reason = stalledCondition.reason;
    // A stall from before the deletion must not delay it; a NotSupported met while deleting holds. (The
    // deletion timestamp has whole seconds: a stall counts as "while deleting" from the next second on.)
    if (deleting) {
      const deletedAt = Date.parse(pass.mr.metadata.deletionTimestamp ?? "");
      const stalledAt = Date.parse(stalledCondition.lastTransitionTime);
      if (reason !== REASONS.NotSupported || !(stalledAt >= deletedAt + 1000)) return undefined;
    }
    // Capacity is retried on a timer: the location walk rewrites status, and our own write must not restart it.
    // With the capacity queue, its turn decides instead (spend.ts capacityTurn): a waiter it admits goes at once.
    const retryMs = TERMINAL_REASONS.has(reason)
      ? this.#timing.terminalRetryMs
      : reason === REASONS.CapacityUnavailable && this.#options.spend?.guard.capacity === undefined
        ? this.#timing.capacityRetryMs
        : undefined;
    if (retryMs === undefined) return undefined;
    const since = Date.parse(stalledCondition.lastTransitionTime);
    const waited = Number.isNaN(since) ? Number.POSITIVE_INFINITY : this.#now() - since;
    const remaining = retryMs - waited;
    if (remaining <= 0) return undefined;
    return verdict(reason, stalledCondition.message ?? "", after(remaining), {
      stalled: true,
    });
  }
}
