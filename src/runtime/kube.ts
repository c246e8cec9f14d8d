// Typed helpers for the writes and reads reconcilers need beyond the informer cache: guarded status and
// finalizer patches on custom resources, and get/create/patch of Secrets and ConfigMaps.
import type { KubeConfig, KubernetesObject, V1ConfigMap, V1Secret } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { type KubeMethod, type KubeRequestOptions, kubeRequest } from "./kube-http.ts";
import { apiVersionOf, CONFIG_MAPS, collectionPath, type KubeResource, resourceId, SECRETS } from "./resource.ts";
import { createMergePatch, statusOf, toKubeApiError, type WriteResult } from "./status.ts";

/** A custom object as the runtime sees it: metadata plus an opaque status. */
export interface StatusObject extends KubernetesObject {
  status?: unknown;
}

/** Counts writes by kind of call; tests and metrics read it. */
export interface WriteCounters {
  statusPatches: number;
  finalizerPatches: number;
  conflicts: number;
}

const MERGE_PATCH = "application/merge-patch+json";

/** The path of one object (and of its subresource), e.g. /apis/g/v/namespaces/ns/plural/name/status. */
function objectPath(resource: KubeResource, namespace: string, name: string, subresource?: string): string {
  const base = `${collectionPath(resource, namespace)}/${encodeURIComponent(name)}`;
  return subresource === undefined ? base : `${base}/${subresource}`;
}

export class KubeClient {
  readonly #kubeConfig: KubeConfig;
  readonly #logger: Logger | undefined;
  readonly writes: WriteCounters = { statusPatches: 0, finalizerPatches: 0, conflicts: 0 };

  constructor(kubeConfig: KubeConfig, logger?: Logger) {
    this.#kubeConfig = kubeConfig;
    this.#logger = logger;
  }

  /** Every call goes through kube-http.ts: the KubeConfig's auth and connection, without the generated client. */
  #send<T>(method: KubeMethod, path: string, options?: KubeRequestOptions): Promise<T> {
    return kubeRequest(this.#kubeConfig, method, path, options) as Promise<T>;
  }

