// Non-idempotent actions (START, STOP, RESET, UPDATE, RESIZE, PATCH, DELETE) are sent only after their intent
// (`status.actionPending`) is durably recorded, with the resource's updated_at as seen before sending. A pass that
// finds an intent without its operation (the answer was lost, the process died, the status write after the
// request failed, or another replica recorded it and may still be about to send it) never reads the absence of
// an operation as "not carried out" — a cloud forgets finished operations, and a replica that lost its Lease may
// be frozen between its intent and its request. It confirms from the resource (updated_at later than before the
// action: carried out) or holds, and decides afresh only once the intent's writer can no longer act (older than
// ReconcileTiming.intentHoldMs: the Lease duration plus the API timeout), or when this process's own request
// ended with an answer (the server had finished with it).

import { REASONS } from "../../api/common.ts";
import { isCloudError } from "../../cloud/errors.ts";
import type { Operation } from "../../cloud/wire.ts";
import { requestRefused } from "../core/classify.ts";
import type { ActionPending, ManagedSpecBase } from "../core/object-model.ts";
import { intentRefused } from "../core/status-building.ts";
import { after, conflict, type Verdict, verdict } from "../core/verdict.ts";
import type { Action } from "./external.ts";
import { recordOperation } from "./operation-tracking.ts";
import { type CloudConnection, type Pass, withDraft } from "./pass.ts";

/**
 * Record the intent, then send. Returns the operation, or the verdict that ends the pass without sending (the
 * intent could not be recorded, or `beforeSend` held it: a budget without room). A request refused outright drops
 * its intent; an answer lost on the way keeps it, for the next pass to look up.
 */
export async function sendAction<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  action: Action,
  resourceId: string,
  beforeSend?: () => Promise<Verdict | undefined>,
): Promise<{ operation: Operation } | { verdict: Verdict }> {
  const { mr, draft, services } = pass;
  const requestedAt = new Date(services.now()).toISOString();
  draft.actionPending = {
    name: action.action,
    id: resourceId,
    requestedAt,
    ...(pass.observedUpdatedAt !== undefined ? { resourceUpdatedAt: pass.observedUpdatedAt } : {}),
    ...(action.intentFields ? { fields: action.intentFields } : {}),
  };
  const written = await services.writeStatus(mr, draft);
  if (written.type !== "written") delete draft.actionPending;
  if (written.type === "invalid") {
    return { verdict: intentRefused(pass.logger, action.action, written.message, services.timing.terminalRetryMs) };
  }
  if (written.type !== "written") return { verdict: conflict() };
  mr.status = structuredClone(draft);
  // After the intent, before the request (the reservation): held, nothing is sent, so the intent goes.
  let hold: Verdict | undefined;
  try {
    hold = await beforeSend?.();
  } catch (error) {
    delete draft.actionPending;
    throw error;
  }
  if (hold !== undefined) {
    delete draft.actionPending;
    return { verdict: hold };
  }
  let operation: Operation;
  try {
    operation = await action.send();
  } catch (error) {
    if (requestRefused(error)) delete draft.actionPending;
    else services.sentActions.set(pass.key, { requestedAt, answered: isCloudError(error) && error.kind === "http" });
    throw error;
  }
  services.sentActions.set(pass.key, { requestedAt, operation });
  confirm(pass, connection, operation);
  return { operation };
}

/**
 * The action's operation is known: it goes into status, carrying the fields its intent had; they are set once
 * it succeeds (a failed RESET leaves the reset asked for, so it is sent again).
 */
function confirm<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  operation: Operation,
): void {
  const fields = pass.draft.actionPending?.fields;
  delete pass.draft.actionPending;
  recordOperation(pass, connection, operation, fields);
}

/**
 * Of the operations the cloud lists for the resource since about the intent (whole seconds), the one the intent
 * started: not one this object recorded already (an earlier attempt that failed), and not older than the intent.
 */
function ownOperation<Spec extends ManagedSpecBase>(pass: Pass<Spec>, listed: Operation[]): Operation | undefined {
  const pending = pass.draft.actionPending;
  if (pending === undefined) return undefined;
  const known = new Set((pass.draft.operations ?? []).map((op) => op.id));
  const since = Math.floor(Date.parse(pending.requestedAt) / 1000) * 1000 - 1000;
  return listed.find((op) => !known.has(op.operation_id) && !(Date.parse(op.started_at) < since));
}

