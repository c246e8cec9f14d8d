// The GpuVmPool lifecycle. A pool owns Kubernetes objects (its GpuVms and GpuDisks), never a cloud resource: the
// GpuVm controller does the cloud work of each replica. Order: read (a cache behind our own write waits) → invalid
// spec? → paused? → deleting (delete or orphan the members, then release: deletion.ts) → finalizer → the members
// as the caches show them → capacity (replicas.ts: per location, availability, room) → plan (rollout.ts) → place
// new replicas (placement.ts) → record the slots and the verdict in status (status.ts) → only then create,
// delete and change members, and make the disks of the replicas whose VM holds a place (actions.ts).
// Shared with the managed kinds (core/): parsing, the finalizer, pause and release (lifecycle.ts), the verdict and
// its conditions (status-building.ts), error classification (classify.ts), our-own-writes tracking (own-writes.ts).
import { ANNOTATIONS, FINALIZER, POOL_LABELS, REASONS } from "../../api/common.ts";
import {
  GpuVmPoolSpec,
  GpuVmPoolStatus,
  MAX_POOL_NAME_LENGTH,
  POOL_SUFFIX_LENGTH,
  type PoolSlot,
} from "../../api/gpu-vm-pool.ts";
import { keyOf, type Outcome, type ReconcileContext, type ReconcileRequest } from "../../runtime/index.ts";
import { sameJson } from "../../util/json-values.ts";
import type { AvailabilityReading } from "../accounts/cloud-account.ts";
import { classify } from "../core/classify.ts";
import type { KubeAccess } from "../core/kube-access.ts";
import { DEFAULT_TIMING, type LifecyclePass, paused, type ReconcileTiming } from "../core/lifecycle.ts";
import type { ManagedObject, ManagedStatusBase } from "../core/object-model.ts";
import { objectKey, parseManaged } from "../core/object-model.ts";
import { GuardedWrites } from "../core/own-writes.ts";
import { applyVerdict, formatKubeTime, intentRefused } from "../core/status-building.ts";
import { after, conflict, DONE, RELEASED, type Step, type Verdict, verdict } from "../core/verdict.ts";
import { type ActionContext, applyDecisions, type MemberAccess, readMembers } from "./actions.ts";
import { deletePool } from "./deletion.ts";
import { Expectations } from "./expectations.ts";
import {
  hasCapacityFailure,
  holdsPlace,
  type Member,
  memberLocation,
  replicaFailureOf,
  revisionOf,
  selectorOf,
} from "./members.ts";
import { CapacityMemory, placeReplicas } from "./placement.ts";
import { perLocation, type Replicas, readAvailability, roomsOf, slotStateOf } from "./replicas.ts";
import { planPool } from "./rollout.ts";
import { countsOf, pictureOf, poolVerdict } from "./status.ts";

type Pool = ManagedObject<GpuVmPoolSpec>;

export interface PoolReconcilerOptions {
  /** The pools (get from the cache, guarded status and finalizer writes, events). */
  kube: KubeAccess;
  members: MemberAccess;
  /**
   * What the cloud's availability endpoint says of `type` in `location` (yes or no, and how many when it counts),
   * from a reading started at `notBefore` (ms) or later; undefined when unknown.
   */
  availability(
    pool: Pool,
    type: string,
    location: string,
    signal: AbortSignal,
    notBefore: number,
  ): Promise<AvailabilityReading | undefined>;
  /**
   * The capacity queue (controllers/budgets/): the room it leaves for `type` in `location` (counted room less the
   * GpuVms waiting there), undefined when it knows no count.
   */
  queueRoom?(type: string, location: string): number | undefined;
  timing?: Partial<ReconcileTiming>;
  now?: () => number;
  /** The suffix of a new replica's name (random by default; tests pass a counter). */
  suffix?: () => string;
}

const SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789";

