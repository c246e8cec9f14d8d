// A resource that does not exist (yet): create it, crash-safely. The cloud name's claim is taken first (one
// winner however many objects, replicas or shards race for it), then the create intent (`status.createPending`)
// is written and confirmed before the POST, so a crash or a lost answer makes the next pass look the name up and
// adopt instead of creating a second resource. A resource this object held that no read shows any more is
// created again only once its absence is confirmed (absence.ts). Also the location walk when a location has no
// capacity. Budgets and the capacity queue (spend.ts, ADR 0030): a VM waiting for capacity goes only in its turn
// (before anything is written), and the create's amount is reserved after the intent, before the POST.

import { REASONS } from "../../api/common.ts";
import { cloudStatus, isCloudConflict, requestRefused } from "../core/classify.ts";
import type { ManagedSpecBase, ManagedStatusBase } from "../core/object-model.ts";
import { intentRefused } from "../core/status-building.ts";
import { after, conflict, DONE, type Verdict, verdict } from "../core/verdict.ts";
import { confirmAbsence } from "./absence.ts";
import { adoptFound, foreignResourceMessage, heldByOtherMessage, nameConflict } from "./adoption.ts";
import { recordOperation, UNKNOWN_OUTCOME } from "./operation-tracking.ts";
import { holderOf, slotOf } from "./ownership.ts";
import type { CloudConnection, Pass } from "./pass.ts";
import { capacityPairOf, capacityTurn, createNeed, releaseSpend, reserve, stillWaiting } from "./spend.ts";

/** The observation found nothing: wait for a fresh create to become readable, or (re)create. */
export async function createAbsent<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  resolved: unknown,
): Promise<Verdict> {
  const { mr, draft } = pass;
  const { timing } = pass.services;
  if (mr.spec.id !== undefined) {
    return verdict(REASONS.InvalidSpec, `cloud resource ${mr.spec.id} (spec.id) does not exist`, DONE, {
      stalled: true,
      event: "Warning",
    });
  }
  const held = pass.claim?.id;
  if (held !== undefined && withinCreateGrace(pass, draft)) {
    return verdict(REASONS.Creating, `waiting for ${held} to become readable`, after(timing.shortMs), {
      progressing: true,
    });
  }
  if (held !== undefined && pass.claim !== undefined) {
    const absence = confirmAbsence(pass, held, "it is created again");
    if (!absence.gone) return absence.waiting;
    const written = await pass.services.claims.recordId(pass.claim, undefined);
    if (written.type !== "written") return conflict();
    pass.claim = written.claim;
    pass.services.options.kube.event(
      mr,
      "Warning",
      REASONS.Creating,
      `cloud resource ${held} is gone; creating it again`,
    );
    delete draft.id;
  }
  return create(pass, connection, resolved);
}

/** A create that succeeded (or whose outcome is unknown) moments ago may not be readable yet. */
function withinCreateGrace<Spec extends ManagedSpecBase>(pass: Pass<Spec>, draft: ManagedStatusBase): boolean {
  const create = (draft.operations ?? []).find(
    (o) => o.name === "CREATE" && (o.state === "SUCCEEDED" || o.state === UNKNOWN_OUTCOME),
  );
  if (create?.completedAt === undefined || create.completedAt === "") return false;
  const completed = Date.parse(create.completedAt);
  return !Number.isNaN(completed) && pass.services.now() - completed < pass.services.timing.createGraceMs;
}

/**
 * The payment method may have gone since it was last read (it is cached): a create refused with 403 is read
 * as PaymentMethodRequired when the organization says so, not as invalid credentials.
 */
async function paymentRefusal<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  error: unknown,
): Promise<Verdict | undefined> {
  if (cloudStatus(error) !== 403) return undefined;
  const problem = await connection.paymentProblem(pass.signal, { fresh: true });
  if (problem === undefined) return undefined;
  delete pass.draft.createPending;
  await releaseSpend(pass.services.options.spend, pass.mr);
  return verdict(REASONS.PaymentMethodRequired, problem, after(pass.services.timing.dependencyMs * 2), {
    stalled: true,
    event: "Warning",
  });
}

