// The end of every pass: the verdict becomes the three kstatus conditions (Ready, Reconciling, Stalled), Synced
// (synced.ts) and observedGeneration; status is written once and only when it changed; an event is emitted only
// when the Ready story (status or reason) changed.

import type { Logger } from "pino";
import { REASONS } from "../../api/common.ts";
import type { Outcome } from "../../runtime/index.ts";
import { sameJson } from "../../util/json-values.ts";
import type { KubeAccess, WriteResult } from "./kube-access.ts";
import type { ReconcileTiming } from "./lifecycle.ts";
import type { Condition, ManagedObject, ManagedStatusBase } from "./object-model.ts";
import { syncedCondition } from "./synced.ts";
import { after, type Verdict } from "./verdict.ts";

/** Kubernetes writes metav1.Time (condition lastTransitionTime) at whole seconds: RFC 3339 without a fraction. */
export function formatKubeTime(ms: number): string {
  const second = Math.floor(ms / 1000);
  if (second !== lastFormatted.second)
    lastFormatted = { second, text: new Date(second * 1000).toISOString().replace(/\.\d{3}Z$/, "Z") };
  return lastFormatted.text;
}

/** Every pass stamps the current time: formatted once per second. */
let lastFormatted = { second: Number.NaN, text: "" };

/**
 * Stamp the verdict onto the draft: conditions (keeping each lastTransitionTime while its status holds),
 * observedGeneration and lastError of a stall. Returns the Ready status written.
 */
export function applyVerdict(
  mr: ManagedObject,
  draft: ManagedStatusBase,
  result: Verdict,
  nowMs: number,
): Condition["status"] {
  const previous = mr.status.conditions ?? [];
  const previousReady = previous.find((c) => c.type === "Ready");
  const readyStatus = result.ready === undefined ? (previousReady?.status ?? "False") : result.ready ? "True" : "False";
  const at = formatKubeTime(nowMs);
  const generation = mr.metadata.generation;
  const condition = (type: string, status: Condition["status"]): Condition => {
    const old = previous.find((c) => c.type === type);
    const transition = old?.status === status ? old.lastTransitionTime : at;
    return {
      type,
      status,
      reason: result.reason,
      message: result.message,
      lastTransitionTime: transition,
      observedGeneration: generation,
    };
  };
  draft.conditions = [
    condition("Ready", readyStatus),
    condition("Reconciling", result.progressing ? "True" : "False"),
    condition("Stalled", result.stalled ? "True" : "False"),
  ];
  // UpToDate (create-only values) has its own reason and story; a pass that did not look keeps the last one.
  const previousUpToDate = previous.find((c) => c.type === "UpToDate");
  let upToDate = previousUpToDate;
  if (result.upToDate !== undefined) {
    const { status, reason, message } = result.upToDate;
    const transition = previousUpToDate?.status === status ? previousUpToDate.lastTransitionTime : at;
    upToDate = {
      type: "UpToDate",
      status,
      reason,
      message,
      lastTransitionTime: transition,
      observedGeneration: generation,
    };
  }
  const previousSynced = previous.find((c) => c.type === "Synced");
  draft.conditions.push(syncedCondition({ result, upToDate, previous: previousSynced, generation, at }));
  if (upToDate !== undefined) draft.conditions.push(upToDate);
  draft.observedGeneration = generation;
  if (result.stalled) draft.lastError = result.message;
  return readyStatus;
}

/** The verdict for a status that cannot be written as drafted. */
export function statusRejected(message: string, retryMs: number): Verdict {
  return {
    ready: false,
    reason: REASONS.StatusRejected,
    message,
    progressing: false,
    stalled: true,
    outcome: after(retryMs),
    event: "Warning",
  };
}

/**
 * An intent write that was refused (a 422, or a value that cannot be fitted): the action behind it is not sent.
 * Said at error level: our schema and our writes disagree.
 */
export function intentRefused(logger: Logger, what: string, message: string, retryMs: number): Verdict {
  logger.error({ reason: REASONS.StatusRejected, detail: message }, `${what} intent refused`);
  return statusRejected(
    `the ${what} intent could not be recorded, so it was not sent (please report this): ${message}`,
    retryMs,
  );
}

export interface BuiltStatus {
  /** The verdict written (a StatusRejected one when a value from outside could not be fitted). */
  verdict: Verdict;
  readyStatus: Condition["status"];
  /** The draft is the status the object has: nothing to write. */
  unchanged: boolean;
}

