// The credentials-in-use finalizer (crossplane's ProviderConfigUsage idea): a credentials Secret that managed
// objects with cloud state still use keeps `gpucloud.dev/credentials-in-use`, so deleting it first cannot
// strand their deletion; once no object uses it, the finalizer goes and Kubernetes completes the delete.
import type { KubernetesObject } from "@kubernetes/client-node";
import type {
  KubeClient,
  ObjectInformer,
  Outcome,
  ReconcileContext,
  ReconcileRequest,
  Reconciler,
} from "../runtime/index.ts";

export const CREDENTIALS_FINALIZER = "gpucloud.dev/credentials-in-use";

export interface SecretUsageOptions {
  kube: Pick<KubeClient, "patchSecret">;
  secrets: Pick<ObjectInformer<KubernetesObject>, "get">;
  /** The managed objects holding our finalizer that use this Secret, as `Kind namespace/name`. */
  usersOf(namespace: string, name: string): string[];
  /** Record an Event on the Secret. */
  event(secret: KubernetesObject, type: "Normal" | "Warning", reason: string, note: string): void;
}

/** At most this many users are named in the Secret's Event. */
const NAMED_USERS = 10;

/** Why a Secret being deleted waits, naming who holds it and how to let it go. */
export function heldMessage(users: readonly string[]): string {
  const named = users.slice(0, NAMED_USERS).join(", ");
  const more = users.length > NAMED_USERS ? ` and ${users.length - NAMED_USERS} more` : "";
  return (
    `deletion waits (finalizer ${CREDENTIALS_FINALIZER}): the cloud resources of ${named}${more} can only be ` +
    "deleted with these credentials. Delete those objects first (or set their deletionPolicy: Orphan), and this " +
    "Secret goes"
  );
}

export class SecretUsageReconciler implements Reconciler {
  readonly #options: SecretUsageOptions;

  constructor(options: SecretUsageOptions) {
    this.#options = options;
  }

  async reconcile(request: ReconcileRequest, ctx: ReconcileContext): Promise<Outcome> {
    const secret = this.#options.secrets.get(request.namespace, request.name);
    if (secret === undefined) return { type: "done" };
    const finalizers = secret.metadata?.finalizers ?? [];
    const held = finalizers.includes(CREDENTIALS_FINALIZER);
    const users = this.#options.usersOf(request.namespace, request.name);
    const inUse = users.length > 0;
    const deleting = secret.metadata?.deletionTimestamp !== undefined && secret.metadata.deletionTimestamp !== null;
    // `kubectl delete secret` waits on our finalizer: the Secret says why, and who holds it.
    if (deleting && held && inUse) this.#options.event(secret, "Warning", "CredentialsInUse", heldMessage(users));
    if (held === inUse) return { type: "done" };
    // Only Secrets the operator already uses get the finalizer; a Secret being deleted can still lose it.
    if (inUse && deleting) return { type: "done" };
    const next = inUse ? [...finalizers, CREDENTIALS_FINALIZER] : finalizers.filter((f) => f !== CREDENTIALS_FINALIZER);
    const result = await this.#options.kube.patchSecret(request.namespace, request.name, {
      metadata: { resourceVersion: secret.metadata?.resourceVersion, finalizers: next },
    });
    if (result.type === "conflict") return { type: "requeueAfter", ms: 0 };
    ctx.logger.info({ secret: `${request.namespace}/${request.name}`, inUse }, "credentials-in-use finalizer updated");
    return { type: "done" };
  }
}
