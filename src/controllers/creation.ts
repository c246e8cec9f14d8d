// A resource that does not exist (yet): create it, crash-safely. The create intent (`status.createPending`) is
// written and confirmed before the POST, so a crash or a lost answer makes the next pass look the name up and
// adopt instead of creating a second resource. Also the location walk when a location has no capacity.

import { adoptFound, claimantOf, foreignResourceMessage, nameConflict, nameRival } from "./adoption.ts";
import { cloudStatus, isCloudConflict, REASON, type Reason, requestRefused, type Verdict } from "./classify.ts";
import type { ManagedSpecBase, ManagedStatusBase } from "./external.ts";
import { recordOperation, UNKNOWN_OUTCOME } from "./operation-tracking.ts";
import { legacyNameToCheck } from "./ownership.ts";
import { after, type CloudConnection, conflict, DONE, type Pass, verdict } from "./reconcile-pass.ts";
import { intentRefused } from "./status-building.ts";

/** The observation found nothing: wait for a fresh create to become readable, or (re)create. */
export async function createAbsent<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
): Promise<Verdict> {
  const { mr, draft } = pass;
  const { timing } = pass.services;
  if (mr.spec.id !== undefined) {
    return verdict(REASON.InvalidSpec, `cloud resource ${mr.spec.id} (spec.id) does not exist`, DONE, {
      stalled: true,
      event: "Warning",
    });
  }
  if (draft.id !== undefined && withinCreateGrace(pass, draft)) {
    return verdict(REASON.Creating, `waiting for ${draft.id} to become readable`, after(timing.shortMs), {
      progressing: true,
    });
  }
  if (draft.id !== undefined) {
    pass.services.options.kube.event(
      mr,
      "Warning",
      REASON.Creating,
      `cloud resource ${draft.id} is gone; creating it again`,
    );
    delete draft.id;
  }
  return create(pass, connection);
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
  return verdict(REASON.PaymentMethodRequired, problem, after(pass.services.timing.dependencyMs * 2), {
    stalled: true,
    event: "Warning",
  });
}

async function create<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
): Promise<Verdict> {
  const { mr, draft, services } = pass;
  const { timing } = services;
  const paymentProblem = await connection.paymentProblem(pass.signal);
  if (paymentProblem !== undefined) {
    return verdict(REASON.PaymentMethodRequired, paymentProblem, after(timing.dependencyMs * 2), {
      stalled: true,
      event: "Warning",
    });
  }
  const locations = services.options.locations(mr.spec);
  const location = locations[draft.locationIndex ?? 0] ?? locations[0];
  // Nobody else may hold or be creating this name (checked and reserved without yielding: two workers never
  // both pass here for one name).
  const rival = nameRival(pass, pass.cloudName);
  if (rival !== undefined) return nameConflict(rival, timing.nameConflictRetryMs);
  const intent = draft.createPending;
  // An intent written by this pass has had no POST yet: a 409 answer to this POST proves the name is not ours.
  const freshIntent = intent === undefined || intent.cloudName !== pass.cloudName || intent.location !== location;
  if (freshIntent) {
    const stop = await recordIntent(pass, connection, location);
    if (stop !== undefined) return stop;
  } else {
    const existing = await connection.external.findByName(pass.cloudName, pass.signal);
    if (existing !== undefined) return adoptFound(pass, existing);
  }
  try {
    return await sendCreate(pass, connection, location);
  } catch (error) {
    const refused = await paymentRefusal(pass, connection, error);
    if (refused !== undefined) return refused;
    if (isCloudConflict(error)) return nameInUse(pass, connection, freshIntent);
    // Refused outright (a 4xx): this POST created nothing, so its intent goes, unless an earlier POST under the
    // same intent may have created the resource (its proof is kept for the name lookup).
    if (freshIntent && requestRefused(error)) delete pass.draft.createPending;
    throw error;
  }
}

