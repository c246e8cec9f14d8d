// The managed lifecycle's side of budgets and the capacity queue (docs/budgets.md, ADR 0026, ADR 0030): the port
// it calls around its cloud calls (SpendGuard, implemented over src/admission by controllers/budgets/), and the
// steps that call it. The order of a create (ADR 0030): the capacity queue's turn (in memory, nothing written),
// the name's claim (ADR 0021), the create intent, the reservation, the POST; of an action (START, a type change's
// STOP, a disk's RESIZE): its intent, the reservation, the request. A reservation is settled once the resource is
// seen as the spec asks (Available), released when a create is refused or finds no capacity, and when the object
// is let go. An object no budget covers passes through with one live list of its namespace's budgets per change.
import { queueMessage } from "../../admission/capacity-queue.ts";
import type { Need } from "../../admission/ledger.ts";
import { REASONS } from "../../api/common.ts";
import type { ManagedObject, ManagedSpecBase } from "../core/object-model.ts";
import { after, type Verdict, verdict } from "../core/verdict.ts";
import type { Existing } from "./external.ts";
import type { CapacityPort, Pass, Reservation, SpendWiring } from "./pass.ts";

function spendOf<Spec extends ManagedSpecBase>(pass: Pass<Spec>): SpendWiring<Spec> | undefined {
  return pass.services.options.spend;
}

function waitVerdict<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  reservation: Exclude<Reservation, { type: "admitted" }>,
  ready: boolean,
): Verdict {
  const { timing } = pass.services;
  if (reservation.type === "busy") {
    return verdict(REASONS.Creating, reservation.message, after(timing.shortMs), { progressing: true, ready });
  }
  // Parked: the budget's waiters that fit are woken when room frees (controllers/budgets/); the fallback only
  // covers a lost wake.
  return verdict(
    REASONS.BudgetExceeded,
    reservation.message,
    { type: "parked", fallbackMs: timing.capacityRetryMs },
    { stalled: true, event: "Warning", ready },
  );
}

/**
 * A create's turn in the capacity queue of its (type, location), before anything is written: undefined when it
 * may go on (to `location`, which the queue may have moved it to), else the verdict it waits with. Only a VM that
 * waits already (every location answered no) is held; its first try goes straight on.
 */
export function capacityTurn<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  location: string | undefined,
): { location: string | undefined } | { wait: Verdict } {
  const capacity = spendOf(pass)?.guard.capacity;
  const position = capacity?.position(pass.key);
  if (capacity === undefined || position === undefined || location === undefined) return { location };
  const locations = pass.services.options.locations(pass.mr.spec);
  const index = locations.indexOf(position.location);
  // A probe that found no room moved it to its next location: its status follows.
  if (index >= 0) pass.draft.locationIndex = index;
  if (capacity.mayTry(pass.key)) return { location: position.location };
  const message = `no capacity for ${position.type} yet: ${queueMessage(position)}`;
  return {
    wait: verdict(
      REASONS.CapacityUnavailable,
      message,
      { type: "parked", fallbackMs: pass.services.timing.capacityRetryMs },
      { stalled: true },
    ),
  };
}

/** The need of a create (undefined: nothing is guarded). */
export function createNeed<Spec extends ManagedSpecBase>(pass: Pass<Spec>): Need | undefined {
  const spend = spendOf(pass);
  return spend?.model.create(pass.mr.spec, spend.guard.prices());
}

/** Before any write of a create: an object the cached budgets show waiting, and not yet fitting, stays so. */
export function stillWaiting<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  need: Need | undefined,
): Verdict | undefined {
  const guard = spendOf(pass)?.guard;
  if (guard === undefined || need === undefined) return undefined;
  const waiting = guard.stillWaiting(pass.mr, need);
  return waiting === undefined || waiting.type === "admitted" ? undefined : waitVerdict(pass, waiting, false);
}

/**
 * After the intent is recorded, before the cloud call: reserve `need`. Undefined when admitted (or nothing is
 * guarded); else the verdict the object waits with (nothing was sent).
 */
export async function reserve<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  need: Need | undefined,
  ready = false,
): Promise<Verdict | undefined> {
  const guard = spendOf(pass)?.guard;
  if (guard === undefined || need === undefined) return undefined;
  const reservation = await guard.reserve(pass.mr, need);
  if (reservation.type === "admitted") return undefined;
  pass.logger.debug({ reservation: reservation.type, message: reservation.message }, "waiting for a budget");
  return waitVerdict(pass, reservation, ready);
}

/**
 * The resource is as the spec asks: its entries in the budgets follow what it bills. Best effort: the budget
 * reconciler counts what the caches show billing too, and a stale entry only ever counts more than is spent.
 */
export async function settleAsObserved<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  observed: Existing,
): Promise<void> {
  const spend = spendOf(pass);
  if (spend === undefined) return;
  try {
    await spend.guard.billed(pass.mr, spend.model.billing(observed, spend.guard.prices()));
  } catch (error) {
    pass.logger.info({ err: error }, "the budgets could not be settled yet; the next pass or their sweep will");
  }
}

/**
 * Nothing bills for this object (a create refused, or finding no capacity; the object let go): it gives back what
 * it holds and leaves the waiting lines. Best effort (the guard never throws): what is left counts against the
 * limit (the safe side) until the budget's sweep releases it.
 */
export async function releaseSpend(spend: SpendWiring<ManagedSpecBase> | undefined, mr: ManagedObject): Promise<void> {
  await spend?.guard.release(mr);
}

/** The capacity queue's pair of a create, for its bookkeeping (started, out of stock, succeeded). */
export function capacityPairOf<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  location: string | undefined,
): { capacity: CapacityPort; type: string; location: string } | undefined {
  const spend = spendOf(pass);
  const capacity = spend?.guard.capacity;
  if (spend === undefined || capacity === undefined || location === undefined) return undefined;
  const pair = spend.model.capacityPair?.(pass.mr.spec, location);
  return pair === undefined ? undefined : { capacity, ...pair };
}
