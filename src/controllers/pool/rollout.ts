// The decisions of one GpuVmPool pass, as data (no I/O): which replicas to remove and why, how many to add, which
// to change in place. Capacity moves first, then the scale (spec.replicas, plus maxSurge while replacing), then
// the rolling replacement of replicas of an old revision and the in-place changes, both within maxUnavailable:
// at no time are more than maxUnavailable of spec.replicas not Ready because of the update (Deployment's rule:
// ready replicas never fall below replicas − maxUnavailable on account of a removal or a change).
import type { UpdateStrategy } from "../../api/gpu-vm-pool.ts";
import type { InPlaceChange } from "./members.ts";
import { type RemovalCandidate, removalOrder } from "./scale-down.ts";

export interface SlotState extends RemovalCandidate {
  /** The replica has a GpuVm (not being deleted). */
  started: boolean;
  /** Its create failed for capacity and another location can take it: it is moved. */
  movable: boolean;
  /** The template asks for a change the GpuVm does not have yet (same revision). */
  change: InPlaceChange | undefined;
}

export type RemovalReason = "capacity" | "scale-down" | "replace";

export interface PoolPlan {
  remove: { name: string; why: RemovalReason }[];
  /** New replicas to place (at the current revision). */
  add: number;
  /** Replicas to change in place now. */
  change: { name: string; change: InPlaceChange }[];
  /** Replacements or changes held back by maxUnavailable / maxSurge (for the status message). */
  held: number;
}

export interface PlanInput {
  replicas: number;
  strategy: UpdateStrategy;
  slots: readonly SlotState[];
  /**
   * The pool's GpuVms of an older revision being deleted (replaced): they hold their GPUs until they are gone,
   * so they count against maxSurge.
   */
  replacedTerminating: number;
}

/** The removals decided so far in a pass, and what is left. */
class Removals {
  readonly reasons = new Map<string, RemovalReason>();
  readonly #slots: readonly SlotState[];

  constructor(slots: readonly SlotState[]) {
    this.#slots = slots;
  }

  drop(slot: SlotState, why: RemovalReason): void {
    this.reasons.set(slot.name, why);
  }

  kept(): SlotState[] {
    return this.#slots.filter((slot) => !this.reasons.has(slot.name));
  }
}

function countReady(slots: readonly SlotState[]): number {
  return slots.filter((slot) => slot.ready).length;
}

/** Remove the outdated replicas that the budget allows (a not-Ready one costs nothing); how many, how many held. */
function replaceOutdated(input: PlanInput, removals: Removals): { replaced: number; held: number } {
  let allowed = countReady(removals.kept()) - (input.replicas - input.strategy.maxUnavailable);
  let replaced = 0;
  let held = 0;
  for (const slot of removalOrder(removals.kept().filter((candidate) => candidate.outdated))) {
    if (slot.ready && allowed <= 0) {
      held++;
      continue;
    }
    if (slot.ready) allowed--;
    removals.drop(slot, "replace");
    replaced++;
  }
  return { replaced, held };
}

/** In-place changes within the budget: at least one at a time (the VM goes down briefly) even with maxUnavailable 0. */
function changeInPlace(
  input: PlanInput,
  remaining: readonly SlotState[],
): { change: PoolPlan["change"]; held: number } {
  let allowed = countReady(remaining) - (input.replicas - Math.max(1, input.strategy.maxUnavailable));
  const change: PoolPlan["change"] = [];
  let held = 0;
  for (const slot of removalOrder(remaining.filter((candidate) => !candidate.outdated))) {
    if (slot.change === undefined) continue;
    const free = !slot.change.disruptive || !slot.ready;
    if (!free && allowed <= 0) {
      held++;
      continue;
    }
    if (!free) allowed--;
    change.push({ name: slot.name, change: slot.change });
  }
  return { change, held };
}

export function planPool(input: PlanInput): PoolPlan {
  const { replicas, strategy } = input;
  const rolling = strategy.type === "RollingReplace";
  const removals = new Removals(input.slots);
  for (const slot of input.slots) {
    if (slot.movable) removals.drop(slot, "capacity");
    // A replica recorded but never started from an older template is not started from it now.
    else if (slot.outdated && !slot.started) removals.drop(slot, "replace");
  }
  const outdated = rolling ? removals.kept().filter((slot) => slot.outdated).length : 0;
  const surge = outdated > 0 ? strategy.maxSurge : 0;
  const excess = removals.kept().length - (replicas + surge);
  for (const victim of removalOrder(removals.kept()).slice(0, Math.max(0, excess))) removals.drop(victim, "scale-down");

  const replacement = rolling ? replaceOutdated(input, removals) : { replaced: 0, held: 0 };
  const remaining = removals.kept();
  let add = Math.max(0, replicas - remaining.length);
  if (rolling) {
    // While replacing, the GPUs of replicas being removed are not free yet: with maxSurge 0 a replacement is
    // created once its predecessor is gone.
    const busy = input.replacedTerminating + replacement.replaced;
    const room = replicas + surge - remaining.length - busy;
    const missing = replicas - remaining.filter((slot) => !slot.outdated).length;
    add = Math.max(0, Math.min(missing, room));
  }
  const inPlace = rolling ? changeInPlace(input, remaining) : { change: [], held: 0 };
  return {
    remove: [...removals.reasons].map(([name, why]) => ({ name, why })),
    add,
    change: inPlace.change,
    held: replacement.held + inPlace.held,
  };
}
