// Cloud operations of one object: recorded in status when a mutation starts one (`status.operation` and the
// newest-first history), and moved to history when the per-credential trackers see them settle. No worker ever
// waits on an operation: the trackers wake the key, and a fallback requeue covers lost wake-ups.

import { MAX_OPERATION_HISTORY, REASONS } from "../../api/common.ts";
import type { Operation } from "../../cloud/wire.ts";
import type { ManagedSpecBase, OperationRecord } from "../core/object-model.ts";
import { isReady } from "../core/object-model.ts";
import { after, isReason, type Verdict, verdict } from "../core/verdict.ts";
import type { CloudConnection, Pass } from "./pass.ts";

/**
 * Put a just-started operation into the draft status and start tracking it. `fields` are what the action
 * served (status fields set once it succeeds).
 */
export function recordOperation<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  operation: Operation,
  fields?: Record<string, string>,
): void {
  const recorded: OperationRecord = {
    id: operation.operation_id,
    name: operation.metadata.operation_name,
    state: operation.state,
    ...(operation.started_at ? { startedAt: operation.started_at } : {}),
  };
  pass.draft.operation = fields !== undefined ? { ...recorded, fields } : recorded;
  pass.draft.operations = [recorded, ...(pass.draft.operations ?? [])].slice(0, MAX_OPERATION_HISTORY);
  if (operation.state === "IN_PROGRESS") connection.operation(operation.operation_id, pass.key, operation.started_at);
  else applyOutcomeFields(pass, pass.draft.operation);
}

/**
 * The fields an action served are set once it succeeded (or ended unseen: not knowing, it is not repeated);
 * a FAILED one leaves them unset, so that what it was for is asked again.
 */
function applyOutcomeFields<Spec extends ManagedSpecBase>(pass: Pass<Spec>, operation: OperationRecord): void {
  const { fields, ...rest } = operation;
  if (fields === undefined) return;
  if (operation.state === "SUCCEEDED" || operation.state === UNKNOWN_OUTCOME) Object.assign(pass.draft, fields);
  if (operation.state !== "IN_PROGRESS") pass.draft.operation = rest;
}

/** `status.operation.state` of an operation that left the lists before anyone saw how it ended. */
export const UNKNOWN_OUTCOME = "UNKNOWN";

export interface OperationFailure {
  code: string;
  message: string;
}

export interface Settlement {
  /** The operation is still running: this verdict ends the pass. */
  verdict?: Verdict;
  /** Lists taken before this time (ms) do not show the operation's effect. */
  notBefore?: number;
  failure?: OperationFailure;
  /** The server cannot show this operation: its resource must tell when it is over (operation-following.ts). */
  follow?: OperationRecord;
}

/** Move the operation in flight to history in its final state. */
export function closeOperation<Spec extends ManagedSpecBase>(pass: Pass<Spec>, final: OperationRecord): void {
  pass.draft.operation = final;
  applyOutcomeFields(pass, final);
  const { fields: _fields, ...history } = final;
  pass.draft.operations = [history, ...(pass.draft.operations ?? []).filter((o) => o.id !== final.id)].slice(
    0,
    MAX_OPERATION_HISTORY,
  );
  if (final.name === "CREATE" && final.state === "SUCCEEDED") delete pass.draft.createPending;
}

/** Move a finished operation from "in flight" to history; a still running one ends this reconcile. */
export function settleOperation<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
): Settlement {
  const current = pass.draft.operation;
  if (current === undefined || current.state !== "IN_PROGRESS") return {};
  const progress = connection.operation(current.id, pass.key, current.startedAt);
  if (progress.state === "pending") {
    // The pass that started the operation already said what is going on ("creating …", Reconciling=True): a
    // pass woken meanwhile (our own writes coming back) keeps that story, so waiting costs no status write.
    const conditions = pass.mr.status.conditions ?? [];
    const said = conditions.find((c) => c.type === "Ready");
    const progressing = conditions.some((c) => c.type === "Reconciling" && c.status === "True");
    const story =
      progressing && said?.observedGeneration === pass.mr.metadata.generation && isReason(said.reason)
        ? { reason: said.reason, message: said.message ?? "" }
        : {
            reason: current.name === "DELETE" ? REASONS.Deleting : REASONS.WaitingForOperation,
            message: `waiting for ${current.name} operation ${current.id}`,
          };
    return {
      verdict: verdict(story.reason, story.message, after(pass.services.timing.operationFallbackMs), {
        progressing: true,
        ready: isReady(pass.mr.status),
      }),
    };
  }
  if (progress.state === "unreadable") return { follow: current };
  // An operation that vanished from the lists (retention, a server that forgets) has an unknown outcome: it is
  // recorded as such, and the fresh observation that follows (notBefore) decides what became of the resource.
  closeOperation(
    pass,
    progress.state === "settled"
      ? { ...current, state: progress.operation.state, completedAt: progress.operation.completed_at }
      : { ...current, state: UNKNOWN_OUTCOME, completedAt: new Date(progress.settledAt).toISOString() },
  );
  if (progress.state === "settled" && progress.operation.state === "FAILED") {
    const message = failureText(progress.operation);
    pass.draft.lastError = message;
    return { notBefore: progress.settledAt, failure: { code: failureCode(progress.operation), message } };
  }
  return { notBefore: progress.settledAt };
}

function failureText(operation: Operation): string {
  const result = operation.result as { code?: unknown; message?: unknown } | null;
  const code = typeof result?.code === "string" ? result.code : "unknown";
  const message = typeof result?.message === "string" ? result.message : "";
  return `${operation.metadata.operation_name} failed: ${code}${message ? `: ${message}` : ""}`;
}

function failureCode(operation: Operation): string {
  const result = operation.result as { code?: unknown } | null;
  return typeof result?.code === "string" ? result.code : "unknown";
}
