// A namespace's deletion as the real namespace controller carries it out: the namespace is marked Terminating at
// once, its contents are deleted in the background (objects held by finalizers wait for them), and the namespace
// itself goes once it is empty. The deletions go through the API (api.ts) as any client's would.
import { NAMESPACE_TYPE, type ResourceRegistry } from "./resources.ts";
import type { ObjectStore } from "./store.ts";
import { deepClone, type KubeObject, type ResourceType, storageKeyOf } from "./types.ts";
import { serverTime } from "./write-rules.ts";

export const PROTECTED_NAMESPACES = ["default", "kube-system", "kube-public"];

/** First look after the namespace is marked; then again this often while finalizers hold objects in it. */
const FIRST_CLEANUP_MS = 20;
const CLEANUP_RETRY_MS = 250;

export interface NamespaceTerminationDeps {
  store: ObjectStore;
  registry: ResourceRegistry;
  /** Deletes one object as a DELETE request would (finalizers respected). */
  deleteObject(type: ResourceType, namespace: string, name: string): void;
  /** Removes the empty namespace from the store. */
  removeNamespace(namespace: KubeObject): void;
}

export class NamespaceTermination {
  readonly #deps: NamespaceTerminationDeps;
  #timers = new Set<NodeJS.Timeout>();

  constructor(deps: NamespaceTerminationDeps) {
    this.#deps = deps;
  }

  /** Marks the namespace Terminating and starts emptying it; answers the namespace as stored. */
  terminate(old: KubeObject): KubeObject {
    if (old.metadata.deletionTimestamp !== undefined) return old;
    const next = deepClone(old);
    next.metadata.deletionTimestamp = serverTime();
    next.status = { phase: "Terminating" };
    const stored = this.#deps.store.put(storageKeyOf(NAMESPACE_TYPE), next, old);
    this.#schedule(old.metadata.name ?? "", FIRST_CLEANUP_MS);
    return stored;
  }

  /** Stops the background work. */
  dispose(): void {
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }

  #schedule(namespace: string, delayMs: number): void {
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      this.#finish(namespace);
    }, delayMs);
    this.#timers.add(timer);
  }

  #finish(namespace: string): void {
    const { store, registry } = this.#deps;
    const object = store.get(storageKeyOf(NAMESPACE_TYPE), undefined, namespace);
    if (!object) return;
    const namespacedTypes = registry.all().filter((type) => type.namespaced);
    for (const type of namespacedTypes) {
      for (const item of store.list(storageKeyOf(type), namespace)) {
        this.#deps.deleteObject(type, namespace, item.metadata.name ?? "");
      }
    }
    if (namespacedTypes.some((type) => store.list(storageKeyOf(type), namespace).length > 0)) {
      // Objects held by finalizers keep the namespace Terminating; look again later.
      this.#schedule(namespace, CLEANUP_RETRY_MS);
      return;
    }
    this.#deps.removeNamespace(object);
  }
}