/**
 * The status a pass writes: the draft with the verdict's conditions, fitted to the CRD (in place). A value that
 * cannot be fitted (an identity too long for its field) is dropped and turns the verdict into StatusRejected.
 * A draft equal to the status the object has needs no fitting: the API server accepted that status against the
 * same schema (most passes, every resync of an unchanged object, end here).
 */
export function buildStatus(
  mr: ManagedObject,
  draft: ManagedStatusBase,
  result: Verdict,
  options: { nowMs: number; fit(status: ManagedStatusBase): string[]; rejectedRetryMs: number },
): BuiltStatus {
  const readyStatus = applyVerdict(mr, draft, result, options.nowMs);
  if (sameJson(mr.status, draft)) return { verdict: result, readyStatus, unchanged: true };
  // The conditions carry messages with cloud text: fitted with the rest.
  const problems = options.fit(draft);
  if (problems.length === 0) return { verdict: result, readyStatus, unchanged: sameJson(mr.status, draft) };
  const verdict = statusRejected(
    `values from the cloud do not fit the CRD: ${problems.join("; ")}`,
    options.rejectedRetryMs,
  );
  const rejectedStatus = applyVerdict(mr, draft, verdict, options.nowMs);
  options.fit(draft);
  return { verdict, readyStatus: rejectedStatus, unchanged: sameJson(mr.status, draft) };
}

/** What the end of a pass writes with (a managed pass's services provide it). */
export interface StatusWrites {
  timing: Pick<ReconcileTiming, "terminalRetryMs">;
  now(): number;
  /** Fit a status to the CRD in place; what could not be fitted. */
  fit(status: ManagedStatusBase): string[];
  writeStatus(mr: ManagedObject, status: ManagedStatusBase): Promise<WriteResult>;
  options: { kube: Pick<KubeAccess, "event"> };
}

/** Write conditions, observedGeneration and status once; emit an event when the Ready story changed. */
export async function finish(
  services: StatusWrites,
  mr: ManagedObject,
  draft: ManagedStatusBase,
  result: Verdict,
  logger: Logger,
): Promise<Outcome> {
  if (result.silent) return result.outcome;
  const previousReady = mr.status.conditions?.find((c) => c.type === "Ready");
  const rejectedRetryMs = services.timing.terminalRetryMs;
  const built = buildStatus(mr, draft, result, { nowMs: services.now(), fit: services.fit, rejectedRetryMs });
  let { verdict } = built;
  if (!built.unchanged) {
    const written = await services.writeStatus(mr, draft);
    if (written.type === "conflict") return after(0);
    if (written.type === "invalid") verdict = await writeRejected(services, mr, written.message, logger);
  }
  const previousUpToDate = mr.status.conditions?.find((c) => c.type === "UpToDate");
  const upToDate = verdict.upToDate ?? result.upToDate;
  if (upToDate?.status === "False" && previousUpToDate?.status !== "False") {
    services.options.kube.event(mr, "Warning", upToDate.reason, upToDate.message);
  }
  const storyChanged = previousReady?.reason !== verdict.reason || previousReady?.status !== built.readyStatus;
  if ((storyChanged || verdict.reason === REASONS.StatusRejected) && verdict.event !== undefined) {
    services.options.kube.event(mr, verdict.event, verdict.reason, verdict.message);
  }
  logger.debug({ reason: verdict.reason, ready: built.readyStatus, outcome: verdict.outcome.type }, "reconciled");
  return verdict.outcome;
}

/**
 * The API server refused our status: a bug (our schema and our writes disagree). Said loudly (an error log, an
 * Event), recorded as Stalled on top of the last status it accepted, and never retried in a loop: the stall
 * holds (no cloud call) until the spec changes or the terminal backoff passes.
 */
async function writeRejected(
  services: StatusWrites,
  mr: ManagedObject,
  message: string,
  logger: Logger,
): Promise<Verdict> {
  const verdict = statusRejected(
    `the Kubernetes API refused the status update (please report this): ${message}`,
    services.timing.terminalRetryMs,
  );
  logger.error({ reason: REASONS.StatusRejected, detail: message }, "status write rejected");
  const minimal = structuredClone(mr.status);
  applyVerdict(mr, minimal, verdict, services.now());
  services.fit(minimal);
  const written = await services.writeStatus(mr, minimal);
  if (written.type === "invalid") logger.error({ detail: written.message }, "stalled status rejected too");
  return verdict;
}
