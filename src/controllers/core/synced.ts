// The Synced condition: is the cloud resource in step with the spec (as Crossplane's SYNCED column)? Derived from
// the verdict of the pass that just ended: True when the pass compared the resource with the spec and found them
// equal (and its create-only values applied, UpToDate), False when it found a difference (being applied, or one
// that cannot be: an invalid spec, a change the cloud refuses, a create-only value changed), and, when the pass
// could not look (credentials, an unavailable API, paused), the last comparison of the same generation, or
// Unknown. kstatus and the Argo CD health check do not read it: it informs, it does not gate.

import type { Reason } from "../../api/common.ts";
import { REASONS } from "../../api/common.ts";
import type { Condition } from "./object-model.ts";
import type { Verdict } from "./verdict.ts";

/** Reasons of a pass that did not compare the cloud resource with the spec. */
const NOT_COMPARED: ReadonlySet<Reason> = new Set<Reason>([
  REASONS.CredentialsMissing,
  REASONS.CredentialsInvalid,
  REASONS.ApiUrlNotAllowed,
  REASONS.RateLimited,
  REASONS.ApiUnavailable,
  REASONS.Paused,
  REASONS.StatusRejected,
  REASONS.InternalError,
]);

/** Reasons of a pass that found the resource in step with the spec (unless a create-only value differs). */
const IN_STEP: ReadonlySet<Reason> = new Set<Reason>([REASONS.Available, REASONS.Observed]);

export const IN_STEP_MESSAGE = "the cloud resource matches the spec";

export function syncedCondition(options: {
  result: Verdict;
  /** The UpToDate condition written with this pass (create-only values), if any. */
  upToDate: Condition | undefined;
  previous: Condition | undefined;
  generation: number;
  at: string;
}): Condition {
  const { result, upToDate, previous, generation, at } = options;
  const condition = (status: Condition["status"], reason: string, message: string): Condition => ({
    type: "Synced",
    status,
    reason,
    message,
    lastTransitionTime: previous?.status === status ? previous.lastTransitionTime : at,
    observedGeneration: generation,
  });
  if (NOT_COMPARED.has(result.reason)) {
    // Nothing was compared: the last comparison still describes this spec; a newer spec is not known to be in step.
    if (previous !== undefined && previous.observedGeneration === generation) return previous;
    return condition("Unknown", result.reason, result.message);
  }
  if (result.synced === false) return condition("False", result.reason, result.message);
  if (IN_STEP.has(result.reason)) {
    if (upToDate?.status === "False") return condition("False", upToDate.reason, upToDate.message ?? "");
    const message = result.reason === REASONS.Observed ? result.message : IN_STEP_MESSAGE;
    return condition("True", result.reason, message);
  }
  return condition("False", result.reason, result.message);
}
