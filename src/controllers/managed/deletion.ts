// Deleting an object's cloud resource (after its dependents let go of it), trusting no absence but our own
// DELETE's success or a confirmed one; then the object is released (core/lifecycle.ts).

import { REASONS } from "../../api/common.ts";
import { isUnsupported } from "../../cloud/errors.ts";
import { cannotDo, isCloudConflict, isCloudNotFound, ORPHAN_TO_RELEASE, ReconcileError } from "../core/classify.ts";
import { release } from "../core/lifecycle.ts";
import type { ManagedSpecBase } from "../core/object-model.ts";
import { after, type Step, verdict } from "../core/verdict.ts";
import { confirmAbsence } from "./absence.ts";
import { sendAction } from "./action-intents.ts";
import type { Observation } from "./external.ts";
import { type CloudConnection, type Pass, withDraft } from "./pass.ts";

export async function deleteResource<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  observed: Observation,
): Promise<Step> {
  const { timing } = pass.services;
  if (!observed.exists) {
    // Gone only when our own DELETE said so, or no read has shown it for a while: a slow read is no proof.
    const held = pass.claim?.id ?? pass.draft.createPending?.cloudName;
    if (held !== undefined && !ownDeleteSucceeded(pass)) {
      const absence = confirmAbsence(pass, held, "the object is let go");
      if (!absence.gone) return absence.waiting;
    }
    return release(pass, "Normal", "cloud resource deleted");
  }
  const blocker = connection.external.deleteBlocker?.(pass.mr, observed);
  if (blocker !== undefined) {
    // Looked at again either way: a blocker the user lifts is seen at the next look, and the deletion goes on.
    return blocker.needsAction
      ? verdict(REASONS.InUse, blocker.message, after(timing.shortMs * 5), { stalled: true, event: "Warning" })
      : verdict(REASONS.WaitingForDependency, blocker.message, after(timing.shortMs * 5), { progressing: true });
  }
  if (observed.busy) {
    return verdict(REASONS.Deleting, "waiting for the resource to settle before deleting", after(timing.shortMs), {
      progressing: true,
    });
  }
  try {
    const action = await connection.external.delete(pass.mr, observed.id, pass.signal);
    const sent = await sendAction(pass, connection, action, observed.id);
    if ("verdict" in sent) return sent.verdict;
    pass.logger.info({ id: observed.id, operation: sent.operation.operation_id }, "delete requested");
    return verdict(
      REASONS.Deleting,
      `deleting cloud resource ${pass.cloudName} (id ${observed.id})`,
      after(timing.operationFallbackMs),
      {
        progressing: true,
        event: "Normal",
      },
    );
  } catch (error) {
    if (isCloudNotFound(error)) return goneOrNotSupported(pass, connection, observed.id, error);
    if (isUnsupported(error)) throw cannotDo(error, ORPHAN_TO_RELEASE);
    if (isCloudConflict(error)) {
      const text = error instanceof Error ? error.message : String(error);
      return verdict(REASONS.WaitingForDependency, text, after(timing.shortMs * 5), { progressing: true });
    }
    throw error;
  }
}

/** The newest operation of the object is its DELETE, and it succeeded. */
function ownDeleteSucceeded<Spec extends ManagedSpecBase>(pass: Pass<Spec>): boolean {
  const newest = pass.draft.operations?.[0];
  return newest?.name === "DELETE" && newest.state === "SUCCEEDED";
}

/**
 * A delete answered 404. Usually the resource is already gone; but a server without the delete endpoint may
 * answer a well-formed not-found too, and a cloud whose reads lag its creates answers 404 for a resource it made
 * a moment ago (whose operation told us it exists). One fresh read tells the first apart: still there means the
 * server cannot delete it, and releasing the object would leave the resource behind unannounced. Not there
 * proves nothing yet: the object is released only once no read has shown the resource for `goneConfirmMs`, and a
 * resource that shows up meanwhile is deleted.
 */
async function goneOrNotSupported<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  id: string,
  error: unknown,
): Promise<Step> {
  const again = await connection.external.observe(
    withDraft(pass.mr, pass.draft),
    { cloudName: pass.cloudName, notBefore: pass.services.now() },
    pass.signal,
  );
  if (!again.exists) {
    const absence = confirmAbsence(pass, id, "the object is let go");
    if (!absence.gone) return absence.waiting;
    return release(pass, "Normal", "cloud resource already gone");
  }
  const detail = error instanceof Error ? error.message : String(error);
  throw new ReconcileError(
    REASONS.NotSupported,
    `the delete was answered "not found" (${detail}) but the cloud still shows ${again.id}: this server cannot delete it; ${ORPHAN_TO_RELEASE}`,
    { cause: error },
  );
}