async function create<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  resolved: unknown,
): Promise<Verdict> {
  const { mr, draft, services } = pass;
  const { timing } = services;
  const paymentProblem = await connection.paymentProblem(pass.signal);
  if (paymentProblem !== undefined) {
    return verdict(REASONS.PaymentMethodRequired, paymentProblem, after(timing.dependencyMs * 2), {
      stalled: true,
      event: "Warning",
    });
  }
  const locations = services.options.locations(mr.spec);
  // A VM waiting for capacity goes only in its turn: nothing is claimed or written before it.
  const turn = capacityTurn(pass, locations[draft.locationIndex ?? 0] ?? locations[0]);
  if ("wait" in turn) return turn.wait;
  const location = turn.location;
  const need = createNeed(pass);
  const intent = draft.createPending;
  // An intent written by this pass has had no POST yet: a 409 answer to this POST proves the name is not ours.
  const freshIntent = intent === undefined || intent.cloudName !== pass.cloudName || intent.location !== location;
  if (freshIntent) {
    // Still waiting for a budget, as the cached budgets show: nothing to write until its turn comes.
    const waiting = stillWaiting(pass, need);
    if (waiting !== undefined) return waiting;
  }
  // The name's claim first: nobody else holds or creates under it from here on.
  const claimed = await claimName(pass, connection);
  if (claimed !== undefined) return claimed;
  if (freshIntent) {
    const stop = await recordIntent(pass, location);
    if (stop !== undefined) return stop;
  } else {
    const existing = await connection.external.findByName(pass.cloudName, pass.signal);
    if (existing !== undefined) return adoptFound(pass, connection, existing);
  }
  // Claim, intent, then the reservation (ADR 0030): the budget's sweep finds the intent of every entry in flight.
  const waiting = await reserveOrDropIntent(pass, need, freshIntent);
  if (waiting !== undefined) return waiting;
  try {
    return await sendCreate(pass, connection, resolved, location);
  } catch (error) {
    const refused = await paymentRefusal(pass, connection, error);
    if (refused !== undefined) return refused;
    if (isCloudConflict(error)) return nameInUse(pass, connection, freshIntent);
    // Refused outright (a 4xx): this POST created nothing, so its intent goes, unless an earlier POST under the
    // same intent may have created the resource (its proof is kept for the name lookup).
    if (freshIntent && requestRefused(error)) {
      delete pass.draft.createPending;
      await releaseSpend(services.options.spend, mr);
    }
    throw error;
  }
}

/**
 * Reserve the create's amount. An object that must wait drops the intent this pass wrote (nothing was sent under
 * it); one written before stays, as the proof an earlier POST may need.
 */
async function reserveOrDropIntent<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  need: ReturnType<typeof createNeed>,
  freshIntent: boolean,
): Promise<Verdict | undefined> {
  try {
    const waiting = await reserve(pass, need);
    if (waiting !== undefined && freshIntent) delete pass.draft.createPending;
    return waiting;
  } catch (error) {
    if (freshIntent) delete pass.draft.createPending;
    throw error;
  }
}

/**
 * Hold the claim of the cloud name this pass creates under (taking it when nobody has it); one taken before for
 * another name (with nothing recorded in it) is given up: an object holds one claim. A verdict when another
 * object holds the name.
 */
async function claimName<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
): Promise<Verdict | undefined> {
  const { claims, timing, options } = pass.services;
  const held = pass.claim;
  if (held !== undefined && held.cloudName === pass.cloudName) return undefined;
  const acquired = await claims.acquire(
    slotOf(options.kind, connection.account, pass.cloudName),
    holderOf(pass.mr),
    pass.key,
  );
  if (acquired.type === "taken") {
    return nameConflict(
      heldByOtherMessage(pass, acquired.claim, `the cloud name ${pass.cloudName}`),
      timing.nameConflictRetryMs,
    );
  }
  if (held !== undefined && held.id === undefined) await claims.release(held);
  pass.claim = acquired.claim;
  return undefined;
}

/**
 * Write the create intent, confirmed before the POST: a crash after it makes the next pass look the name up
 * first instead of creating a second resource. A verdict when the pass must stop.
 */
