// A generic description of a Kubernetes resource, and the list calls the informers need for it.
import type { KubeConfig, KubernetesListObject, KubernetesObject } from "@kubernetes/client-node";
import { z } from "zod";
import { kubeRequest } from "./kube-http.ts";

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

/** Read only for --default-credentials-namespaces (which namespaces may use the default credentials). */
export const NAMESPACES: KubeResource = {
  group: "",
  version: "v1",
  plural: "namespaces",
  kind: "Namespace",
  namespaced: false,
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
  metadata: z.looseObject({ resourceVersion: z.string().optional(), continue: z.string().optional() }).optional(),
  items: z.array(z.unknown()),
});

/** Every item needs metadata.name (a string); checked in one loop, the items kept as they came. */
function malformedItem(items: readonly unknown[]): string | undefined {
  for (let index = 0; index < items.length; index++) {
    const item = items[index];
    const metadata = typeof item === "object" && item !== null && "metadata" in item ? item.metadata : undefined;
    const name = typeof metadata === "object" && metadata !== null && "name" in metadata ? metadata.name : undefined;
    if (typeof name !== "string") return `items[${index}].metadata.name: expected a string`;
  }
  return undefined;
}

/** Items per list page, as client-go's reflector asks for (a page is parsed and applied between yields). */
export const LIST_PAGE_SIZE = 500;

/** A list call; aborting `signal` abandons the request (the informer does so when a list hangs). */
export type ListFunction = (signal?: AbortSignal) => Promise<KubernetesListObject<KubernetesObject>>;

/**
 * A list call for the resource over all namespaces (namespace undefined) or one, as plain JSON over the
 * KubeConfig's connection (kube-http.ts); of the core group the operator reads only Secrets, ConfigMaps and
 * (with --default-credentials-namespaces) Namespaces.
 */
export function makeListFunction(
  kubeConfig: KubeConfig,
  resource: KubeResource,
  namespace?: string,
  selectors: { fieldSelector?: string; labelSelector?: string } = {},
  pageSize = LIST_PAGE_SIZE,
): ListFunction {
  if (resource.group === "" && !["secrets", "configmaps", "namespaces"].includes(resource.plural)) {
    throw new RangeError(`core resource "${resource.plural}" is not supported by the runtime informers`);
  }
  const path = collectionPath(resource, resource.namespaced ? namespace : undefined);
  // Paged (limit + continue, one consistent snapshot) so that no single answer is parsed in one go and the event
  // loop breathes between pages; the pages are returned as one list at the first page's resourceVersion.
  const fetchPage = async (token: string | undefined, signal?: AbortSignal) => {
    const query = new URLSearchParams({
      ...(selectors.fieldSelector ? { fieldSelector: selectors.fieldSelector } : {}),
      ...(selectors.labelSelector ? { labelSelector: selectors.labelSelector } : {}),
      limit: String(pageSize),
      ...(token ? { continue: token } : {}),
    });
    const answer = await kubeRequest(kubeConfig, "GET", `${path}?${query}`, signal ? { signal } : {});
    const parsed = ListSchema.safeParse(answer);
    const problem = parsed.success ? malformedItem(parsed.data.items) : parsed.error.message;
    if (!parsed.success || problem !== undefined) {
      throw new MalformedResponseError(`list of ${resourceId(resource)} is malformed: ${problem}`);
    }
    return parsed.data;
  };
  return async (signal) => {
    const items: unknown[] = [];
    let first: z.infer<typeof ListSchema> | undefined;
    let token: string | undefined;
    do {
      const page = await fetchPage(token, signal);
      first ??= page;
      for (const item of page.items) items.push(item);
      token = page.metadata?.continue || undefined;
      if (token !== undefined) await yieldToEventLoop();
    } while (token !== undefined);
    const { continue: _continue, ...metadata } = first?.metadata ?? {};
    return { ...first, metadata, items } as KubernetesListObject<KubernetesObject>;
  };
}

/** Lets timers and I/O run between chunks of a long synchronous job. */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
