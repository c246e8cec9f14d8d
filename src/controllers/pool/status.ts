// A GpuVmPool's status after a pass: the counts (replicas, ready, updated, available, pending), the replicas per
// location, the price, and the verdict that becomes its Ready/Reconciling/Stalled conditions. Replicas waiting for
// capacity or for room in a budget are pending; the pool says what they wait for (the budget's own words).

import { REASONS } from "../../api/common.ts";
import type { GpuVmPoolSpec, GpuVmPoolStatus, PoolSlot } from "../../api/gpu-vm-pool.ts";
import type { ReconcileTiming } from "../core/lifecycle.ts";
import { after, DONE, type Verdict, verdict } from "../core/verdict.ts";
import { budgetWaitOf, holdsPlace, inPlaceChangeOf, isReplicaReady, type Member, replicaFailureOf } from "./members.ts";
import type { Placement } from "./placement.ts";
import type { Replicas } from "./replicas.ts";
import type { PoolPlan } from "./rollout.ts";

/** What a pass saw and decided, for the status. */
export interface PoolPicture {
  replicas: number;
  /** Slots after this pass (kept and added). */
  slots: readonly PoolSlot[];
  /** Live GpuVms of the slots (not being deleted), by name. */
  members: ReadonlyMap<string, Member>;
  /** Slot names whose replica is Ready for the pool (its GpuVm Ready, with the pool's disks). */
  ready: ReadonlySet<string>;
  /** Slot names whose GpuVm waits in its location for capacity (its create found none; nowhere else to go). */
  waiting: ReadonlySet<string>;
  /** Slot names whose GpuVm waits for room in a GpuBudget, with the budget's message. */
  budgetWaits: ReadonlyMap<string, string>;
  /** Slot names whose replica is up to date (current revision, in-place changes applied). */
  updated: ReadonlySet<string>;
  /** Replicas that exist and are not up to date (an older revision, or an in-place change not applied yet). */
  stale: number;
  /** The reason of the pool's Ready condition before this pass (a rollout stays a rollout until it settles). */
  previousReason: string | undefined;
  plan: PoolPlan;
  /** Replicas placed in this pass. */
  added: number;
  /** Replicas that fit in no location for lack of capacity in this pass. */
  noCapacity: number;
  /** Replicas held back until the replicas starting in a location without counts hold their place. */
  batched: number;
  /** Replicas stalled for another reason, with it. */
  failures: readonly { name: string; reason: string; message: string }[];
  /** The pool's GpuVms being deleted. */
  terminating: number;
  locations: readonly string[];
  vmType: string;
  capacityRetryMs: number;
  pollMs: number;
}

/** What a pass saw and decided, as the status tells it. */
export function pictureOf(
  pool: { spec: GpuVmPoolSpec; previousReason: string | undefined },
  replicas: Replicas,
  revision: string,
  decided: { plan: PoolPlan; placement: Placement; added: number; terminating: readonly Member[] },
  timing: Pick<ReconcileTiming, "capacityRetryMs" | "dependencyMs">,
): PoolPicture {
  const { spec } = pool;
  const { plan, placement, added, terminating } = decided;
  const { slots, live } = replicas;
  const updated = new Set<string>();
  const ready = new Set<string>();
  const waiting = new Set(slots.filter((slot) => replicas.waiting.has(slot.name)).map((slot) => slot.name));
  const failures: PoolPicture["failures"][number][] = [];
  const budgetWaits = new Map<string, string>();
  let stale = 0;
  for (const slot of slots) {
    const vm = live.get(slot.name);
    if (vm === undefined || waiting.has(slot.name)) continue;
    const budgetWait = budgetWaitOf(vm);
    if (budgetWait !== undefined) budgetWaits.set(slot.name, budgetWait);
    if (isReplicaReady(slot.revision === revision ? spec : undefined, vm)) ready.add(slot.name);
    const current = slot.revision === revision && spec.placement.locations.includes(slot.location);
    if (current && inPlaceChangeOf(spec, vm) === undefined) updated.add(slot.name);
    else stale++;
    const failure = replicaFailureOf(vm);
    if (failure !== undefined) failures.push({ name: slot.name, ...failure });
  }
  return {
    replicas: spec.replicas,
    slots,
    members: live,
    ready,
    waiting,
    budgetWaits,
    updated,
    stale,
    previousReason: pool.previousReason,
    plan,
    added,
    noCapacity: placement.noCapacity,
    batched: placement.batched,
    failures,
    terminating: terminating.length,
    locations: spec.placement.locations,
    vmType: spec.template.spec.type,
    capacityRetryMs: timing.capacityRetryMs,
    pollMs: timing.dependencyMs,
  };
}

/** Slots whose GpuVm waits for a budget before it was ever created (no place in the cloud). */
function budgetPending(picture: PoolPicture): Set<string> {
  return new Set(
    [...picture.budgetWaits.keys()].filter((name) => {
      const member = picture.members.get(name);
      return member !== undefined && !holdsPlace(member);
    }),
  );
}

/**
 * The counts of the status. `replicas`: the slots that have a place (their GpuVm exists or is being created, not
 * waiting for capacity or for a budget); `pendingReplicas`: the ones asked for that have none (waiting GpuVms, and
 * replicas no location has room for). Together they make spec.replicas once a scale settles (plus maxSurge while
 * replacing).
 */