/**
 * Reserve the name and write the create intent, confirmed before the POST: a crash after it makes the next
 * pass look the name up first instead of creating a second resource. A verdict when the pass must stop.
 */
async function recordIntent<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  location: string | undefined,
): Promise<Verdict | undefined> {
  const { mr, draft, services } = pass;
  const legacy = await legacyResource(pass, connection);
  if (legacy !== undefined) return nameConflict(legacy, services.timing.nameConflictRetryMs);
  if (nameRival(pass, pass.cloudName) !== undefined) return conflict(); // taken meanwhile: look again
  const createdAtMs = claimantOf(pass).createdAtMs;
  services.claims.reserve(pass.key, draft.projectId ?? "", pass.cloudName, mr.metadata.resourceVersion, createdAtMs);
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
  location: string | undefined,
): Promise<Verdict> {
  const { mr, draft } = pass;
  const { timing } = pass.services;
  const target = { cloudName: pass.cloudName, ...(location !== undefined ? { location } : {}) };
  const mutation = await connection.external.create(mr, target, pass.signal);
  if (mutation.capacityUnavailable !== undefined) {
    delete draft.createPending;
    return nextLocation(pass, mutation.capacityUnavailable);
  }
  if (mutation.refused !== undefined) {
    return verdict(mutation.refused.reason as Reason, mutation.refused.message, DONE, {
      stalled: true,
      event: "Warning",
    });
  }
  if (mutation.blocked !== undefined) {
    return verdict(mutation.blocked.reason, mutation.blocked.message, after(timing.dependencyMs), {
      stalled: true,
      event: "Warning",
    });
  }
  if (mutation.waiting !== undefined) {
    return verdict(REASON.WaitingForDependency, mutation.waiting, after(timing.dependencyMs), { progressing: true });
  }
  if (mutation.operation === undefined)
    return verdict(REASON.Creating, "create requested", after(timing.shortMs), { progressing: true });
  draft.id = mutation.operation.metadata.id;
  Object.assign(draft, mutation.statusFields);
  recordOperation(pass, connection, mutation.operation);
  pass.logger.info({ id: draft.id, location, operation: mutation.operation.operation_id }, "create requested");
  const where = location ? ` in ${location}` : "";
  return verdict(REASON.Creating, `creating ${pass.cloudName}${where}`, after(timing.operationFallbackMs), {
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
  if (found !== undefined) return adoptFound(pass, found);
  return verdict(REASON.Creating, `name ${pass.cloudName} is in use but not readable yet`, after(timing.shortMs), {
    progressing: true,
  });
}

/**
 * A resource under the object's default name of versions before 0.2 that nobody holds: probably this object's
 * own from before an upgrade (its status lost). Never created around silently: the message says how to adopt it.
 */
async function legacyResource<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
): Promise<string | undefined> {
  const legacy = legacyNameToCheck(pass.mr, pass.cloudName);
  if (legacy === undefined) return undefined;
  const found = await connection.external.findByName(legacy, pass.signal);
  if (found === undefined) return undefined;
  const projectId = pass.draft.projectId ?? "";
  // Another object holds it, or is creating it under that name (its own default name now): not a leftover.
  const { claims } = pass.services;
  const others = [...claims.holdersOf(projectId, found.id), ...claims.claimantsOfName(projectId, legacy)];
  if (others.some((key) => key !== pass.key)) return undefined;
  return `a cloud resource named ${legacy} (id ${found.id}), this object's default name before version 0.2, exists and no object manages it: set spec.id: ${found.id} to manage it, or delete it`;
}

/** The location had no capacity: try the next candidate, or wait for capacity when all answered so. */
export function nextLocation<Spec extends ManagedSpecBase>(pass: Pass<Spec>, message: string): Verdict {
  const locations = pass.services.options.locations(pass.mr.spec);
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
  return verdict(
    REASON.CapacityUnavailable,
    `no capacity${all}: ${message}`,
    after(pass.services.timing.capacityRetryMs),
    {
      stalled: true,
      event: "Warning",
    },
  );
}
