// Every cloud resource has exactly one owner, recorded in a GpuCloudClaim (claims.ts, ADR 0021). This file
// holds what a pass needs to know about its own claim: the cloud name it works with, the slot that name is in,
// the claim it holds (checked against the account its credentials name now) and the proof an object needs to
// take a resource it found by name (its own create intent, older than the resource).

import { defaultCloudName, REASONS } from "../../api/common.ts";
import type { ClaimedKind, ClaimSlot } from "../../api/gpu-cloud-claim.ts";
import { type Account, sameAccount } from "../accounts/account.ts";
import type { ManagedObject, ManagedSpecBase, ManagedStatusBase } from "../core/object-model.ts";
import { after, type Verdict, verdict } from "../core/verdict.ts";
import type { Claim, Holder } from "./claims.ts";
import type { Pass } from "./pass.ts";

/** The cloud name a pass works with: the name of a create in flight; spec.cloudName; else the default. */
export function cloudNameFor(mr: ManagedObject): string {
  if (mr.status.createPending !== undefined) return mr.status.createPending.cloudName;
  return mr.spec.cloudName ?? defaultCloudName(mr.metadata.namespace, mr.metadata.name);
}

/** How far the cloud's clock may run behind ours when a resource's creation time proves our own create. */
export const CREATE_PROOF_SKEW_MS = 2_000;

/**
 * Whether this object's own create intent proves it made a resource found by name: the intent names it and the
 * resource was created after the intent was recorded (within the clock skew allowed).
 */
export function provesOwnCreate(status: ManagedStatusBase, cloudName: string, createdAt: string | undefined): boolean {
  const intent = status.createPending;
  if (intent === undefined || intent.cloudName !== cloudName || createdAt === undefined) return false;
  const requested = Date.parse(intent.requestedAt);
  const created = Date.parse(createdAt);
  if (Number.isNaN(requested) || Number.isNaN(created)) return false;
  // Cloud timestamps may have whole seconds only.
  return created >= Math.floor(requested / 1000) * 1000 - CREATE_PROOF_SKEW_MS;
}

export function holderOf(mr: ManagedObject): Holder {
  return { namespace: mr.metadata.namespace, name: mr.metadata.name, uid: mr.metadata.uid };
}

export function slotOf(kind: ClaimedKind, account: Account, cloudName: string): ClaimSlot {
  return { kind, apiUrl: account.apiUrl, projectId: account.projectId, cloudName };
}

/**
 * Who holds a claim, as a tenant may be told: the object when it is in the asker's namespace, else only that an
 * object of another namespace does (the claim's name lets an administrator find it).
 */
export function holderText(kind: string, claim: Claim, askerNamespace: string, claimNamespace: string): string {
  const { namespace, name } = claim.holder;
  if (namespace === askerNamespace) return `${kind} ${namespace}/${name}`;
  return `a ${kind} in another namespace (GpuCloudClaim ${claimNamespace}/${claim.objectName})`;
}

/** How an account is named in messages. */
export function accountText(account: Account): string {
  return `project ${account.projectId} at ${account.apiUrl}`;
}

/**
 * The claim this object holds, checked against the account its credentials name now, and status put in line with
 * it: the id the claim records is the resource this object manages, whatever status says (a status edit cannot
 * point it elsewhere); an id in status that no claim backs is not acted on. A verdict when the pass must stop: the
 * credentials now name another account than the one holding the object's resource.
 */
export function reconcileClaim<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  account: Account,
  deleting: boolean,
): Verdict | undefined {
  const { mr, draft, services } = pass;
  const claim = services.claims.heldBy(services.options.kind, mr.metadata.uid);
  if (claim !== undefined && !sameAccount(claim, account)) {
    const message =
      `this object's cloud resource${claim.id ? ` ${claim.id}` : ""} (${claim.cloudName}) is in ${accountText(claim)}, ` +
      `but its credentials (${pass.credentialsSource ?? "the credentials Secret"}) now name ${accountText(account)}: ` +
      "nothing is created or changed in either. Restore the Secret's projectId and key (and apiUrl), or, to move, " +
      `set spec.deletionPolicy: Orphan and delete this object (the resource stays in project ${claim.projectId}), then ` +
      `create a new one${deleting ? "" : " (with spec.id to adopt a resource in the new project)"}`;
    draft.lastError = message;
    return verdict(REASONS.AccountChanged, message, after(services.timing.dependencyMs), {
      stalled: true,
      event: "Warning",
    });
  }
  pass.claim = claim;
  if (claim?.id !== undefined && draft.id !== claim.id) {
    if (draft.id !== undefined) {
      services.options.kube.event(
        mr,
        "Warning",
        REASONS.Updating,
        `status.id ${draft.id} is not the resource this object manages: ${claim.id} (recorded in its claim) is`,
      );
    }
    draft.id = claim.id;
  }
  if (claim?.id === undefined && draft.id !== undefined && mr.spec.id !== draft.id) {
    // No claim records it: an edited status, or a resource this object never took. Looked up afresh instead.
    pass.logger.info({ id: draft.id }, "status.id is not backed by a claim: not acted on");
    delete draft.id;
  }
  return undefined;
}
