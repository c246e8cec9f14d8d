// May this object act on the resource it found? A resource it holds (status.id) is its own unless an older
// object holds it too; spec.id adopts explicitly unless another object holds the resource; a resource found by
// name only is adopted when this object's own create intent proves it made it. Anything else is NameConflict:
// Stalled, the message names the other object (or says how to adopt), and nothing is sent to the resource.
import { REASON, type Verdict } from "./classify.ts";
import type { FoundResource, ManagedSpecBase } from "./external.ts";
import { type Claimant, provesOwnCreate, type Rival } from "./ownership.ts";
import { after, type Existing, type Pass, verdict } from "./reconcile-pass.ts";

export type Ownership = { owned: true } | { owned: false; message: string };

/** This object as a claimant, from its draft status (which may be ahead of the informer cache). */
export function claimantOf<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  options: { intends?: boolean } = {},
): Claimant {
  const created = Date.parse(pass.mr.metadata.creationTimestamp ?? "");
  return {
    key: pass.key,
    createdAtMs: Number.isNaN(created) ? Number.POSITIVE_INFINITY : created,
    projectId: pass.draft.projectId ?? "",
    ...(pass.draft.id !== undefined ? { id: pass.draft.id } : {}),
    ...(options.intends ? { intends: true } : {}),
  };
}

function rivalMessage<Spec extends ManagedSpecBase>(pass: Pass<Spec>, rival: Rival, what: string): string {
  const other = `${pass.services.options.kind} ${rival.key}`;
  return rival.why === "holds"
    ? `${other} already manages ${what}; this object does not touch it: give it another spec.cloudName (or delete it: a resource it does not own is never deleted)`
    : `${other} is creating ${what}; give this object another spec.cloudName`;
}

export function foreignResourceMessage(cloudName: string, id: string): string {
  return `a cloud resource named ${cloudName} (id ${id}) exists that this object did not create: set spec.id: ${id} to manage it, or choose another spec.cloudName`;
}

/** Another object ahead of this one for the name (holding it, or creating it first). */
export function nameRival<Spec extends ManagedSpecBase>(pass: Pass<Spec>, cloudName: string): string | undefined {
  const intends = pass.draft.createPending?.cloudName === cloudName;
  const rival = pass.services.claims.rivalForName(claimantOf(pass, { intends }), cloudName);
  return rival === undefined ? undefined : rivalMessage(pass, rival, `the cloud name ${cloudName}`);
}

/** Whether this object may act on (update, delete, publish) the resource it observed. */
export function ownershipOf<Spec extends ManagedSpecBase>(pass: Pass<Spec>, observed: Existing): Ownership {
  const claims = pass.services.claims;
  const byId = claims.rivalForId(claimantOf(pass), observed.id);
  if (byId !== undefined) return { owned: false, message: rivalMessage(pass, byId, `cloud resource ${observed.id}`) };
  if (pass.draft.id !== undefined || pass.mr.spec.id !== undefined) return { owned: true };
  // Found by its name only.
  const byName = nameRival(pass, pass.cloudName);
  if (byName !== undefined) return { owned: false, message: byName };
  if (!provesOwnCreate(pass.draft, pass.cloudName, observed.createdAt)) {
    return { owned: false, message: foreignResourceMessage(pass.cloudName, observed.id) };
  }
  adopted(pass, observed.id);
  return { owned: true };
}

export function nameConflict(message: string, retryMs: number): Verdict {
  return verdict(REASON.NameConflict, message, after(retryMs), { stalled: true, event: "Warning" });
}

/**
 * A resource found by name after a create that may have gone through (a 409, a lost answer, already_exists):
 * adopted when this object's intent proves it made it and nobody else holds it; NameConflict otherwise.
 */
export function adoptFound<Spec extends ManagedSpecBase>(pass: Pass<Spec>, found: FoundResource): Verdict {
  const retryMs = pass.services.timing.nameConflictRetryMs;
  const byId = pass.services.claims.rivalForId(claimantOf(pass), found.id);
  if (byId !== undefined) return nameConflict(rivalMessage(pass, byId, `cloud resource ${found.id}`), retryMs);
  if (!provesOwnCreate(pass.draft, pass.cloudName, found.createdAt)) {
    return nameConflict(foreignResourceMessage(pass.cloudName, found.id), retryMs);
  }
  adopted(pass, found.id);
  return verdict(REASON.Creating, `adopted ${found.id}`, after(0), { progressing: true });
}

/** Record the resource our own create made (found by its name). */
function adopted<Spec extends ManagedSpecBase>(pass: Pass<Spec>, id: string): void {
  pass.draft.id = id;
  delete pass.draft.createPending;
  pass.services.options.kube.event(
    pass.mr,
    "Normal",
    REASON.Creating,
    `adopted cloud resource ${id} named ${pass.cloudName} (created by this object's own request)`,
  );
}
