// The end of every pass: the verdict becomes the three kstatus conditions (Ready, Reconciling, Stalled) and
// observedGeneration; status is written once and only when it changed; an event is emitted only when the Ready
// story (status or reason) changed.
import { isDeepStrictEqual } from "node:util";
import type { Logger } from "pino";
import type { Verdict } from "./classify.ts";
import type { Condition, ManagedObject, ManagedSpecBase, ManagedStatusBase, Outcome } from "./external.ts";
import { after, type PassServices } from "./reconcile-pass.ts";

/** Kubernetes writes metav1.Time (condition lastTransitionTime) at whole seconds: RFC 3339 without a fraction. */
export function formatKubeTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

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
  draft.observedGeneration = generation;
  if (result.stalled) draft.lastError = result.message;
  return readyStatus;
}

/** Write conditions, observedGeneration and status once; emit an event when the Ready story changed. */
export async function finish<Spec extends ManagedSpecBase>(
  services: PassServices<Spec>,
  mr: ManagedObject,
  draft: ManagedStatusBase,
  result: Verdict,
  logger: Logger,
): Promise<Outcome> {
  if (result.silent) return result.outcome;
  const previousReady = mr.status.conditions?.find((c) => c.type === "Ready");
  const readyStatus = applyVerdict(mr, draft, result, services.now());
  if (!isDeepStrictEqual(mr.status, draft)) {
    const written = await services.writeStatus(mr, draft);
    if (written.type === "conflict") return after(0);
  }
  const storyChanged = previousReady?.reason !== result.reason || previousReady?.status !== readyStatus;
  if (storyChanged && result.event !== undefined) {
    services.options.kube.event(mr, result.event, result.reason, result.message);
  }
  logger.debug({ reason: result.reason, ready: readyStatus, outcome: result.outcome.type }, "reconciled");
  return result.outcome;
}