export function countsOf(picture: PoolPicture): Partial<GpuVmPoolStatus> {
  const forBudget = budgetPending(picture);
  const placed = picture.slots.filter((slot) => !picture.waiting.has(slot.name) && !forBudget.has(slot.name));
  const perLocation = new Map<string, { replicas: number; readyReplicas: number }>();
  for (const slot of placed) {
    const entry = perLocation.get(slot.location) ?? { replicas: 0, readyReplicas: 0 };
    entry.replicas++;
    if (picture.ready.has(slot.name)) entry.readyReplicas++;
    perLocation.set(slot.location, entry);
  }
  const order = (name: string) => {
    const index = picture.locations.indexOf(name);
    return index === -1 ? picture.locations.length : index;
  };
  const locations = [...perLocation]
    .sort(([a], [b]) => order(a) - order(b) || (a < b ? -1 : 1))
    .map(([name, entry]) => ({ name, ...entry }));
  const price = placed
    .flatMap((slot) => picture.members.get(slot.name) ?? [])
    .filter((member) => member.status.state === "STATE_RUNNING")
    .reduce((sum, member) => sum + (member.status.hourlyPriceUSD ?? 0), 0);
  const ready = placed.filter((slot) => picture.ready.has(slot.name));
  return {
    replicas: placed.length,
    readyReplicas: ready.length,
    updatedReplicas: placed.filter((slot) => picture.updated.has(slot.name)).length,
    availableReplicas: ready.filter((slot) => picture.updated.has(slot.name)).length,
    pendingReplicas: picture.waiting.size + picture.noCapacity + forBudget.size,
    locations,
    locationSummary: locations.map((entry) => `${entry.name}=${entry.replicas}`).join(","),
    hourlyPriceUSD: Math.round(price * 10_000) / 10_000,
  };
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

/** What the pending replicas wait for: capacity, a budget (in its own words), or both. */
function pendingNote(picture: PoolPicture, pending: number): string {
  if (pending === 0) return "";
  const forBudget = budgetPending(picture).size;
  const forCapacity = pending - forBudget;
  const capacity = `no capacity for ${picture.vmType} in ${picture.locations.join(", ")}`;
  const [budgetMessage] = picture.budgetWaits.values();
  if (forBudget === 0) return `; ${plural(pending, "replica")} pending: ${capacity}`;
  const budget = `${plural(forBudget, "replica")} pending: ${budgetMessage}`;
  return forCapacity === 0 ? `; ${budget}` : `; ${plural(forCapacity, "replica")} pending: ${capacity}; ${budget}`;
}

/** The verdict of a pass that got as far as planning. */
export function poolVerdict(picture: PoolPicture, counts: Partial<GpuVmPoolStatus>): Verdict {
  const { plan } = picture;
  const pending = counts.pendingReplicas ?? 0;
  const capacityNote = pendingNote(picture, pending);
  const [failure] = picture.failures;
  if (failure !== undefined) {
    const more = picture.failures.length > 1 ? ` (and ${picture.failures.length - 1} more)` : "";
    return verdict(
      REASONS.ReplicaFailure,
      `replica ${failure.name} is stalled${more}: ${failure.reason}: ${failure.message}`,
      after(picture.pollMs),
      { stalled: true, event: "Warning" },
    );
  }
  const replacing = plan.remove.some((entry) => entry.why === "replace") || plan.change.length > 0 || plan.held > 0;
  const outdatedLeft = picture.stale > 0;
  const ready = counts.readyReplicas ?? 0;
  // Settled: nothing left to do now but wait for capacity (what fits is placed, Ready and up to date).
  const settled =
    plan.remove.length === 0 &&
    picture.added === 0 &&
    picture.batched === 0 &&
    plan.change.length === 0 &&
    plan.held === 0 &&
    picture.terminating === 0 &&
    ready === (counts.replicas ?? 0);
  if (!settled) {
    const progress = `${ready}/${picture.replicas} ready, ${counts.updatedReplicas ?? 0} up to date`;
    const rolling = replacing || outdatedLeft || picture.previousReason === REASONS.RollingUpdate;
    const reason = rolling ? REASONS.RollingUpdate : REASONS.Scaling;
    const held = plan.held > 0 ? `; ${plan.held} held back by maxUnavailable/maxSurge` : "";
    const batched =
      picture.batched > 0
        ? `; ${plural(picture.batched, "replica")} placed once the ones starting hold their place (the cloud does not count its capacity)`
        : "";
    return verdict(reason, `${progress}${held}${batched}${capacityNote}`, after(picture.pollMs), {
      progressing: true,
    });
  }
  if (pending > 0) {
    // Waiting for a budget only: the budget frees by itself (the replicas are woken), as capacity does.
    const budgetOnly = budgetPending(picture).size === pending;
    const retry = budgetOnly
      ? "they proceed when the budget frees"
      : `retried every ${Math.round(picture.capacityRetryMs / 1000)}s`;
    return verdict(
      budgetOnly ? REASONS.BudgetExceeded : REASONS.CapacityUnavailable,
      `${ready}/${picture.replicas} ready${capacityNote}; ${retry}`,
      after(picture.capacityRetryMs),
      { stalled: true, event: "Warning" },
    );
  }
  const older = picture.stale;
  const kept = older > 0 ? `; ${plural(older, "replica")} of an older template kept (updateStrategy OnDelete)` : "";
  return verdict(REASONS.Available, `${ready}/${picture.replicas} replicas ready${kept}`, DONE, {
    ready: true,
    event: "Normal",
  });
}