async function recordIntent<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  location: string | undefined,
): Promise<Verdict | undefined> {
  const { mr, draft, services } = pass;
  draft.createPending = {
    cloudName: pass.cloudName,
    ...(location !== undefined ? { location } : {}),
    requestedAt: new Date(services.now()).toISOString(),
  };
  const written = await services.writeStatus(mr, draft);
  if (written.type === "invalid") {
    return intentRefused(pass.logger, "CREATE", written.message, services.timing.terminalRetryMs);
  }
  if (written.type !== "written") return conflict();
  mr.status = structuredClone(draft);
  return undefined;
}

async function sendCreate<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  resolved: unknown,
  location: string | undefined,
): Promise<Verdict> {
  const { mr, draft } = pass;
  const { timing } = pass.services;
  const target = { cloudName: pass.cloudName, ...(location !== undefined ? { location } : {}) };
  const answer = await connection.external.create(mr, resolved, target, pass.signal);
  const queue = capacityPairOf(pass, location);
  if (answer.type === "capacityUnavailable") {
    delete draft.createPending;
    queue?.capacity.outOfStock(queue.type, queue.location);
    await releaseSpend(pass.services.options.spend, mr);
    return nextLocation(pass, answer.message);
  }
  if (answer.type === "blocked") {
    return verdict(answer.reason, answer.message, after(timing.dependencyMs), { stalled: true, event: "Warning" });
  }
  const { operation } = answer;
  queue?.capacity.started(pass.key);
  draft.id = operation.metadata.id;
  Object.assign(draft, answer.statusFields);
  recordOperation(pass, connection, operation);
  // The resource is this object's from now on; a failed write is made good by the next pass, which finds it by
  // name with the create intent as proof.
  if (pass.claim !== undefined) {
    try {
      const written = await pass.services.claims.recordId(pass.claim, draft.id);
      if (written.type === "written") pass.claim = written.claim;
    } catch (error) {
      pass.logger.info({ err: error, id: draft.id }, "the claim could not record the new id yet");
    }
  }
  pass.logger.info({ id: draft.id, location, operation: operation.operation_id }, "create requested");
  const where = location ? ` in ${location}` : "";
  return verdict(REASONS.Creating, `creating ${pass.cloudName}${where}`, after(timing.operationFallbackMs), {
    progressing: true,
    event: "Normal",
  });
}

/**
 * The create was answered 409: an earlier POST under this intent went through (adopted with proof), or the
 * name is not ours. This very POST created nothing, so after the first POST of an intent it is never ours.
 */
async function nameInUse<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  freshIntent: boolean,
): Promise<Verdict> {
  const { timing } = pass.services;
  const found = await connection.external.findByName(pass.cloudName, pass.signal);
  if (found !== undefined && freshIntent) {
    delete pass.draft.createPending;
    return nameConflict(foreignResourceMessage(pass.cloudName, found.id), timing.nameConflictRetryMs);
  }
  if (found !== undefined) return adoptFound(pass, connection, found);
  return verdict(REASONS.Creating, `name ${pass.cloudName} is in use but not readable yet`, after(timing.shortMs), {
    progressing: true,
  });
}

/** The location had no capacity: try the next candidate, or wait for capacity when all answered so. */
export function nextLocation<Spec extends ManagedSpecBase>(pass: Pass<Spec>, message: string): Verdict {
  const locations = pass.services.options.locations(pass.mr.spec);
  const index = (pass.draft.locationIndex ?? 0) + 1;
  if (index < locations.length) {
    pass.draft.locationIndex = index;
    return verdict(REASONS.CapacityUnavailable, `${message}; trying location ${locations[index]}`, after(0), {
      progressing: true,
      event: "Warning",
    });
  }
  pass.draft.locationIndex = 0;
  const all = locations.length > 0 ? ` in ${locations.join(", ")}` : "";
  return verdict(
    REASONS.CapacityUnavailable,
    `no capacity${all}: ${message}`,
    after(pass.services.timing.capacityRetryMs),
    {
      stalled: true,
      event: "Warning",
    },
  );
}
