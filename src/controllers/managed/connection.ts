// An object's connection to the cloud (pass.ts `Connect`): the credentials its Secret names (accounts/), a slot of
// its account's bulkhead for the pass (a busy or failing account never takes every worker), and its kind's client
// bound to that account. Missing credentials say what to fix, down to the label an existing Secret lacks.
import { DEFAULT_CREDENTIALS_SECRET, type Reason } from "../../api/common.ts";
import { keyOf, type Manager } from "../../runtime/index.ts";
import type { AccountAdmissions } from "../accounts/account-admission.ts";
import type { CloudAccount } from "../accounts/cloud-account.ts";
import { type CredentialStore, unlabelledMessage } from "../accounts/credentials.ts";
import type { SecretSources } from "../accounts/secret-sources.ts";
import type { ManagedObject, ManagedSpecBase } from "../core/object-model.ts";
import type { KindDefinition, KindDeps } from "./external.ts";
import type { Connect } from "./pass.ts";

type Missing = { type: "missing"; message: string; reason?: Reason };

/**
 * A credentials Secret of another name than the default that the (labelled) cache lacks may exist without the
 * label: one read says which, so the message gives the exact command (only objects without credentials pay it;
 * the default name's Secrets are all cached, labelled or not).
 */
async function explainMissing(manager: Manager, mr: ManagedObject, missing: Missing): Promise<Missing> {
  const name = mr.spec.credentialsRef?.name;
  if (missing.reason !== undefined || name === undefined || name === DEFAULT_CREDENTIALS_SECRET) return missing;
  const secret = await manager.kube.getSecret(mr.metadata.namespace, name);
  return secret === undefined ? missing : { ...missing, message: unlabelledMessage(mr.metadata.namespace, name) };
}

export function connectFor<Spec extends ManagedSpecBase>(
  kind: KindDefinition<Spec>,
  options: {
    manager: Manager;
    credentials: CredentialStore<CloudAccount>;
    secrets: Pick<SecretSources, "read">;
    admissions: AccountAdmissions;
    deps: KindDeps;
  },
): Connect<Spec> {
  const { manager, credentials, secrets, admissions, deps } = options;
  return async (mr) => {
    const resolved = credentials.resolve(mr.metadata.namespace, mr.spec.credentialsRef?.name);
    if (resolved.type === "missing") {
      const name = mr.spec.credentialsRef?.name;
      const read = name === undefined || secrets.read(mr.metadata.namespace, name) !== undefined;
      return read ? resolved : explainMissing(manager, mr, resolved);
    }
    const { account, usingCached, secret, keys } = resolved.handle;
    // A slot of the account's bulkhead, or a requeue: a busy or failing account never takes every worker.
    admissions.admit(keyOf(mr.metadata.namespace, mr.metadata.name), account.client.bulkhead);
    return {
      type: "connected",
      connection: {
        external: kind.external(account, deps),
        projectId: account.projectId,
        account: { apiUrl: account.apiUrl, projectId: account.projectId },
        usingCachedCredentials: usingCached,
        credentialsSource: `Secret ${secret.namespace}/${secret.name} (${keys})`,
        paymentProblem: (signal, options) => account.paymentProblem(signal, options),
        operation: (operationId, ownerKey, startedAt) =>
          account.operation(kind.family, operationId, ownerKey, startedAt),
        nextFollowTurnMs: () => account.nextFollowTurnMs(kind.family),
        findOperations: (resourceId, name, sinceMs, signal) =>
          account.findOperations(kind.family, resourceId, name, sinceMs, signal),
      },
    };
  };
}
