// May this object act on the resource it found? Only on the one its claim records (claims.ts). A resource without
// such a record is taken when nobody else claims it and this object has the right to it: spec.id names it
// (explicit adoption), or this object's own create intent proves it made it. Anything else is NameConflict:
// Stalled, the message says who holds it (or how to adopt it), and nothing is sent to the resource.

import { REASONS } from "../../api/common.ts";
import { release } from "../core/lifecycle.ts";
import type { ManagedSpecBase } from "../core/object-model.ts";
import { after, conflict, type Step, type Verdict, verdict } from "../core/verdict.ts";
import type { Claim } from "./claims.ts";
import type { Existing, FoundResource } from "./external.ts";
import { holderOf, holderText, provesOwnCreate, slotOf } from "./ownership.ts";
import type { CloudConnection, Pass } from "./pass.ts";

/** Owned, or not: why (and the verdict to end the pass with, when it is not the plain NameConflict). */
export type Ownership = { owned: true } | { owned: false; message: string; verdict?: Verdict };

/** Who holds `claim`, as this object's user may be told. */
export function claimHolderText<Spec extends ManagedSpecBase>(pass: Pass<Spec>, claim: Claim): string {
  const { kind, claimNamespace } = pass.services.options;
  return holderText(kind, claim, pass.mr.metadata.namespace, claimNamespace ?? "the operator's namespace");
}

export function heldByOtherMessage<Spec extends ManagedSpecBase>(pass: Pass<Spec>, claim: Claim, what: string): string {
  return `${claimHolderText(pass, claim)} manages ${what}; this object does not touch it: give it another spec.cloudName (or delete it: a resource it does not own is never deleted)`;
}

export function foreignResourceMessage(cloudName: string, id: string): string {
  return `a cloud resource named ${cloudName} (id ${id}) exists that this object did not create: set spec.id: ${id} to manage it, or choose another spec.cloudName`;
}

export function nameConflict(message: string, retryMs: number): Verdict {
  return verdict(REASONS.NameConflict, message, after(retryMs), { stalled: true, event: "Warning" });
}

/** Another object's claim on this resource id (cached; `fresh` reads the API server). */
async function otherClaimOfId<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  id: string,
  fresh: boolean,
): Promise<Claim | undefined> {
  const { claims, options } = pass.services;
  const kind = options.kind;
  const cached = claims
    .allOfId(kind, connection.account, id)
    .find((claim) => claim.holder.uid !== pass.mr.metadata.uid);
  if (cached !== undefined) return cached;
  if (!fresh) return undefined;
  const other = await claims.claimOfIdFresh(kind, connection.account, id);
  return other !== undefined && other.holder.uid !== pass.mr.metadata.uid ? other : undefined;
}

/**
 * Record `id` in this object's claim (taking the claim of `cloudName` first when it holds none, or another one):
 * from now on that resource is this object's. A verdict when the claim is taken or changed meanwhile.
 */
async function take<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  cloudName: string,
  id: string,
): Promise<Verdict | undefined> {
  const { claims, timing } = pass.services;
  let claim = pass.claim;
  if (claim === undefined || claim.cloudName !== cloudName) {
    const acquired = await claims.acquire(
      slotOf(pass.services.options.kind, connection.account, cloudName),
      holderOf(pass.mr),
      pass.key,
    );
    if (acquired.type === "taken") {
      return nameConflict(
        heldByOtherMessage(pass, acquired.claim, `the cloud name ${cloudName}`),
        timing.nameConflictRetryMs,
      );
    }
    // One claim per object: one taken before for another name reserved nothing this object made.
    if (claim !== undefined && claim.id === undefined) await claims.release(claim);
    claim = acquired.claim;
  }
  const written = await claims.recordId(claim, id);
  if (written.type !== "written") return conflict();
  pass.claim = written.claim;
  pass.draft.id = id;
  return undefined;
}

/** Whether this object may act on (update, delete, publish) the resource it observed; takes it when it may. */
export async function ownershipOf<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  observed: Existing,
): Promise<Ownership> {
  const claim = pass.claim;
  if (claim?.id !== undefined) {
    if (claim.id === observed.id) return { owned: true };
    return {
      owned: false,
      message: `this object manages cloud resource ${claim.id} (its claim records it), not ${observed.id}`,
    };
  }
  const explicit = pass.mr.spec.id === observed.id;
  const other = await otherClaimOfId(pass, connection, observed.id, explicit);
  if (other !== undefined) {
    pass.services.claims.block(other, pass.key);
    return { owned: false, message: heldByOtherMessage(pass, other, `cloud resource ${observed.id}`) };
  }
  if (explicit) {
    // spec.id: the user names the resource; it is taken under the name it has in the cloud.
    const stop = await take(pass, connection, observed.name, observed.id);
    return stop === undefined ? { owned: true } : { owned: false, message: stop.message, verdict: stop };
  }
  // Found by its name only: ours when our own create intent proves we made it.
  if (!provesOwnCreate(pass.draft, pass.cloudName, observed.createdAt)) {
    return { owned: false, message: foreignResourceMessage(pass.cloudName, observed.id) };
  }
  const stop = await take(pass, connection, pass.cloudName, observed.id);
  if (stop !== undefined) return { owned: false, message: stop.message, verdict: stop };
  adopted(pass, observed.id);
  return { owned: true };
}

/**
 * What a pass does with a resource it observed: undefined when it may act on it (ownershipOf); otherwise nothing
 * is sent to it: a deleting object is let go, others stall NameConflict (or end as a claim race says).
 */
export async function unlessOwned<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  observed: Existing,
  deleting: boolean,
): Promise<Step | undefined> {
  const ownership = await ownershipOf(pass, connection, observed);
  if (ownership.owned) return undefined;
  if (ownership.verdict?.silent) return ownership.verdict;
  if (deleting) return release(pass, "Warning", `cloud resource ${observed.id} left as is: ${ownership.message}`);
  return ownership.verdict ?? nameConflict(ownership.message, pass.services.timing.nameConflictRetryMs);
}

/**
 * A resource found by name after a create that may have gone through (a 409, a lost answer, already_exists):
 * taken when this object's intent proves it made it and nobody else claims it; NameConflict otherwise.
 */
export async function adoptFound<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  found: FoundResource,
): Promise<Verdict> {
  const retryMs = pass.services.timing.nameConflictRetryMs;
  const other = await otherClaimOfId(pass, connection, found.id, false);
  if (other !== undefined) {
    pass.services.claims.block(other, pass.key);
    return nameConflict(heldByOtherMessage(pass, other, `cloud resource ${found.id}`), retryMs);
  }
  if (!provesOwnCreate(pass.draft, pass.cloudName, found.createdAt)) {
    return nameConflict(foreignResourceMessage(pass.cloudName, found.id), retryMs);
  }
  const stop = await take(pass, connection, pass.cloudName, found.id);
  if (stop !== undefined) return stop;
  adopted(pass, found.id);
  return verdict(REASONS.Creating, `adopted ${found.id}`, after(0), { progressing: true });
}

/** Record the resource our own create made (found by its name). */
function adopted<Spec extends ManagedSpecBase>(pass: Pass<Spec>, id: string): void {
  delete pass.draft.createPending;
  pass.services.options.kube.event(
    pass.mr,
    "Normal",
    REASONS.Creating,
    `adopted cloud resource ${id} named ${pass.cloudName} (created by this object's own request)`,
  );
}
