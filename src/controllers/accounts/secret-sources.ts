// Where the operator reads Secrets from. Only labelled Secrets are cached (credentials, keys and scripts objects
// refer to, and the connection details it writes), never every Secret of the cluster (ADR 0011). Two more caches
// serve the credentials rules: the default credentials Secret (--credentials-secret, the administrator's: no label
// needed, usually in the operator's own namespace), and every Secret of the default credentials name, labelled or
// not (a namespace that has one never falls back to the operator's default Secret).
import type { KubernetesObject } from "@kubernetes/client-node";
import { DEFAULT_CREDENTIALS_SECRET, SECRET_WATCH_SELECTOR } from "../../api/common.ts";
import { type Manager, NAMESPACES, type ObjectInformer, SECRETS } from "../../runtime/index.ts";
import type { SecretLike } from "./credentials.ts";

export type CachedSecret = KubernetesObject & SecretLike;

export interface SecretSources {
  /** The labelled Secrets, and the selection that caches them (for watches of the same Secrets). */
  labelled: ObjectInformer<CachedSecret>;
  labelledSelection: { labelSelector: string };
  /** Secrets of the default credentials name, labelled or not, and their selection. */
  defaultNamed: ObjectInformer<CachedSecret>;
  defaultNamedSelection: { fieldSelector: string };
  /** --credentials-secret and its informer (of that one object), when the flag is given. */
  defaultSecret?: { ref: { namespace: string; name: string }; informer: ObjectInformer<CachedSecret> };
  /** The namespaces allowed the default Secret, when --default-credentials-namespaces names them. */
  allowedNamespaces?: ObjectInformer;
  /** A Secret the operator may read: a labelled one, or the default Secret. */
  read(namespace: string, name: string): CachedSecret | undefined;
}

export function watchSecrets(manager: Manager): SecretSources {
  const config = manager.config;
  const labelledSelection = { labelSelector: SECRET_WATCH_SELECTOR };
  const labelled = manager.informerFor<CachedSecret>(SECRETS, undefined, labelledSelection);
  const ref = config.credentialsSecret;
  const defaultSecret =
    ref === undefined
      ? undefined
      : { ref, informer: manager.informerForObject<CachedSecret>(SECRETS, ref.namespace, ref.name) };
  const defaultNamedSelection = { fieldSelector: `metadata.name=${DEFAULT_CREDENTIALS_SECRET}` };
  const defaultNamed = manager.informerFor<CachedSecret>(SECRETS, undefined, defaultNamedSelection);
  const allowedNamespaces =
    config.defaultCredentialsNamespaces === undefined
      ? undefined
      : manager.informerFor(NAMESPACES, [], { labelSelector: config.defaultCredentialsNamespaces });
  return {
    labelled,
    labelledSelection,
    defaultNamed,
    defaultNamedSelection,
    ...(defaultSecret !== undefined ? { defaultSecret } : {}),
    ...(allowedNamespaces !== undefined ? { allowedNamespaces } : {}),
    read: (namespace, name) =>
      labelled.get(namespace, name) ??
      (namespace === ref?.namespace && name === ref.name ? defaultSecret?.informer.get(namespace, name) : undefined),
  };
}