/**
 * Whether the resource changed after the intent was recorded: its updated_at is later than the one seen before
 * sending (both the cloud's clock), or, for an intent recorded without it, not earlier than the intent's time.
 */
function changedSince(pending: ActionPending, updatedAt: string | undefined): boolean | undefined {
  const now = Date.parse(updatedAt ?? "");
  if (Number.isNaN(now)) return undefined;
  const before = Date.parse(pending.resourceUpdatedAt ?? "");
  return Number.isNaN(before) ? now >= Date.parse(pending.requestedAt) : now > before;
}

/** What became of a recorded action: the time the next observation must be fresher than, or a verdict to hold. */
export type PendingResolution = { notBefore?: number; hold?: Verdict };

/**
 * An intent in status without its operation: the operation this process saw, else the one the cloud lists for
 * the resource since the intent, else the resource itself (changed since: carried out). Without any of these the
 * intent is held while its writer may still send it, then dropped, and the pass decides afresh.
 */
export async function resolvePendingAction<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
): Promise<PendingResolution> {
  const pending = pass.draft.actionPending;
  if (pending === undefined) return {};
  const services = pass.services;
  const sent = services.sentActions.get(pass.key);
  const ours = sent?.requestedAt === pending.requestedAt ? sent : undefined;
  let operation = ours !== undefined && "operation" in ours ? ours.operation : undefined;
  if (operation === undefined && connection.findOperations !== undefined) {
    operation = ownOperation(
      pass,
      await connection.findOperations(pending.id, pending.name, Date.parse(pending.requestedAt), pass.signal),
    );
  }
  if (operation !== undefined) {
    services.sentActions.delete(pass.key);
    pass.logger.info(
      { action: pending.name, operation: operation.operation_id },
      "found the operation of a recorded action",
    );
    confirm(pass, connection, operation);
    return { notBefore: services.now() };
  }
  if (ours !== undefined && "answered" in ours && ours.answered) {
    // Our own request, and the server answered it (an error): what it did shows in the list by now.
    services.sentActions.delete(pass.key);
    pass.logger.info({ action: pending.name, id: pending.id }, "a recorded action was refused; deciding afresh");
    delete pass.draft.actionPending;
    return { notBefore: services.now() };
  }
  return confirmFromResource(pass, connection, pending);
}

/** No operation shows: the resource tells whether the action was carried out, else time tells when to stop waiting. */
async function confirmFromResource<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  pending: ActionPending,
): Promise<PendingResolution> {
  const services = pass.services;
  const now = services.now();
  const observed = await connection.external.observe(
    withDraft(pass.mr, pass.draft),
    { cloudName: pass.cloudName, notBefore: now },
    pass.signal,
  );
  const changed = observed.exists ? changedSince(pending, observed.updatedAt) : undefined;
  if (!observed.exists || changed === true) {
    // Gone, or changed after the intent: carried out (what it served is done); the pass decides from what it sees.
    services.sentActions.delete(pass.key);
    pass.logger.info(
      { action: pending.name, id: pending.id, updatedAt: observed.exists ? observed.updatedAt : undefined },
      "a recorded action shows in its resource; taken as carried out",
    );
    if (observed.exists) Object.assign(pass.draft, pending.fields);
    delete pass.draft.actionPending;
    return { notBefore: now };
  }
  const decideAt = Date.parse(pending.requestedAt) + services.timing.intentHoldMs;
  if (!(now < decideAt)) {
    services.sentActions.delete(pass.key);
    pass.logger.info(
      { action: pending.name, id: pending.id },
      "a recorded action was not carried out (no operation, no change, its writer can no longer send it); deciding afresh",
    );
    delete pass.draft.actionPending;
    return { notBefore: now };
  }
  const waitMs = decideAt - now;
  const message = `${pending.name} recorded at ${pending.requestedAt} shows no operation and no change of the resource yet: the replica that recorded it may still send it; decided afresh in ${Math.ceil(waitMs / 1000)} s unless it shows`;
  return {
    hold: verdict(REASONS.WaitingForOperation, message, after(Math.min(waitMs, services.timing.shortMs * 5)), {
      progressing: true,
    }),
  };
}