function randomSuffix(): string {
  let suffix = "";
  for (let index = 0; index < POOL_SUFFIX_LENGTH; index++) {
    suffix += SUFFIX_ALPHABET[Math.floor(Math.random() * SUFFIX_ALPHABET.length)];
  }
  return suffix;
}

export class PoolReconciler {
  readonly #options: PoolReconcilerOptions;
  readonly #timing: ReconcileTiming;
  readonly #now: () => number;
  readonly #writes: GuardedWrites;
  readonly #expectations: Expectations;
  readonly #capacity: CapacityMemory;

  constructor(options: PoolReconcilerOptions) {
    this.#options = options;
    this.#timing = { ...DEFAULT_TIMING, ...options.timing };
    this.#now = options.now ?? Date.now;
    this.#writes = new GuardedWrites(options.kube);
    this.#expectations = new Expectations(this.#now);
    this.#capacity = new CapacityMemory(this.#now);
  }

  async reconcile(request: ReconcileRequest, ctx: ReconcileContext): Promise<Outcome> {
    const key = keyOf(request.namespace, request.name);
    const raw = this.#options.kube.get(request.namespace, request.name);
    if (raw === undefined) {
      this.#writes.forget(key);
      this.#expectations.forget(key);
      this.#capacity.forget(key);
      return DONE;
    }
    const parsed = parseManaged(raw, GpuVmPoolSpec, GpuVmPoolStatus);
    const waitingFor = this.#writes.behind(key, parsed.object?.metadata.resourceVersion ?? "");
    if (waitingFor !== undefined) {
      ctx.logger.debug({ waitingFor }, "cache behind our own write");
      return after(this.#timing.shortMs * 5);
    }
    if (!parsed.ok) {
      if (parsed.object === undefined) return { type: "terminal", error: new Error(parsed.message) };
      const invalid = verdict(REASONS.InvalidSpec, parsed.message, DONE, { stalled: true, event: "Warning" });
      const previous = parsed.object.status.conditions?.find((c) => c.type === "Ready");
      return this.#finish(parsed.object, structuredClone(parsed.object.status), invalid, ctx, previous);
    }
    const mr = parsed.object;
    const previousReady = mr.status.conditions?.find((c) => c.type === "Ready");
    const pass: LifecyclePass = {
      mr,
      draft: structuredClone(mr.status),
      logger: ctx.logger,
      services: {
        setFinalizer: (object, present) => this.#writes.setFinalizer(object, present),
        options: { kube: this.#options.kube },
      },
    };
    let step: Step;
    try {
      step = await this.#lifecycle(mr, pass, ctx);
    } catch (error) {
      step = classify(error);
      ctx.logger.debug({ err: error, reason: step.reason }, "pool reconcile failed");
    }
    if (step === RELEASED) return DONE;
    return this.#finish(mr, pass.draft, step, ctx, previousReady);
  }

  async #lifecycle(mr: Pool, pass: LifecyclePass, ctx: ReconcileContext): Promise<Step> {
    const deleting = mr.metadata.deletionTimestamp !== undefined;
    const holdsFinalizer = mr.metadata.finalizers.includes(FINALIZER);
    if (deleting && !holdsFinalizer) return RELEASED;
    if (mr.metadata.annotations[ANNOTATIONS.paused] === "true") return paused(pass, deleting);
    const context = this.#context(mr, ctx);
    if (deleting) {
      return deletePool(context, pass, { shortMs: this.#timing.shortMs });
    }
    if (mr.metadata.name.length > MAX_POOL_NAME_LENGTH) {
      const message = `the pool's name is longer than ${MAX_POOL_NAME_LENGTH} characters (its replicas' names and its label would not fit)`;
      return verdict(REASONS.InvalidSpec, message, DONE, { stalled: true, event: "Warning" });
    }
    if (!holdsFinalizer) {
      const written = await this.#writes.setFinalizer(mr, true);
      if (written.type !== "written") return conflict();
    }
    return this.#converge(context, pass, ctx.signal);
  }

  #context(mr: Pool, ctx: ReconcileContext): ActionContext {
    return {
      members: this.#options.members,
      event: (object, type, reason, note) => this.#options.kube.event(object, type, reason, note),
      mr,
      pool: { namespace: mr.metadata.namespace, name: mr.metadata.name, uid: mr.metadata.uid },
      spec: mr.spec,
      key: objectKey(mr),
      expectations: this.#expectations,
      logger: ctx.logger,
    };
  }

  /** Observe the members, plan, record the slots (write-ahead), then act. */
  async #converge(context: ActionContext, pass: LifecyclePass, signal: AbortSignal): Promise<Verdict> {
    const { spec, pool, key } = context;
    const vms = readMembers(context.members, "GpuVm", pool);
    const disks = readMembers(context.members, "GpuDisk", pool);
    const byName = new Map(vms.all.map((vm) => [vm.name, vm]));
    this.#expectations.observe(key, byName);
    // Being deleted: as the cache shows it, or deleted by us and not shown so yet.
    const terminating = vms.ours.filter(
      (vm) => vm.deletionTimestamp !== undefined || this.#expectations.isDeleting(key, vm.name),
    );
    const live = new Map(
      vms.all
        .filter((vm) => vm.deletionTimestamp === undefined && !this.#expectations.isDeleting(key, vm.name))
        .map((vm) => [vm.name, vm]),
    );
    const recorded = GpuVmPoolStatus.safeParse(pass.draft).data?.slots ?? [];
    const gone = new Set(terminating.filter((vm) => vm.deletionTimestamp !== undefined).map((vm) => vm.name));
    const slots = recorded.filter((slot) => !gone.has(slot.name));
    const slotNames = new Set(slots.map((slot) => slot.name));
    const revision = revisionOf(spec);
    // Members without a slot (an orphan, or ours from a status that was lost) become slots again.
    for (const vm of live.values()) {
      if (slotNames.has(vm.name)) continue;
      slots.push({
        name: vm.name,
        location: memberLocation(vm),
        revision: vm.labels[POOL_LABELS.revision] ?? "unknown",
        recordedAt: formatKubeTime(this.#now()),
      });
    }

    // A replica waiting for capacity (its create found none, and it holds no place yet, a retry included) marks
    // its location full: no new replica goes there meanwhile.
    const waiting = new Set<string>();
    for (const slot of slots) {
      const vm = live.get(slot.name);
      const doneWaiting = vm !== undefined && (holdsPlace(vm) || replicaFailureOf(vm) !== undefined);
      if (vm === undefined || !this.#capacity.waits(key, vm.name, hasCapacityFailure(vm), doneWaiting)) continue;
      waiting.add(slot.name);
      this.#capacity.markFull(key, slot.location, this.#timing.capacityRetryMs);
    }
    const all: Replicas = { slots, live, waiting };
    const queueRoom = this.#options.queueRoom;
    const locations = {
      spec,
      key,
      capacity: this.#capacity,
      expectations: this.#expectations,
      queueRoom: queueRoom && ((location: string) => queueRoom(spec.template.spec.type, location)),
    };
    const readings = await readAvailability(
      locations,
      all,
      revision,
      this.#now() - this.#timing.capacityRetryMs,
      (location, notBefore) =>
        this.#options.availability(context.mr as Pool, spec.template.spec.type, location, signal, notBefore),
    );
    const roomBefore = roomsOf(locations, all, readings);
    const states = slots.map((slot) => slotStateOf(locations, slot, live.get(slot.name), revision, roomBefore));
    const replacedTerminating = terminating.filter((vm) => vm.labels[POOL_LABELS.revision] !== revision).length;
    const plan = planPool({
      replicas: spec.replicas,
      strategy: spec.updateStrategy,
      slots: states,
      replacedTerminating,
    });
    const removed = new Set(plan.remove.map((entry) => entry.name));
    const kept = slots.filter((slot) => !removed.has(slot.name));
    const placement = placeReplicas(plan.add, {
      locations: spec.placement.locations,
      strategy: spec.placement.strategy,
      placed: perLocation(kept),
      room: roomsOf(locations, { slots: kept, live, waiting }, readings),
    });
    const added = this.#newSlots(context, placement.locations, kept, revision, byName);
    const finalSlots = [...kept, ...added];
    this.#capacity.keepWaiting(key, new Set(finalSlots.map((slot) => slot.name)));

    const final: Replicas = { slots: finalSlots, live, waiting };
    const previousReason = context.mr.status.conditions?.find((c) => c.type === "Ready")?.reason;
    const decided = { plan, placement, added: added.length, terminating };
    const picture = pictureOf({ spec, previousReason }, final, revision, decided, this.#timing);
    const counts = countsOf(picture);
    const result = poolVerdict(picture, counts);
    Object.assign(pass.draft, counts, {
      slots: finalSlots,
      selector: selectorOf(pool.name),
      currentRevision: revision,
    });
    if (result.stalled) pass.draft.lastError = result.message;
    else delete pass.draft.lastError;
    // Write-ahead: the slots are recorded (and confirmed) before any member is created or deleted.
    applyVerdict(context.mr, pass.draft, result, this.#now());
    const written = await this.#writes.writeStatus(context.mr, pass.draft);
    if (written.type === "invalid") {
      // Nothing is created or deleted without its record; the status stays as it was, stalled.
      pass.draft = structuredClone(context.mr.status);
      return intentRefused(context.logger, "replica slots", written.message, this.#timing.terminalRetryMs);
    }
    if (written.type !== "written") return conflict();
    context.mr.status = structuredClone(pass.draft);

    await applyDecisions(context, { vms, disks, live, gone, slots, finalSlots, added, plan, revision });
    if (this.#expectations.pending(key) && result.outcome.type === "done")
      return { ...result, outcome: after(this.#timing.shortMs * 5) };
    return result;
  }

  /** Names and slots for the replicas placed in `locations`. */
  #newSlots(
    context: ActionContext,
    locations: readonly string[],
    kept: readonly PoolSlot[],
    revision: string,
    existing: ReadonlyMap<string, Member>,
  ): PoolSlot[] {
    const taken = new Set([...kept.map((slot) => slot.name), ...existing.keys()]);
    const slots: PoolSlot[] = [];
    for (const location of locations) {
      let name: string;
      do name = `${context.pool.name}-${(this.#options.suffix ?? randomSuffix)()}`;
      while (taken.has(name));
      taken.add(name);
      slots.push({ name, location, revision, recordedAt: formatKubeTime(this.#now()) });
    }
    return slots;
  }

  /** Conditions from the verdict, one status write when something changed, an event when the story changed. */
  async #finish(
    mr: ManagedObject,
    draft: ManagedStatusBase,
    result: Verdict,
    ctx: ReconcileContext,
    previousReady: { status: string; reason: string } | undefined,
  ): Promise<Outcome> {
    if (result.silent) return result.outcome;
    // mr.status is what was last written in this pass (the write-ahead), so an unchanged verdict writes nothing.
    const readyStatus = applyVerdict(mr, draft, result, this.#now());
    if (!sameJson(mr.status, draft)) {
      const written = await this.#writes.writeStatus(mr, draft);
      if (written.type === "conflict") return after(0);
    }
    const storyChanged = previousReady?.reason !== result.reason || previousReady?.status !== readyStatus;
    if (storyChanged && result.event !== undefined)
      this.#options.kube.event(mr, result.event, result.reason, result.message);
    ctx.logger.debug({ reason: result.reason, ready: readyStatus, outcome: result.outcome.type }, "pool reconciled");
    return result.outcome;
  }
}
