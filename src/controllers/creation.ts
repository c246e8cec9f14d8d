// A resource that does not exist (yet): create it, crash-safely. The create intent (`status.createPending`) is
// written and confirmed before the POST, so a crash or a lost answer makes the next pass look the name up and
// adopt instead of creating a second resource. Also the location walk when a location has no capacity.
import { cloudStatus, isCloudConflict, REASON, type Reason, type Verdict } from "./classify.ts";
import type { ManagedSpecBase, ManagedStatusBase } from "./external.ts";
import { recordOperation } from "./operation-tracking.ts";
import { after, type CloudConnection, conflict, DONE, type Pass, verdict } from "./reconcile-pass.ts";

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

function withinCreateGrace<Spec extends ManagedSpecBase>(pass: Pass<Spec>, draft: ManagedStatusBase): boolean {
  const create = (draft.operations ?? []).find((o) => o.name === "CREATE" && o.state === "SUCCEEDED");
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
  const intent = draft.createPending;
  if (intent === undefined || intent.cloudName !== pass.cloudName || intent.location !== location) {
    // The intent is written and confirmed before the POST: a crash after it makes the next pass look up the
    // name first instead of creating a second resource.
    draft.createPending = {
      cloudName: pass.cloudName,
      ...(location !== undefined ? { location } : {}),
      requestedAt: new Date(services.now()).toISOString(),
    };
    const written = await services.writeStatus(mr, draft);
    if (written.type !== "written") return conflict();
    mr.status = structuredClone(draft);
  } else {
    const existing = await connection.external.findByName(pass.cloudName, pass.signal);
    if (existing !== undefined) return adopt(pass, existing);
  }
  try {
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
    if (mutation.operation === undefined)
      return verdict(REASON.Creating, "create requested", after(timing.shortMs), { progressing: true });
    draft.id = mutation.operation.metadata.id;
    Object.assign(draft, mutation.statusFields);
    recordOperation(pass, connection, mutation.operation);
    pass.logger.info({ id: draft.id, location, operation: mutation.operation.operation_id }, "create requested");
    return verdict(
      REASON.Creating,
      `creating ${pass.cloudName}${location ? ` in ${location}` : ""}`,
      after(timing.operationFallbackMs),
      {
        progressing: true,
        event: "Normal",
      },
    );
  } catch (error) {
    const refused = await paymentRefusal(pass, connection, error);
    if (refused !== undefined) return refused;
    if (!isCloudConflict(error)) throw error;
    // The name is ours (deterministic): a conflict means an earlier create went through. Adopt it.
    const id = await connection.external.findByName(pass.cloudName, pass.signal);
    if (id !== undefined) return adopt(pass, id);
    return verdict(
      REASON.NameConflict,
      `name ${pass.cloudName} is in use but not readable yet`,
      after(timing.shortMs),
      {
        progressing: true,
      },
    );
  }
}

/** Take over the resource our own create made (found by its name). */
export function adopt<Spec extends ManagedSpecBase>(pass: Pass<Spec>, id: string): Verdict {
  pass.draft.id = id;
  delete pass.draft.createPending;
  pass.services.options.kube.event(
    pass.mr,
    "Normal",
    REASON.Creating,
    `adopted cloud resource ${id} named ${pass.cloudName}`,
  );
  return verdict(REASON.Creating, `adopted ${id}`, after(0), { progressing: true });
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
