// Non-idempotent actions (START, STOP, RESET, UPDATE, RESIZE, PATCH, DELETE) are sent only after their intent
// (`status.actionPending`) is durably recorded. A pass that finds an intent without its operation (the answer
// was lost, the process died, or the status write after the request failed) looks the operation up instead of
// sending the action again: a failed status write can never turn into a loop of actions.

import type { Operation } from "../cloud/wire.ts";
import { requestRefused, type Verdict } from "./classify.ts";
import type { ManagedSpecBase, Mutation } from "./external.ts";
import { recordOperation } from "./operation-tracking.ts";
import { type CloudConnection, conflict, type Pass } from "./reconcile-pass.ts";
import { intentRefused } from "./status-building.ts";

/** An action sent by this process whose operation status may not show yet (the write after it failed). */
export interface SentAction {
  requestedAt: string;
  operation: Operation;
}

type Sendable = Mutation & { send: () => Promise<Operation>; action: string };

export function isSendable(mutation: Mutation): mutation is Sendable {
  return mutation.send !== undefined && mutation.action !== undefined;
}

/**
 * Record the intent, then send. Returns the operation, or the verdict that ends the pass without sending (the
 * intent could not be recorded). A request refused outright drops its intent; an answer lost on the way keeps
 * it, for the next pass to look up.
 */
export async function sendAction<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  mutation: Sendable,
  resourceId: string,
): Promise<{ operation: Operation } | { verdict: Verdict }> {
  const { mr, draft, services } = pass;
  const requestedAt = new Date(services.now()).toISOString();
  draft.actionPending = {
    name: mutation.action,
    id: resourceId,
    requestedAt,
    ...(mutation.intentFields ? { fields: mutation.intentFields } : {}),
  };
  const written = await services.writeStatus(mr, draft);
  if (written.type !== "written") delete draft.actionPending;
  if (written.type === "invalid") {
    return { verdict: intentRefused(pass.logger, mutation.action, written.message, services.timing.terminalRetryMs) };
  }
  if (written.type !== "written") return { verdict: conflict() };
  mr.status = structuredClone(draft);
  let operation: Operation;
  try {
    operation = await mutation.send();
  } catch (error) {
    if (requestRefused(error)) delete draft.actionPending;
    throw error;
  }
  services.sentActions.set(pass.key, { requestedAt, operation });
  confirm(pass, connection, operation);
  Object.assign(draft, mutation.statusFields);
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
 * An intent in status without its operation: the operation this process saw, else the one the cloud lists for
 * the resource since the intent. Neither means the action was not carried out: the intent goes, and this pass
 * decides afresh from what it observes. Returns the time the observation must be fresher than.
 */
export async function resolvePendingAction<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
): Promise<number | undefined> {
  const pending = pass.draft.actionPending;
  if (pending === undefined) return undefined;
  const sent = pass.services.sentActions.get(pass.key);
  let operation = sent?.requestedAt === pending.requestedAt ? sent.operation : undefined;
  if (operation === undefined && connection.findOperations !== undefined) {
    operation = ownOperation(
      pass,
      await connection.findOperations(pending.id, pending.name, Date.parse(pending.requestedAt), pass.signal),
    );
  }
  pass.services.sentActions.delete(pass.key);
  if (operation !== undefined) {
    pass.logger.info(
      { action: pending.name, operation: operation.operation_id },
      "found the operation of a recorded action",
    );
    confirm(pass, connection, operation);
  } else {
    pass.logger.info(
      { action: pending.name, id: pending.id },
      "a recorded action was not carried out; deciding afresh",
    );
    delete pass.draft.actionPending;
  }
  // Either way the resource may have changed since the last list: the observation must be fresh.
  return pass.services.now();
}
