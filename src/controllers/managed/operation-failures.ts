// What a FAILED cloud operation means for the object, by the cloud's failure code (the table is in
// docs/operator.md): a transient failure is retried with backoff (Reconciling), `out_of_stock` walks to the next
// location, a failed create with `already_exists` adopts by name only with proof, and anything else stalls. A create
// that failed for good gives its budgets back (nothing bills); one out of stock closes its capacity queue's pair
// until the next probe.

import { REASONS } from "../../api/common.ts";
import type { ManagedSpecBase } from "../core/object-model.ts";
import { after, conflict, type Verdict, verdict } from "../core/verdict.ts";
import { adoptFound } from "./adoption.ts";
import { nextLocation } from "./creation.ts";
import type { OperationFailure } from "./operation-tracking.ts";
import type { CloudConnection, Pass } from "./pass.ts";
import { capacityPairOf, releaseSpend } from "./spend.ts";

/** Failure codes after which the same request may well succeed: retried with backoff, never a stall. */
export const RETRYABLE_FAILURE_CODES: ReadonlySet<string> = new Set([
  "internal_error",
  "internal",
  "unavailable",
  "timeout",
  "deadline_exceeded",
  "aborted",
  "invalid_state",
]);

export type FailureClass = "retryable" | "capacity" | "exists" | "terminal";

/** How a FAILED operation's code is treated (unknown codes are terminal: a person looks first). */
export function classifyFailure(code: string): FailureClass {
  if (RETRYABLE_FAILURE_CODES.has(code)) return "retryable";
  if (code === "out_of_stock") return "capacity";
  if (code === "already_exists") return "exists";
  return "terminal";
}

export async function handleFailedOperation<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  { code, message }: OperationFailure,
): Promise<Verdict> {
  const failureClass = classifyFailure(code);
  const creating = pass.draft.operation?.name === "CREATE";
  if (creating) {
    // The create did not make the resource. A retryable failure keeps the intent: the next pass looks the name
    // up first (and adopts only what that intent proves is ours) before it asks again. The claim keeps the name,
    // not the id the failed create announced (the cloud says it was never made).
    delete pass.draft.id;
    if (pass.claim?.id !== undefined) {
      const written = await pass.services.claims.recordId(pass.claim, undefined);
      if (written.type !== "written") return conflict();
      pass.claim = written.claim;
    }
    if (failureClass === "exists") {
      const found = await connection.external.findByName(pass.cloudName, pass.signal);
      if (found !== undefined) return adoptFound(pass, connection, found);
      delete pass.draft.createPending;
      return verdict(REASONS.Creating, `${message}; looking again`, after(pass.services.timing.shortMs), {
        progressing: true,
      });
    }
    if (failureClass !== "retryable") {
      delete pass.draft.createPending;
      await releaseSpend(pass.services.options.spend, pass.mr);
    }
    if (failureClass === "capacity") {
      const locations = pass.services.options.locations(pass.mr.spec);
      const queue = capacityPairOf(pass, locations[pass.draft.locationIndex ?? 0] ?? locations[0]);
      queue?.capacity.outOfStock(queue.type, queue.location);
      return nextLocation(pass, message);
    }
  }
  if (failureClass === "retryable") {
    return verdict(
      REASONS.OperationFailed,
      `${message} (transient; retrying)`,
      { type: "retry", error: new Error(message) },
      { progressing: true, event: "Warning", ready: false },
    );
  }
  if (failureClass === "capacity") {
    return verdict(
      REASONS.CapacityUnavailable,
      message,
      { type: "retry", error: new Error(message) },
      { stalled: true, event: "Warning" },
    );
  }
  return verdict(REASONS.OperationFailed, message, after(pass.services.timing.terminalRetryMs), {
    stalled: true,
    event: "Warning",
  });
}
