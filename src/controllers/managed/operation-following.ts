// Following an operation the server cannot show. A server with only the spec's endpoints has no operation reads
// for disks, networks and firewall rules; then the resource itself says when the operation is over: a CREATE
// when the resource appears (read by the id the create answered, metadata.id, kept in status.id), a DELETE when
// it is gone, any other (RESIZE, UPDATE) when it matches the spec again. Objects take turns, one poll interval
// apart per family (CloudAccount.nextFollowTurnMs), so waiting costs one request per interval per family.

import { REASONS } from "../../api/common.ts";
import type { ManagedSpecBase, OperationRecord } from "../core/object-model.ts";
import { isReady } from "../core/object-model.ts";
import { formatKubeTime } from "../core/status-building.ts";
import { after, type Verdict, verdict } from "../core/verdict.ts";
import type { Observation } from "./external.ts";
import { closeOperation, UNKNOWN_OUTCOME } from "./operation-tracking.ts";
import type { CloudConnection, Pass } from "./pass.ts";

/** Whether the resource shows the operation's effect. */
export function showsEffect(operationName: string, observed: Observation): boolean {
  if (operationName === "CREATE") return observed.exists;
  if (operationName === "DELETE") return !observed.exists;
  return observed.exists && observed.upToDate && observed.busy !== true;
}

/**
 * A verdict to wait with (the next look at the resource is at this object's next turn), or undefined once the
 * operation is over (closed in the draft as SUCCEEDED, or UNKNOWN after `followTimeoutMs`): the pass goes on.
 */
export function followOperation<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  operation: OperationRecord,
  observed: Observation,
): Verdict | undefined {
  const { timing, now, options } = pass.services;
  const nowMs = now();
  if (showsEffect(operation.name, observed)) {
    closeOperation(pass, { ...operation, state: "SUCCEEDED", completedAt: formatKubeTime(nowMs) });
    pass.logger.info({ operation: operation.id, name: operation.name }, "operation over, as its resource shows");
    return undefined;
  }
  // The time limit counts from the operation's start (the spec shows `started_at` on every operation).
  const started = Date.parse(operation.startedAt ?? "");
  if (!Number.isNaN(started) && nowMs - started >= timing.followTimeoutMs) {
    const minutes = Math.round(timing.followTimeoutMs / 60_000);
    const message = `${operation.name} operation ${operation.id} did not show in the cloud resource within ${minutes} min (this server cannot show the operation); going on from the resource as it is`;
    closeOperation(pass, { ...operation, state: UNKNOWN_OUTCOME, completedAt: formatKubeTime(nowMs) });
    pass.draft.lastError = message;
    options.kube.event(pass.mr, "Warning", REASONS.OperationFailed, message);
    return undefined;
  }
  const reason =
    operation.name === "DELETE"
      ? REASONS.Deleting
      : operation.name === "CREATE"
        ? REASONS.Creating
        : REASONS.WaitingForOperation;
  const awaited =
    operation.name === "CREATE"
      ? `${pass.draft.id ?? pass.cloudName} to appear`
      : operation.name === "DELETE"
        ? `${pass.draft.id} to disappear`
        : `${pass.draft.id} to match the spec`;
  return verdict(
    reason,
    `waiting for ${operation.name} operation ${operation.id}: this server cannot show it, so the cloud resource is read until it shows the change (waiting for ${awaited})`,
    after(connection.nextFollowTurnMs()),
    { progressing: true, ready: isReady(pass.mr.status) },
  );
}
