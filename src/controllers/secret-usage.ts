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
  /** How many managed objects holding our finalizer use this Secret. */
  usersOf(namespace: string, name: string): number;
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
    const inUse = this.#options.usersOf(request.namespace, request.name) > 0;
    if (held === inUse) return { type: "done" };
    // Only Secrets the operator already uses get the finalizer; a Secret being deleted can still lose it.
    if (inUse && secret.metadata?.deletionTimestamp !== undefined) return { type: "done" };
    const next = inUse ? [...finalizers, CREDENTIALS_FINALIZER] : finalizers.filter((f) => f !== CREDENTIALS_FINALIZER);
    const result = await this.#options.kube.patchSecret(request.namespace, request.name, {
      metadata: { resourceVersion: secret.metadata?.resourceVersion, finalizers: next },
    });
    if (result.type === "conflict") return { type: "requeueAfter", ms: 0 };
    ctx.logger.info({ secret: `${request.namespace}/${request.name}`, inUse }, "credentials-in-use finalizer updated");
    return { type: "done" };
  }
}
