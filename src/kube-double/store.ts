// The object store: one global, monotonic resourceVersion, a bounded event history for watch resumption,
// and listeners for live watches. Objects are stored by storage key (group/plural), independent of version.
import type { KubeObject } from "./types.ts";

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED";

export interface StoredEvent {
  type: WatchEventType;
  storageKey: string;
  resourceVersion: number;
  object: KubeObject;
  /** The object before this change, so selector watches can see objects leave their selection. */
  previous: KubeObject | undefined;
}

export interface StoreSnapshot {
  resourceVersion: number;
  objects: { storageKey: string; object: KubeObject }[];
}

function objectKey(namespace: string | undefined, name: string): string {
  return `${namespace ?? ""}/${name}`;
}

export class ObjectStore {
  #objects = new Map<string, Map<string, KubeObject>>();
  #resourceVersion = 1;
  #history: StoredEvent[] = [];
  /** Watches from a resourceVersion below this one cannot be served: their history is gone. */
  #oldestServable = 1;
  #historyLimit: number;
  #listeners = new Set<(event: StoredEvent) => void>();
  #onChange: () => void;

  constructor(options: { historyLimit: number; onChange: () => void }) {
    this.#historyLimit = options.historyLimit;
    this.#onChange = options.onChange;
  }

  get resourceVersion(): number {
    return this.#resourceVersion;
  }

  get oldestServable(): number {
    return this.#oldestServable;
  }

  get(storageKey: string, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.#objects.get(storageKey)?.get(objectKey(namespace, name));
  }

  /** Objects of one resource, sorted by namespace then name, optionally in one namespace. */
  list(storageKey: string, namespace?: string): KubeObject[] {
    const objects = [...(this.#objects.get(storageKey)?.values() ?? [])];
    const inScope =
      namespace === undefined ? objects : objects.filter((object) => object.metadata.namespace === namespace);
    return inScope.sort((a, b) =>
      objectKey(a.metadata.namespace, a.metadata.name ?? "").localeCompare(
        objectKey(b.metadata.namespace, b.metadata.name ?? ""),
      ),
    );
  }

  /** Store a new or changed object; stamps and returns the new resourceVersion. */
  put(storageKey: string, object: KubeObject, previous: KubeObject | undefined): KubeObject {
    this.#resourceVersion += 1;
    object.metadata.resourceVersion = String(this.#resourceVersion);
    let objects = this.#objects.get(storageKey);
    if (!objects) {
      objects = new Map();
      this.#objects.set(storageKey, objects);
    }
    objects.set(objectKey(object.metadata.namespace, object.metadata.name ?? ""), object);
    this.#record({
      type: previous ? "MODIFIED" : "ADDED",
      storageKey,
      resourceVersion: this.#resourceVersion,
      object,
      previous,
    });
    return object;
  }

  remove(storageKey: string, object: KubeObject): KubeObject {
    this.#objects.get(storageKey)?.delete(objectKey(object.metadata.namespace, object.metadata.name ?? ""));
    this.#resourceVersion += 1;
    // Like the real server, the deleted object carries the resourceVersion of its deletion.
    const deleted: KubeObject = {
      ...object,
      metadata: { ...object.metadata, resourceVersion: String(this.#resourceVersion) },
    };
    this.#record({
      type: "DELETED",
      storageKey,
      resourceVersion: this.#resourceVersion,
      object: deleted,
      previous: object,
    });
    return deleted;
  }

  #record(event: StoredEvent): void {
    this.#history.push(event);
    if (this.#history.length > this.#historyLimit) {
      const dropped = this.#history.splice(0, this.#history.length - this.#historyLimit);
      const last = dropped.at(-1);
      if (last) this.#oldestServable = last.resourceVersion;
    }
    for (const listener of this.#listeners) listener(event);
    this.#onChange();
  }

  /** Events of one resource after `resourceVersion`, or "expired" when history no longer reaches back that far. */
  eventsAfter(storageKey: string, resourceVersion: number): StoredEvent[] | "expired" {
    if (resourceVersion < this.#oldestServable) return "expired";
    return this.#history.filter((event) => event.storageKey === storageKey && event.resourceVersion > resourceVersion);
  }

  /** Forget all history: any watch from an older resourceVersion now gets 410 Gone. */
  compact(): void {
    this.#history = [];
    this.#oldestServable = this.#resourceVersion;
  }

  subscribe(listener: (event: StoredEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  snapshot(): StoreSnapshot {
    const objects: StoreSnapshot["objects"] = [];
    for (const [storageKey, byName] of this.#objects) {
      for (const object of byName.values()) objects.push({ storageKey, object });
    }
    return { resourceVersion: this.#resourceVersion, objects };
  }

  /** Load persisted objects; history starts empty, so older resourceVersions are expired. */
  restore(snapshot: StoreSnapshot): void {
    this.#objects.clear();
    for (const { storageKey, object } of snapshot.objects) {
      let objects = this.#objects.get(storageKey);
      if (!objects) {
        objects = new Map();
        this.#objects.set(storageKey, objects);
      }
      objects.set(objectKey(object.metadata.namespace, object.metadata.name ?? ""), object);
    }
    this.#resourceVersion = Math.max(this.#resourceVersion, snapshot.resourceVersion);
    this.compact();
  }
}
