// A generic description of a Kubernetes resource, and the list calls the informers need for it.
import {
  type ConfigurationOptions,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  Observable,
  type RequestContext,
} from "@kubernetes/client-node";
import { z } from "zod";

/** Enough to address any resource over the REST API. `group: ""` is the core group (/api/v1). */
export interface KubeResource {
  group: string;
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
}

export const SECRETS: KubeResource = { group: "", version: "v1", plural: "secrets", kind: "Secret", namespaced: true };
export const CONFIG_MAPS: KubeResource = {
  group: "",
  version: "v1",
  plural: "configmaps",
  kind: "ConfigMap",
  namespaced: true,
};

/** `gpucloud.dev/v1alpha1`, or `v1` for the core group. */
export function apiVersionOf(resource: KubeResource): string {
  return resource.group === "" ? resource.version : `${resource.group}/${resource.version}`;
}

/** A stable identity of a resource, e.g. `gpuvms.gpucloud.dev` or `secrets`. */
export function resourceId(resource: KubeResource): string {
  return resource.group === "" ? resource.plural : `${resource.plural}.${resource.group}`;
}

/** The collection path, namespaced when `namespace` is given and the resource is namespaced. */
export function collectionPath(resource: KubeResource, namespace?: string): string {
  const prefix = resource.group === "" ? `/api/${resource.version}` : `/apis/${resource.group}/${resource.version}`;
  const scope = resource.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : "";
  return `${prefix}${scope}/${resource.plural}`;
}

/** Thrown when the API answers a list with something that is not a list. */
export class MalformedResponseError extends Error {
  override name = "MalformedResponseError";
}

const ListSchema = z.looseObject({
  metadata: z.looseObject({ resourceVersion: z.string().optional() }).optional(),
  items: z.array(
    z.looseObject({
      metadata: z.looseObject({ name: z.string(), namespace: z.string().optional() }),
    }),
  ),
});

/** A list call; aborting `signal` abandons the request (the informer does so when a list hangs). */
export type ListFunction = (signal?: AbortSignal) => Promise<KubernetesListObject<KubernetesObject>>;

/** Request options that tie the request to `signal` (client-node's generated calls take no signal otherwise). */
function abortOptions(signal: AbortSignal | undefined): ConfigurationOptions | undefined {
  if (signal === undefined) return undefined;
  return {
    middleware: [
      {
        pre: (context: RequestContext) => {
          context.setSignal(signal);
          return new Observable(Promise.resolve(context));
        },
        post: (context) => new Observable(Promise.resolve(context)),
      },
    ],
    middlewareMergeStrategy: "append",
  };
}

/**
 * A list call for the resource over all namespaces (namespace undefined) or one. Custom resources go through
 * CustomObjectsApi; of the core group the operator reads only Secrets and ConfigMaps.
 */
export function makeListFunction(
  kubeConfig: KubeConfig,
  resource: KubeResource,
  namespace?: string,
  selectors: { fieldSelector?: string; labelSelector?: string } = {},
): ListFunction {
  const scoped = resource.namespaced ? namespace : undefined;
  const selector = selectors;
  let call: (options: ConfigurationOptions | undefined) => Promise<unknown>;
  if (resource.group !== "") {
    const api = kubeConfig.makeApiClient(CustomObjectsApi);
    const { group, version, plural } = resource;
    call =
      scoped === undefined
        ? (options) => api.listClusterCustomObject({ group, version, plural, ...selector }, options)
        : (options) =>
            api.listNamespacedCustomObject({ group, version, plural, namespace: scoped, ...selector }, options);
  } else {
    const core = kubeConfig.makeApiClient(CoreV1Api);
    if (resource.plural === "secrets") {
      call =
        scoped === undefined
          ? (options) => core.listSecretForAllNamespaces({ ...selector }, options)
          : (options) => core.listNamespacedSecret({ namespace: scoped, ...selector }, options);
    } else if (resource.plural === "configmaps") {
      call =
        scoped === undefined
          ? (options) => core.listConfigMapForAllNamespaces({ ...selector }, options)
          : (options) => core.listNamespacedConfigMap({ namespace: scoped, ...selector }, options);
    } else {
      throw new RangeError(`core resource "${resource.plural}" is not supported by the runtime informers`);
    }
  }
  return async (signal) => {
    const answer = await call(abortOptions(signal));
    const parsed = ListSchema.safeParse(answer);
    if (!parsed.success) {
      throw new MalformedResponseError(`list of ${resourceId(resource)} is malformed: ${parsed.error.message}`);
    }
    return answer as KubernetesListObject<KubernetesObject>;
  };
}
