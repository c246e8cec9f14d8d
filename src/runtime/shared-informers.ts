// The manager's informers: one per resource, namespace set and selector, shared by every controller and watch that
// asks for the same objects; started with the manager (or at once when asked for later), and what /readyz and the
// cache-sync timeout say about them.
import type { KubeConfig, KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { type InformerOptions, type ObjectInformer, ResilientInformer } from "./informer.ts";
import type { InformerView } from "./informer-cache.ts";
import { MultiNamespaceInformer } from "./multi-namespace-informer.ts";
import { type KubeResource, resourceId } from "./resource.ts";

/** Informer tuning, mostly for tests (short stale windows, fast restarts). */
export type InformerTuning = Pick<
  InformerOptions,
  | "watchTimeoutSeconds"
  | "staleAfterMs"
  | "staleCheckIntervalMs"
  | "restartBaseDelayMs"
  | "restartMaxDelayMs"
  | "listTimeoutMs"
>;

/** Which objects of a resource an informer holds, beyond its namespaces. */
export interface Selection {
  labelSelector?: string;
  fieldSelector?: string;
}

export interface SharedInformersOptions {
  /** Reads go through it (the manager's, with every request counted). */
  kubeConfig: KubeConfig;
  logger: Logger;
  /** The namespaces an informer watches unless told others (--watch-namespace; empty: all). */
  namespaces: readonly string[];
  tuning?: InformerTuning;
}

export class SharedInformers {
  readonly #options: SharedInformersOptions;
  /** `<resource>@<namespaces>[?labels][&fields]` or `<resource>@<namespace>/<name>` → its informer. */
  readonly #informers = new Map<string, ObjectInformer>();
  /** resource id → what its informers hold in full (sharding), set before the first of them is made. */
  readonly #views = new Map<string, InformerView<KubernetesObject>>();
  /** resource id → what its informers keep of each object (default stripUnread), set before the first is made. */
  readonly #transforms = new Map<string, (object: KubernetesObject) => void>();
  #started = false;

  constructor(options: SharedInformersOptions) {
    this.#options = options;
  }

  /**
   * What every informer of `resource` holds in full and what it only notes (InformerView): a shard's objects and
   * what they refer to. Set before any informer of the resource is made (they are shared, made once).
   */
  setView(resource: KubeResource, view: InformerView<KubernetesObject>): void {
    this.#views.set(this.#beforeFirstInformer(resource, "view"), view);
  }

  /**
   * What every informer of `resource` keeps of each object, in place of the default (stripUnread): a resource whose
   * objects are read only through a record of its own keeps only what that record is made from. Set before any
   * informer of the resource is made.
   */
  setTransform(resource: KubeResource, transform: (object: KubernetesObject) => void): void {
    this.#transforms.set(this.#beforeFirstInformer(resource, "transform"), transform);
  }

  #beforeFirstInformer(resource: KubeResource, what: string): string {
    const id = resourceId(resource);
    if ([...this.#informers.keys()].some((key) => key.startsWith(`${id}@`))) {
      throw new Error(`the ${what} of ${id} is set after an informer of it was made`);
    }
    return id;
  }

  /** The informer of `resource` in `namespaces` (default: the watched ones) with `selection`, made once. */
  informerFor<T extends KubernetesObject = KubernetesObject>(
    resource: KubeResource,
    namespaces: readonly string[] = this.#options.namespaces,
    selection: Selection = {},
  ): ObjectInformer<T> {
    const scoped = resource.namespaced ? [...new Set(namespaces)].sort() : [];
    const { labelSelector: labels, fieldSelector: fields } = selection;
    const query = [labels === undefined ? "" : `?${labels}`, fields === undefined ? "" : `&${fields}`].join("");
    return this.#shared(`${resourceId(resource)}@${scoped.join(",")}${query}`, () => {
      const options: InformerOptions = {
        ...this.#informerOptions(resource),
        ...(labels === undefined ? {} : { labelSelector: labels }),
        ...(fields === undefined ? {} : { fieldSelector: fields }),
      };
      if (scoped.length > 1) return new MultiNamespaceInformer(options, scoped);
      return new ResilientInformer({ ...options, ...(scoped[0] ? { namespace: scoped[0] } : {}) });
    });
  }

  /** An informer of exactly one object (`metadata.name=<name>` in its namespace), whatever the watched namespaces. */
  informerForObject<T extends KubernetesObject = KubernetesObject>(
    resource: KubeResource,
    namespace: string,
    name: string,
  ): ObjectInformer<T> {
    return this.#shared(
      `${resourceId(resource)}@${namespace}/${name}`,
      () =>
        new ResilientInformer({
          ...this.#informerOptions(resource),
          namespace,
          fieldSelector: `metadata.name=${name}`,
        }),
    );
  }

  get size(): number {
    return this.#informers.size;
  }

  /** Starts every informer, and from now on each one made later at once. */
  start(): void {
    this.#started = true;
    for (const informer of this.#informers.values()) informer.start();
  }

  /** True when every informer has synced (the /readyz check). */
  hasSynced(): boolean {
    return [...this.#informers.values()].every((informer) => informer.hasSynced());
  }

  /** Resolves once every informer has synced, or when the signal aborts. */
  async waitForSync(signal: AbortSignal): Promise<void> {
    await Promise.all([...this.#informers.values()].map((informer) => informer.waitForSync(signal)));
  }

  /** The unsynced informers and why: "gpuvms.gpucloud.dev: the Kubernetes API has no …; secrets (namespaces a,b): …". */
  unsyncedSummary(): string {
    return [...this.#informers.entries()]
      .filter(([, informer]) => !informer.hasSynced())
      .map(([key, informer]) => {
        const [resource, namespaces] = key.split("@");
        const label = namespaces ? `${resource} (namespaces ${namespaces})` : resource;
        return `${label}: ${informer.syncError() ?? "no list answered yet"}`;
      })
      .join("; ");
  }

  async stop(): Promise<void> {
    await Promise.all([...this.#informers.values()].map((informer) => informer.stop()));
  }

  #informerOptions(resource: KubeResource): InformerOptions {
    const view = this.#views.get(resourceId(resource));
    const transform = this.#transforms.get(resourceId(resource));
    return {
      ...this.#options.tuning,
      kubeConfig: this.#options.kubeConfig,
      resource,
      logger: this.#options.logger,
      ...(view !== undefined ? { view } : {}),
      ...(transform !== undefined ? { transform } : {}),
    };
  }

  #shared<T extends KubernetesObject>(key: string, make: () => ObjectInformer): ObjectInformer<T> {
    let informer = this.#informers.get(key);
    if (informer === undefined) {
      informer = make();
      this.#informers.set(key, informer);
      if (this.#started) informer.start();
    }
    // Callers name T; the cache holds what the API returned and reconcilers parse it before trusting it.
    return informer as unknown as ObjectInformer<T>;
  }
}
