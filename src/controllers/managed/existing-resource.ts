// A resource that exists: bring it to the spec one step at a time (an update answers the operation it started),
// wait while it is in transition, publish connection details once it is ready. Observe-only objects mirror it.
// An action that raises spend reserves its amount after its intent (spend.ts); once the resource is as the spec
// asks, its budgets' entries follow what it bills.

import { REASONS } from "../../api/common.ts";
import { isUnsupported } from "../../cloud/errors.ts";
import { CHANGE_INSTEAD, cannotDo } from "../core/classify.ts";
import type { ManagedSpecBase } from "../core/object-model.ts";
import { after, DONE, type Verdict, verdict } from "../core/verdict.ts";
import { sendAction } from "./action-intents.ts";
import { claimHolderText } from "./adoption.ts";
import type { Existing } from "./external.ts";
import { slotOf } from "./ownership.ts";
import { type CloudConnection, type Pass, withDraft } from "./pass.ts";
import { reserve, settleAsObserved } from "./spend.ts";

export async function reconcileExisting<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  observed: Existing,
  resolved: unknown,
): Promise<Verdict> {
  const { mr, draft } = pass;
  const { timing } = pass.services;
  draft.id = observed.id;
  delete draft.createPending;
  Object.assign(draft, observed.atProvider);
  pass.upToDate = createOnlyState(pass, observed);
  if (observed.terminal !== undefined) {
    return verdict(observed.terminal.reason, observed.terminal.message, DONE, {
      stalled: true,
      event: "Warning",
      ready: false,
    });
  }
  if (observed.busy) {
    return verdict(REASONS.WaitingForOperation, "the cloud resource is in transition", after(timing.shortMs), {
      progressing: true,
    });
  }
  if (!observed.upToDate) {
    pass.logger.debug({ diff: observed.diff }, "not up to date");
    const answer = await connection.external.update(withDraft(mr, draft), resolved, observed, pass.signal);
    if (answer.type === "unchanged") Object.assign(draft, answer.statusFields);
    if (answer.type === "refused") {
      return verdict(answer.reason, answer.message, DONE, { stalled: true, event: "Warning", ready: observed.ready });
    }
    if (answer.type === "action") {
      let sent: Awaited<ReturnType<typeof sendAction>>;
      try {
        sent = await sendAction(pass, connection, answer, observed.id, () =>
          reserve(pass, answer.reserve, observed.ready),
        );
      } catch (error) {
        if (!isUnsupported(error)) throw error;
        // Nothing was changed in the cloud; the resource still works as it is (Ready keeps its value).
        const stall = cannotDo(error, CHANGE_INSTEAD);
        return verdict(stall.reason, `${stall.message} (${observed.diff ?? "drift"})`, DONE, {
          stalled: true,
          event: "Warning",
          ready: observed.ready,
        });
      }
      if ("verdict" in sent) return sent.verdict;
      const note = answer.note ?? `${answer.action} requested`;
      pass.services.options.kube.event(mr, "Normal", REASONS.Updating, note);
      pass.logger.info({ id: observed.id, operation: sent.operation.operation_id, note }, "update requested");
      return verdict(REASONS.Updating, note, after(timing.operationFallbackMs), { progressing: true });
    }
  }
  if (!observed.ready) {
    return verdict(REASONS.Creating, "waiting for the cloud resource to become ready", after(timing.shortMs), {
      progressing: true,
    });
  }
  const notPublished = await connection.external.publish?.(mr, observed, pass.signal);
  if (notPublished !== undefined) {
    return verdict(REASONS.NameConflict, notPublished, after(timing.nameConflictRetryMs), {
      stalled: true,
      event: "Warning",
    });
  }
  delete draft.lastError;
  await settleAsObserved(pass, observed);
  return verdict(REASONS.Available, `cloud resource ${pass.cloudName} (id ${observed.id}) is available`, DONE, {
    ready: true,
    event: "Normal",
  });
}

const CREATE_ONLY_APPLIED = {
  status: "True",
  reason: REASONS.CreateOnlyFieldsApplied,
  message: "created with the current create-only values",
} as const;

/**
 * Whether the resource still has the create-only values the spec asks for now (image, SSH key and scripts,
 * inline or from a Secret/ConfigMap): the cloud cannot change them, so a change is reported, never applied.
 * The first time a resource is seen without recorded values (made by an older version), the current ones are
 * taken as those it was created with.
 */
function createOnlyState<Spec extends ManagedSpecBase>(pass: Pass<Spec>, observed: Existing): Pass<Spec>["upToDate"] {
  const current = observed.createOnly;
  if (current === undefined) return undefined;
  const recorded = pass.draft.createOnlyDigests as Record<string, string> | undefined;
  if (recorded === undefined) {
    pass.draft.createOnlyDigests = Object.fromEntries(
      Object.entries(current).map(([field, value]) => [field, value.digest]),
    );
    return CREATE_ONLY_APPLIED;
  }
  const changed = [...new Set([...Object.keys(recorded), ...Object.keys(current)])]
    .sort()
    .filter((field) => recorded[field] !== current[field]?.digest);
  if (changed.length === 0) return CREATE_ONLY_APPLIED;
  const what = changed.map((field) => `${field} (${current[field]?.source ?? "removed"})`).join(", ");
  return {
    status: "False",
    reason: REASONS.CreateOnlyFieldChanged,
    message:
      `${what} changed after the resource was created and is not applied: the cloud takes it only at creation. ` +
      "Restore the previous value, or delete and re-create the object to use the new one",
  };
}

/** managementPolicy Observe: mirror the cloud into status; never write to it. */
export async function mirror<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  notBefore?: number,
): Promise<Verdict> {
  const observed = await connection.external.observe(
    pass.mr,
    { cloudName: pass.cloudName, ...(notBefore !== undefined ? { notBefore } : {}) },
    pass.signal,
  );
  if (!observed.exists) {
    const what = pass.mr.spec.id ?? pass.cloudName;
    const missing = verdict(
      REASONS.Observed,
      `no cloud resource ${what} to observe`,
      after(pass.services.timing.dependencyMs),
    );
    return { ...missing, synced: false };
  }
  const { claims, options } = pass.services;
  const kind = options.kind;
  const claim =
    claims.ofId(kind, connection.account, observed.id) ??
    claims.ofSlot(slotOf(kind, connection.account, observed.name));
  if (
    claim !== undefined &&
    claim.holder.namespace !== pass.mr.metadata.namespace &&
    !options.allowCrossNamespaceObserve
  ) {
    // Nothing of it is shown: its addresses and state are another namespace's to see.
    claims.block(claim, pass.key);
    return verdict(
      REASONS.NotPermitted,
      `cloud resource ${observed.id} is managed by ${claimHolderText(pass, claim)}; this operator does not let objects observe what another namespace manages (its --allow-cross-namespace-observe is off)`,
      after(pass.services.timing.nameConflictRetryMs),
      { stalled: true, event: "Warning" },
    );
  }
  Object.assign(pass.draft, observed.atProvider);
  pass.draft.id = observed.id;
  return verdict(REASONS.Observed, "observing the cloud resource (no changes are made)", DONE, {
    ready: observed.ready,
  });
}
