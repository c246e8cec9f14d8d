// The informer's cache: namespace → name → object, fed from every list and watch event, and the events it hands to
// handlers (which by contract only enqueue keys; one that throws is logged, never an unhandled rejection). Cached
// objects lose what the operator never reads (stripUnread) and hold one copy of each repeated string; a new
// version shares the parts that did not change with the one it replaces (shareUnchanged). With a view (sharding),
// the cache holds in full only the objects the view keeps and a small note of each other one (a census: every key
// stays known), whose changes go to the note handlers.
import type { KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { type StringInterner, sharedInterner } from "../util/intern.ts";
import { sameJson } from "../util/json-values.ts";

export type InformerEventType = "add" | "update" | "delete";

export interface InformerEvent<T> {
  type: InformerEventType;
  object: T;
  /** The cached object an update replaced. */
  previous?: T;
}

/** Handlers must be quick and must not throw; by contract they only enqueue keys. */
export type InformerHandler<T> = (event: InformerEvent<T>) => void;

/**
 * What an informer holds of the objects it sees (sharding: a shard holds what it reconciles and what those refer
 * to, and only notes the rest). Both are called for every version of every object, so they must be cheap.
 */
export interface InformerView<T> {
  /** Whether the cache holds this object in full. */
  keep(object: T): boolean;
  /** What is kept of an object not held (small; `null` when the key is all there is to note). */
  note(object: T): unknown;
}

/** A change of an object the cache only notes: its note before and after (undefined: not noted then). */
export interface NoteEvent<T> {
  type: InformerEventType;
  namespace: string;
  name: string;
  /** The object as the event showed it (for a delete of a noted object: only its key may be known). */
  object: T;
  note?: unknown;
  previous?: unknown;
}

export type NoteHandler<T> = (event: NoteEvent<T>) => void;

export interface InformerCacheOptions {
  /** False for cluster-scoped objects: they are all kept under namespace "". */
  namespaced: boolean;
  logger: Logger;
  /** Applied to every object before it is cached, in place (default stripUnread). */
  transform?: (object: KubernetesObject) => void;
  /** One copy of each repeated string of cached objects (default: the process's shared table). */
  interner?: StringInterner;
  /** Hold only what the view keeps, note the rest (default: hold everything). */
  view?: InformerView<KubernetesObject>;
}

function objectKey(object: KubernetesObject): string | undefined {
  const name = object.metadata?.name;
  if (!name) return undefined;
  return `${object.metadata?.namespace ?? ""}/${name}`;
}

export class InformerCache<T extends KubernetesObject = KubernetesObject> {
  readonly #options: InformerCacheOptions;
  readonly #handlers = new Set<InformerHandler<T>>();
  readonly #noteHandlers = new Set<NoteHandler<T>>();
  /** namespace → name → object. */
  readonly #objects = new Map<string, Map<string, T>>();
  /** namespace → name → note, for the objects the view does not keep. */
  readonly #notes = new Map<string, Map<string, unknown>>();

  constructor(options: InformerCacheOptions) {
    this.#options = options;
  }

  /** Subscribes to cache changes; returns the unsubscribe function. */
  on(handler: InformerHandler<T>): () => void {
    this.#handlers.add(handler);
    return () => this.#handlers.delete(handler);
  }

  /** Subscribes to changes of noted objects (with a view); returns the unsubscribe function. */
  onNote(handler: NoteHandler<T>): () => void {
    this.#noteHandlers.add(handler);
    return () => this.#noteHandlers.delete(handler);
  }

  get(namespace: string, name: string): T | undefined {
    return this.#objects.get(this.#options.namespaced ? namespace : "")?.get(name);
  }

  /** Whether this object (by namespace and name) is held in full. */
  holds(object: KubernetesObject): boolean {
    const name = object.metadata?.name;
    return name !== undefined && this.get(object.metadata?.namespace ?? "", name) !== undefined;
  }

  /** The note of an object not held; undefined when it is held or unknown. */
  noteOf(namespace: string, name: string): unknown {
    return this.#notes.get(this.#options.namespaced ? namespace : "")?.get(name);
  }

  /** Whether an object of this key is known, held or noted. */
  knows(namespace: string, name: string): boolean {
    const ns = this.#options.namespaced ? namespace : "";
    return this.#objects.get(ns)?.has(name) === true || this.#notes.get(ns)?.has(name) === true;
  }

  /** The `namespace/name` (or `name`) key of every object known, held or noted. */
  keys(): string[] {
    const keys: string[] = [];
    for (const map of [this.#objects, this.#notes]) {
      for (const [namespace, names] of map) {
        for (const name of names.keys()) keys.push(namespace === "" ? name : `${namespace}/${name}`);
      }
    }
    return keys;
  }

  /** How many objects are held in full, and how many only noted. */
  sizes(): { held: number; noted: number } {
    let held = 0;
    let noted = 0;
    for (const names of this.#objects.values()) held += names.size;
    for (const names of this.#notes.values()) noted += names.size;
    return { held, noted };
  }

  list(namespace?: string): T[] {
    if (namespace !== undefined && this.#options.namespaced) {
      return [...(this.#objects.get(namespace)?.values() ?? [])];
    }
    const all: T[] = [];
    for (const objects of this.#objects.values()) all.push(...objects.values());
    return all;
  }

  /** The objects (held, or noted: by key only) a full list no longer holds: deleted while no watch told of it. */
  missingFrom(items: readonly T[]): T[] {
    const seen = new Set<string>();
    for (const item of items) {
      const key = objectKey(item);
      if (key !== undefined) seen.add(key);
    }
    const gone: T[] = [];
    for (const objects of this.#objects.values()) {
      for (const object of objects.values()) {
        const key = objectKey(object);
        if (key !== undefined && !seen.has(key)) gone.push(object);
      }
    }
    for (const [namespace, names] of this.#notes) {
      for (const name of names.keys()) {
        if (!seen.has(`${namespace}/${name}`)) gone.push({ metadata: { namespace, name } } as T);
      }
    }
    return gone;
  }

  /** Caches a new or changed object (one at a version already cached is no change) and tells the handlers. */
  upsert(object: T): void {
    const name = object.metadata?.name;
    if (!name) return;
    (this.#options.transform ?? stripUnread)(object);
    const namespace = this.#options.namespaced ? (object.metadata?.namespace ?? "") : "";
    const view = this.#options.view;
    if (view !== undefined && !view.keep(object)) {
      this.#removeHeld(namespace, name);
      this.#setNote(namespace, name, object, view.note(object));
      return;
    }
    if (view !== undefined) this.#dropNote(namespace, name, object);
    let objects = this.#objects.get(namespace);
    if (objects === undefined) {
      objects = new Map();
      this.#objects.set(namespace, objects);
    }
    const previous = objects.get(name);
    const version = object.metadata?.resourceVersion;
    if (previous !== undefined && version !== undefined && previous.metadata?.resourceVersion === version) return;
    // Cached until the next change: one copy of each repeated string (namespace, finalizers, condition reasons,
    // references), not one per object (see util/intern.ts); what did not change is the previous version's.
    const interner = this.#options.interner ?? sharedInterner;
    if (previous === undefined) interner.internDeep(object);
    else shareUnchanged(object, previous, interner);
    objects.set(name, object);
    this.#emit(previous === undefined ? { type: "add", object } : { type: "update", object, previous });
  }

  /** Drops an object, held or noted, and tells the handlers (with the cached version, the last one known). */
  remove(object: T): void {
    const name = object.metadata?.name;
    if (!name) return;
    const namespace = this.#options.namespaced ? (object.metadata?.namespace ?? "") : "";
    this.#removeHeld(namespace, name);
    this.#dropNote(namespace, name, object);
  }

  /** Drops a held object only (a noted one stays noted). */
  removeHeld(object: T): void {
    const name = object.metadata?.name;
    if (!name) return;
    this.#removeHeld(this.#options.namespaced ? (object.metadata?.namespace ?? "") : "", name);
  }

  #removeHeld(namespace: string, name: string): void {
    const objects = this.#objects.get(namespace);
    const cached = objects?.get(name);
    if (objects === undefined || cached === undefined) return;
    objects.delete(name);
    if (objects.size === 0) this.#objects.delete(namespace);
    this.#emit({ type: "delete", object: cached });
  }

  #setNote(namespace: string, name: string, object: T, note: unknown): void {
    let notes = this.#notes.get(namespace);
    if (notes === undefined) {
      notes = new Map();
      this.#notes.set(namespace, notes);
    }
    const known = notes.has(name);
    const previous = notes.get(name);
    const kept =
      note === null || typeof note !== "object" ? note : (this.#options.interner ?? sharedInterner).internDeep(note);
    notes.set(name, kept);
    this.#emitNote({ type: known ? "update" : "add", namespace, name, object, note: kept, previous });
  }

  #dropNote(namespace: string, name: string, object: T): void {
    const notes = this.#notes.get(namespace);
    if (notes === undefined || !notes.has(name)) return;
    const previous = notes.get(name);
    notes.delete(name);
    if (notes.size === 0) this.#notes.delete(namespace);
    this.#emitNote({ type: "delete", namespace, name, object, previous });
  }

  #emitNote(event: NoteEvent<T>): void {
    for (const handler of this.#noteHandlers) {
      try {
        handler(event);
      } catch (error) {
        this.#options.logger.error({ err: error, event: event.type }, "informer note handler threw");
      }
    }
  }

  #emit(event: InformerEvent<T>): void {
    for (const handler of this.#handlers) {
      try {
        handler(event);
      } catch (error) {
        this.#options.logger.error(
          { err: error, event: event.type },
          "informer handler threw; handlers must only enqueue",
        );
      }
    }
  }
}

const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/**
 * Gives a new version of an object the previous version's parts (spec, status, data: every top-level part but
 * metadata) where they are equal, and interns the rest. A status write then leaves the spec the very object it
 * was, so whatever was derived from it by identity (the controllers' parses) still holds, and the new copy dies
 * young. Parts are never changed in place once cached, so sharing them is safe. Both versions come from JSON:
 * sameJson compares them without util.isDeepStrictEqual's cycle detection and copies.
 */
export function shareUnchanged(object: object, previous: object, interner: StringInterner): void {
  const record = object as Record<string, unknown>;
  const before = previous as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    const value = record[key];
    if (typeof value === "string") record[key] = interner.intern(value);
    else if (typeof value !== "object" || value === null) continue;
    else if (key !== "metadata" && sameJson(value, before[key])) record[key] = before[key];
    else interner.internDeep(value);
  }
}

/**
 * The default transform: drop what the operator never reads and costs memory per object. The parts are rebuilt
 * without the dropped keys rather than `delete`d: V8 turns an object that loses a property into a hash table of
 * its properties (about 450 bytes for a metadata), so 10,000 cached objects whose metadata had a key deleted held
 * 4 MiB more than the same objects rebuilt (ADR 0027).
 */
export function stripUnread(object: KubernetesObject): void {
  const metadata = object.metadata;
  if (metadata === undefined) return;
  const annotations = metadata.annotations;
  const dropAnnotation = annotations !== undefined && LAST_APPLIED in annotations;
  if (metadata.managedFields === undefined && !dropAnnotation) return;
  const { managedFields: _managedFields, ...kept } = metadata;
  if (dropAnnotation) {
    const { [LAST_APPLIED]: _lastApplied, ...otherAnnotations } = annotations;
    kept.annotations = otherAnnotations;
  }
  object.metadata = kept;
}
