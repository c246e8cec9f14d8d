// A resource that exists: bring it to the spec one step at a time (an update answers the operation it started),
// wait while it is in transition, publish connection details once it is ready. Observe-only objects mirror it.

import { isUnsupported } from "../cloud/errors.ts";
import { isSendable, sendAction } from "./action-intents.ts";
import { CHANGE_INSTEAD, cannotDo, REASON, type Reason, type Verdict } from "./classify.ts";
import type { ManagedSpecBase } from "./external.ts";
import { after, type CloudConnection, DONE, type Existing, type Pass, verdict, withDraft } from "./reconcile-pass.ts";

export async function reconcileExisting<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  observed: Existing,
): Promise<Verdict> {
  const { mr, draft } = pass;
  const { timing } = pass.services;
  draft.id = observed.id;
  delete draft.createPending;
  Object.assign(draft, observed.atProvider);
  if (observed.terminal !== undefined) {
    return verdict(observed.terminal.reason as Reason, observed.terminal.message, DONE, {
      stalled: true,
      event: "Warning",
      ready: false,
    });
  }
  if (observed.busy) {
    return verdict(REASON.WaitingForOperation, "the cloud resource is in transition", after(timing.shortMs), {
      progressing: true,
    });
  }
  if (!observed.upToDate) {
    pass.logger.debug({ diff: observed.diff }, "not up to date");
    const mutation = await connection.external.update(withDraft(mr, draft), observed, pass.signal);
    Object.assign(draft, mutation.statusFields);
    if (mutation.refused !== undefined) {
      return verdict(mutation.refused.reason as Reason, mutation.refused.message, DONE, {
        stalled: true,
        event: "Warning",
        ready: observed.ready,
      });
    }
    if (isSendable(mutation)) {
      let sent: Awaited<ReturnType<typeof sendAction>>;
      try {
        sent = await sendAction(pass, connection, mutation, observed.id);
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
      const note = mutation.note ?? `${mutation.action} requested`;
      pass.services.options.kube.event(mr, "Normal", REASON.Updating, note);
      pass.logger.info({ id: observed.id, operation: sent.operation.operation_id, note }, "update requested");
      return verdict(REASON.Updating, note, after(timing.operationFallbackMs), { progressing: true });
    }
  }
  if (!observed.ready) {
    return verdict(REASON.Creating, "waiting for the cloud resource to become ready", after(timing.shortMs), {
      progressing: true,
    });
  }
  await connection.external.publish?.(mr, observed, pass.signal);
  delete draft.lastError;
  const cached = connection.usingCachedCredentials ? " (using cached credentials: the Secret is unreadable)" : "";
  return verdict(REASON.Available, `cloud resource ${observed.id} is available${cached}`, DONE, {
    ready: true,
    event: "Normal",
  });
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
    return verdict(REASON.Observed, `no cloud resource ${what} to observe`, after(pass.services.timing.dependencyMs));
  }
  Object.assign(pass.draft, observed.atProvider);
  pass.draft.id = observed.id;
  return verdict(REASON.Observed, "observing the cloud resource (no changes are made)", DONE, {
    ready: observed.ready,
  });
}