  /**
   * Writes `status` through the status subresource if it differs from `object.status` (key order ignored).
   * The merge patch carries `object`'s resourceVersion, so a concurrent change answers `conflict`.
   */
  async patchStatus<T extends StatusObject>(
    resource: KubeResource,
    object: T,
    status: unknown,
  ): Promise<WriteResult<T>> {
    // Deep comparison (key order ignored): an unchanged status is never written, so a no-op reconcile is free.
    const statusPatch = createMergePatch(object.status ?? {}, status);
    if (statusPatch === undefined) return { type: "unchanged" };
    const { namespace, name, resourceVersion } = identify(resource, object);
    const body = { metadata: { resourceVersion }, status: statusPatch };
    this.writes.statusPatches++;
    return this.#guarded(`patch status of ${resourceId(resource)} ${namespace}/${name}`, () =>
      this.#send<T>("PATCH", objectPath(resource, namespace, name, "status"), { body, contentType: MERGE_PATCH }),
    );
  }

  /** Adds a finalizer (no-op if present), guarded by resourceVersion. */
  async addFinalizer<T extends KubernetesObject>(
    resource: KubeResource,
    object: T,
    finalizer: string,
  ): Promise<WriteResult<T>> {
    const finalizers = object.metadata?.finalizers ?? [];
    if (finalizers.includes(finalizer)) return { type: "unchanged" };
    return this.#patchFinalizers(resource, object, [...finalizers, finalizer]);
  }

  /** Removes a finalizer (no-op if absent), guarded by resourceVersion. */
  async removeFinalizer<T extends KubernetesObject>(
    resource: KubeResource,
    object: T,
    finalizer: string,
  ): Promise<WriteResult<T>> {
    const finalizers = object.metadata?.finalizers ?? [];
    if (!finalizers.includes(finalizer)) return { type: "unchanged" };
    return this.#patchFinalizers(
      resource,
      object,
      finalizers.filter((entry) => entry !== finalizer),
    );
  }

  /** Merge-patches a custom object (spec, annotations…); pass `resourceVersion` to make it conditional. */
  async patchObject<T extends KubernetesObject>(
    resource: KubeResource,
    namespace: string,
    name: string,
    patch: Record<string, unknown>,
  ): Promise<WriteResult<T>> {
    return this.#guarded(`patch ${resourceId(resource)} ${namespace}/${name}`, () =>
      this.#send<T>("PATCH", objectPath(resource, namespace, name), { body: patch, contentType: MERGE_PATCH }),
    );
  }

  /** Creates a custom object; `exists` when an object of that name is there already (409 AlreadyExists). */
  async createObject<T extends KubernetesObject>(
    resource: KubeResource,
    namespace: string,
    body: T,
  ): Promise<{ type: "created"; object: T } | { type: "exists" }> {
    try {
      const answer = await this.#send<T>(
        "POST",
        collectionPath(resource, resource.namespaced ? namespace : undefined),
        {
          body,
        },
      );
      return { type: "created", object: answer };
    } catch (error) {
      if (statusOf(error) === 409) return { type: "exists" };
      throw toKubeApiError(error, `create ${resourceId(resource)} ${namespace}/${body.metadata?.name ?? "?"}`);
    }
  }

  /**
   * Deletes a custom object (background propagation), only if it still has `uid`: `gone` when it does not
   * exist, `conflict` when the name now belongs to another object.
   */
  async deleteObject(
    resource: KubeResource,
    namespace: string,
    name: string,
    uid?: string,
  ): Promise<"deleted" | "gone" | "conflict"> {
    const body = {
      apiVersion: "v1",
      kind: "DeleteOptions",
      propagationPolicy: "Background",
      ...(uid !== undefined ? { preconditions: { uid } } : {}),
    };
    try {
      await this.#send<unknown>("DELETE", objectPath(resource, resource.namespaced ? namespace : "", name), { body });
      return "deleted";
    } catch (error) {
      const status = statusOf(error);
      if (status === 404) return "gone";
      if (status === 409) return "conflict";
      throw toKubeApiError(error, `delete ${resourceId(resource)} ${namespace}/${name}`);
    }
  }

  /** Reads a custom object straight from the API (bypassing the cache); undefined when it does not exist. */
  async getObject(resource: KubeResource, namespace: string, name: string): Promise<unknown> {
    try {
      return await this.#send<unknown>("GET", objectPath(resource, namespace, name));
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw toKubeApiError(error, `get ${resourceId(resource)} ${namespace}/${name}`);
    }
  }

  /**
   * The items of one namespace's collection that the selectors pick, straight from the API (a quorum read, not a
   * cache); for small answers (one page of at most 500). With `metadata.name=…` it reads one object where only
   * list is granted.
   */
  async listObjects(
    resource: KubeResource,
    namespace: string,
    selectors: { labelSelector?: string; fieldSelector?: string },
  ): Promise<unknown[]> {
    const query = new URLSearchParams({ ...selectors, limit: "500" });
    try {
      const answer = await this.#send<{ items?: unknown }>("GET", `${collectionPath(resource, namespace)}?${query}`);
      return Array.isArray(answer.items) ? answer.items : [];
    } catch (error) {
      throw toKubeApiError(error, `list ${resourceId(resource)} in ${namespace} (${query})`);
    }
  }

  async getSecret(namespace: string, name: string): Promise<V1Secret | undefined> {
    try {
      return await this.#send<V1Secret>("GET", objectPath(SECRETS, namespace, name));
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw toKubeApiError(error, `get secret ${namespace}/${name}`);
    }
  }

  async createSecret(namespace: string, secret: V1Secret): Promise<V1Secret> {
    try {
      return await this.#send<V1Secret>("POST", collectionPath(SECRETS, namespace), {
        body: { apiVersion: "v1", kind: "Secret", ...secret },
      });
    } catch (error) {
      throw toKubeApiError(error, `create secret ${namespace}/${secret.metadata?.name ?? "?"}`);
    }
  }

  async patchSecret(namespace: string, name: string, patch: Record<string, unknown>): Promise<WriteResult<V1Secret>> {
    return this.#guarded(`patch secret ${namespace}/${name}`, () =>
      this.#send<V1Secret>("PATCH", objectPath(SECRETS, namespace, name), { body: patch, contentType: MERGE_PATCH }),
    );
  }

  async getConfigMap(namespace: string, name: string): Promise<V1ConfigMap | undefined> {
    try {
      return await this.#send<V1ConfigMap>("GET", objectPath(CONFIG_MAPS, namespace, name));
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw toKubeApiError(error, `get configmap ${namespace}/${name}`);
    }
  }

  async createConfigMap(namespace: string, configMap: V1ConfigMap): Promise<V1ConfigMap> {
    try {
      return await this.#send<V1ConfigMap>("POST", collectionPath(CONFIG_MAPS, namespace), {
        body: { apiVersion: "v1", kind: "ConfigMap", ...configMap },
      });
    } catch (error) {
      throw toKubeApiError(error, `create configmap ${namespace}/${configMap.metadata?.name ?? "?"}`);
    }
  }

  async patchConfigMap(
    namespace: string,
    name: string,
    patch: Record<string, unknown>,
  ): Promise<WriteResult<V1ConfigMap>> {
    return this.#guarded(`patch configmap ${namespace}/${name}`, () =>
      this.#send<V1ConfigMap>("PATCH", objectPath(CONFIG_MAPS, namespace, name), {
        body: patch,
        contentType: MERGE_PATCH,
      }),
    );
  }

  /**
   * Deletes a Secret or ConfigMap only if it is still the object with `uid` (a precondition: a namesake created
   * since is left alone). `notFound` when it is gone already, `conflict` when the uid no longer matches.
   */
  async deleteOwned(
    kind: "Secret" | "ConfigMap",
    namespace: string,
    name: string,
    uid: string,
  ): Promise<WriteResult<unknown>> {
    const body = { apiVersion: "v1", kind: "DeleteOptions", preconditions: { uid } };
    const resource = kind === "Secret" ? SECRETS : CONFIG_MAPS;
    return this.#guarded(`delete ${kind.toLowerCase()} ${namespace}/${name}`, () =>
      this.#send<unknown>("DELETE", objectPath(resource, namespace, name), { body }),
    );
  }

  async #patchFinalizers<T extends KubernetesObject>(
    resource: KubeResource,
    object: T,
    finalizers: string[],
  ): Promise<WriteResult<T>> {
    const { namespace, name, resourceVersion } = identify(resource, object);
    this.writes.finalizerPatches++;
    return this.patchObject<T>(resource, namespace, name, { metadata: { resourceVersion, finalizers } });
  }

  async #guarded<T>(what: string, call: () => Promise<T>): Promise<WriteResult<T>> {
    try {
      return { type: "written", object: await call() };
    } catch (error) {
      const status = statusOf(error);
      if (status === 409) {
        this.writes.conflicts++;
        this.#logger?.debug({ what }, "conflict, the caller requeues");
        return { type: "conflict" };
      }
      if (status === 404) return { type: "notFound" };
      throw toKubeApiError(error, what);
    }
  }
}

/** Namespace, name and resourceVersion of an object, or a clear error when the object lacks them. */
function identify(
  resource: KubeResource,
  object: KubernetesObject,
): { namespace: string; name: string; resourceVersion: string } {
  const name = object.metadata?.name;
  const resourceVersion = object.metadata?.resourceVersion;
  const namespace = resource.namespaced ? object.metadata?.namespace : "";
  if (!name || !resourceVersion || namespace === undefined || (resource.namespaced && namespace === "")) {
    throw new TypeError(
      `${apiVersionOf(resource)} ${resource.kind} needs metadata.name, metadata.resourceVersion${resource.namespaced ? " and metadata.namespace" : ""} for a guarded write`,
    );
  }
  return { namespace, name, resourceVersion };
}
