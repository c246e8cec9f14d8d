// A list/watch cache that keeps itself alive. It runs @kubernetes/client-node's ListWatch and guards the known
// failure modes of 2.0.1 (see docs/runtime.md):
// - after a list error (or any non-410 watch error) ListWatch stops for good → restart with jittered backoff,
//   but never after our own stop (ListWatch.stop() itself emits `error`): every ListWatch instance belongs to a
//   generation and events/errors of retired generations are ignored;
// - handlers run inside an un-awaited async function → ours are wrapped so a throw is logged, never an
//   unhandled rejection (and by contract they only enqueue keys);
// - ListWatch asks for neither bookmarks nor a timeout → a Watch subclass adds allowWatchBookmarks=true and a
//   jittered timeoutSeconds (and reads the watch as a Node stream, not through WHATWG fetch: watch-stream.ts);
// - half-open connections hang silently → a watchdog relists when nothing (not even a bookmark) arrived for
//   `staleAfterMs`; a list that hangs is aborted after `listTimeoutMs` and counts as an error;
// - a list answered 404 (CRD not installed) → one actionable error log, then quiet retries; `syncError()`
//   tells /readyz and the manager's cache-sync timeout why the informer has not synced.
// The cache itself is ours, fed from every list (so a fresh ListWatch after a restart still reports deletes
// that happened while we were disconnected) and from watch events.
import type { KubeConfig, KubernetesListObject, KubernetesObject } from "@kubernetes/client-node";
// By path, not the package root (which loads every generated API and model): see kube-client-loading.ts.
import { ListWatch } from "@kubernetes/client-node/dist/cache.js";
import type { Logger } from "pino";
import { type StringInterner, sharedInterner } from "../util/intern.ts";
import { sameJson } from "../util/json-values.ts";
import {
  collectionPath,
  type KubeResource,
  type ListFunction,
  makeListFunction,
  resourceId,
  yieldToEventLoop,
} from "./resource.ts";
import { statusOf } from "./status.ts";
import { type Clock, jitter, systemClock, type TimerHandle } from "./time.ts";
import { StreamingWatch } from "./watch-stream.ts";

export type InformerEventType = "add" | "update" | "delete";

export interface InformerEvent<T> {
  type: InformerEventType;
  object: T;
  /** The cached object an update replaced. */
  previous?: T;
}

/** Handlers must be quick and must not throw; by contract they only enqueue keys. */
export type InformerHandler<T> = (event: InformerEvent<T>) => void;

/** The read side shared by a single-namespace informer and a set of per-namespace informers. */
export interface ObjectInformer<T extends KubernetesObject = KubernetesObject> {
  readonly resource: KubeResource;
  /** Subscribes to cache changes; returns the unsubscribe function. */
  on(handler: InformerHandler<T>): () => void;
  /** Cached object by namespace and name (namespace "" for cluster-scoped objects). */
  get(namespace: string, name: string): T | undefined;
  /** Cached objects, of one namespace or all. */
  list(namespace?: string): T[];
  /** True once the first list has been applied (stays true across restarts, like client-go). */
  hasSynced(): boolean;
  /** Resolves once synced, or when the signal aborts. */
  waitForSync(signal?: AbortSignal): Promise<void>;
  /** Why it has not synced yet: the last list/watch error (undefined when synced or no error yet). */
  syncError(): string | undefined;
  start(): void;
  stop(): Promise<void>;
}

export interface InformerOptions {
  kubeConfig: KubeConfig;
  resource: KubeResource;
  /** Watch one namespace; undefined → all namespaces (or a cluster-scoped resource). */
  namespace?: string;
  /** Only objects matching this field selector (e.g. `metadata.name=x`: one object), in the list and the watch. */
  fieldSelector?: string;
  /** Only objects matching this label selector (e.g. `gpucloud.dev/watch=true`), in the list and the watch. */
  labelSelector?: string;
  logger: Logger;
  clock?: Clock;
  random?: () => number;
  /** Overrides the list call (tests); defaults to the CustomObjectsApi/CoreV1Api list for the resource. */
  listFunction?: ListFunction;
  /** Server-side watch timeout, jittered ±20 % per watch (default 300 s). */
  watchTimeoutSeconds?: number;
  /** Relist when nothing arrived for this long (default 5 min). */
  staleAfterMs?: number;
  /** Watchdog period (default 5 s). */
  staleCheckIntervalMs?: number;
  /** A list that has not answered after this long fails and the informer restarts (default 60 s; 0 = never). */
  listTimeoutMs?: number;
  /** Restart backoff after errors: base (default 1 s), doubling to max (default 30 s), jittered. */
  restartBaseDelayMs?: number;
  restartMaxDelayMs?: number;
  /**
   * Applied to every object before it is cached (in place): by default metadata.managedFields and kubectl's
   * last-applied-configuration annotation are dropped, as controller-runtime's TransformStripManagedFields does:
   * nobody here reads them, and they are a third or more of a typical object.
   */
  transform?: (object: KubernetesObject) => void;
  /** One copy of each repeated string of cached objects (default: the process's shared table). */
  interner?: StringInterner;
  /** Lifecycle hook for metrics/tests: "restart" (with reason) and "relist". */
  onLifecycle?: (event: { type: "restart" | "relist" | "error"; reason: string }) => void;
}

type WatchCallback = (phase: string, apiObject: unknown, watchObject?: unknown) => void;
type WatchDone = (error: unknown) => void;

/** A Watch that asks for bookmarks and a server-side timeout, reports activity, and goes silent when retired. */
class BookmarkingWatch extends StreamingWatch {
  retired = false;
  readonly #timeoutSeconds: () => number;
  readonly #onActivity: () => void;

  readonly #onMalformed: (phase: string, error?: unknown) => void;
  readonly #selectors: { fieldSelector?: string; labelSelector?: string };

  constructor(
    kubeConfig: KubeConfig,
    timeoutSeconds: () => number,
    onActivity: () => void,
    onMalformed: (phase: string, error?: unknown) => void,
    selectors: { fieldSelector?: string; labelSelector?: string },
  ) {
    super(kubeConfig);
    this.#timeoutSeconds = timeoutSeconds;
    this.#onActivity = onActivity;
    this.#onMalformed = onMalformed;
    this.#selectors = selectors;
  }

  override async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: WatchCallback,
    done: WatchDone,
  ): Promise<AbortController> {
    // A retired ListWatch may still finish a slow list and try to watch: do not let it.
    if (this.retired) return new AbortController();
    const params = {
      ...queryParams,
      allowWatchBookmarks: true,
      timeoutSeconds: this.#timeoutSeconds(),
      ...this.#selectors,
    };
    return super.watch(
      path,
      params,
      (phase, apiObject, watchObject) => {
        if (this.retired) return;
        this.#onActivity();
        // ListWatch's handler is async and never awaited, and it dereferences `object.metadata` blindly: drop
        // malformed events here and catch its promise, so neither becomes an unhandled rejection.
        if (!isWellFormedEvent(phase, apiObject)) {
          this.#onMalformed(phase);
          return;
        }
        try {
          const pending: unknown = callback(phase, apiObject, watchObject);
          if (pending instanceof Promise) pending.catch((error: unknown) => this.#onMalformed(phase, error));
        } catch (error) {
          this.#onMalformed(phase, error);
        }
      },
      done,
    );
  }
}

/** Object events need an object with metadata; ERROR events carry a Status object. */
function isWellFormedEvent(phase: string, apiObject: unknown): boolean {
  if (typeof apiObject !== "object" || apiObject === null) return false;
  if (phase === "ERROR") return true;
  if (!["ADDED", "MODIFIED", "DELETED", "BOOKMARK"].includes(phase)) return false;
  const metadata = "metadata" in apiObject ? apiObject.metadata : undefined;
  return typeof metadata === "object" && metadata !== null;
}

/** Thrown when a list did not answer within `listTimeoutMs`. */
export class ListTimeoutError extends Error {
  override name = "ListTimeoutError";
}

/**
 * Runs `call` with a signal that aborts after `ms`, and rejects with ListTimeoutError then, whether or not the
 * call honours the signal (a custom list function may not).
 */
function withTimeout<T>(
  call: (signal?: AbortSignal) => Promise<T>,
  ms: number,
  clock: Clock,
  message: string,
): Promise<T> {
  if (!(ms > 0)) return call();
  const controller = new AbortController();
  const promise = call(controller.signal);
  return new Promise<T>((resolve, reject) => {
    const timer = clock.setTimeout(() => {
      const error = new ListTimeoutError(message);
      reject(error);
      controller.abort(error);
    }, ms);
    promise.then(
      (value) => {
        clock.clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clock.clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/** Objects of a list applied between two yields to the event loop. */
const APPLY_CHUNK = 250;

function objectKey(object: KubernetesObject): string | undefined {
  const name = object.metadata?.name;
  if (!name) return undefined;
  return `${object.metadata?.namespace ?? ""}/${name}`;
}

export class ResilientInformer<T extends KubernetesObject = KubernetesObject> implements ObjectInformer<T> {
  readonly resource: KubeResource;
  readonly namespace: string | undefined;
  readonly #options: InformerOptions;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #listFunction: ListFunction;
  readonly #handlers = new Set<InformerHandler<T>>();
  /** namespace → name → object. */
  readonly #cache = new Map<string, Map<string, T>>();

  #generation = 0;
  #listWatch: ListWatch<T> | undefined;
  #watch: BookmarkingWatch | undefined;
  #running = false;
  #synced = false;
  #syncWaiters: Array<() => void> = [];
  #consecutiveFailures = 0;
  #restartTimer: TimerHandle | undefined;
  #watchdogTimer: TimerHandle | undefined;
  #lastActivityAt = 0;
  #lastError: string | undefined;
  #missingLogged = false;

  constructor(options: InformerOptions) {
    this.#options = options;
    this.resource = options.resource;
    this.namespace = options.resource.namespaced ? options.namespace : undefined;
    this.#clock = options.clock ?? systemClock;
    this.#random = options.random ?? Math.random;
    this.#logger = options.logger.child({
      informer: resourceId(options.resource),
      ...(this.namespace ? { watchNamespace: this.namespace } : {}),
    });
    this.#listFunction =
      options.listFunction ??
      makeListFunction(options.kubeConfig, options.resource, this.namespace, selectorsOf(options));
  }

  on(handler: InformerHandler<T>): () => void {
    this.#handlers.add(handler);
    return () => this.#handlers.delete(handler);
  }

  get(namespace: string, name: string): T | undefined {
    return this.#cache.get(this.resource.namespaced ? namespace : "")?.get(name);
  }

  list(namespace?: string): T[] {
    if (namespace !== undefined && this.resource.namespaced) return [...(this.#cache.get(namespace)?.values() ?? [])];
    const all: T[] = [];
    for (const objects of this.#cache.values()) all.push(...objects.values());
    return all;
  }

  hasSynced(): boolean {
    return this.#synced;
  }

  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.#synced || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      this.#syncWaiters.push(resolve);
      signal?.addEventListener("abort", () => resolve(), { once: true });
    });
  }

  syncError(): string | undefined {
    return this.#synced ? undefined : this.#lastError;
  }

  /** When anything last arrived (list, connect, watch event or bookmark), epoch ms. */
  get lastActivityAt(): number {
    return this.#lastActivityAt;
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#lastActivityAt = this.#clock.now();
    this.#launch("start");
    this.#armWatchdog();
  }

  async stop(): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    if (this.#restartTimer !== undefined) this.#clock.clearTimeout(this.#restartTimer);
    if (this.#watchdogTimer !== undefined) this.#clock.clearTimeout(this.#watchdogTimer);
    this.#restartTimer = undefined;
    this.#watchdogTimer = undefined;
    await this.#retireCurrent();
    for (const resolve of this.#syncWaiters.splice(0)) resolve();
    this.#logger.debug("informer stopped");
  }

  /** Drops the current ListWatch and starts a fresh one (full relist). Used by the watchdog and after errors. */
  restart(reason: string): void {
    if (!this.#running) return;
    this.#options.onLifecycle?.({ type: "restart", reason });
    this.#logger.info({ reason }, "restarting informer");
    void this.#retireCurrent();
    this.#launch(reason);
  }

  #launch(reason: string): void {
    const generation = ++this.#generation;
    const isCurrent = (): boolean => this.#running && generation === this.#generation;
    const watch = new BookmarkingWatch(
      this.#options.kubeConfig,
      () => jitter(this.#options.watchTimeoutSeconds ?? 300, 0.2, this.#random),
      () => this.#touch(),
      (phase, error) => this.#logger.warn({ phase, err: error }, "ignoring a malformed watch event"),
      selectorsOf(this.#options),
    );
    const listWatch = new ListWatch<T>(
      collectionPath(this.resource, this.namespace),
      watch,
      () => this.#list(isCurrent),
      false,
    );
    listWatch.on("add", (object) => isCurrent() && this.#upsert(object));
    listWatch.on("update", (object) => isCurrent() && this.#upsert(object));
    listWatch.on("delete", (object) => isCurrent() && this.#remove(object));
    listWatch.on("connect", () => isCurrent() && this.#touch());
    listWatch.on("error", (error: unknown) => {
      // Errors of a retired generation include the abort caused by our own stop(): never restart on those.
      if (!isCurrent()) return;
      this.#onError(error);
    });
    this.#listWatch = listWatch;
    this.#watch = watch;
    this.#logger.debug({ generation, reason }, "starting list/watch");
    listWatch.start().catch((error: unknown) => {
      if (isCurrent()) this.#onError(error);
    });
  }

  async #retireCurrent(): Promise<void> {
    const listWatch = this.#listWatch;
    if (this.#watch) this.#watch.retired = true;
    this.#listWatch = undefined;
    this.#watch = undefined;
    this.#generation++;
    try {
      await listWatch?.stop();
    } catch (error) {
      this.#logger.debug({ err: error }, "error while stopping a retired list/watch");
    }
  }

  /** Lists, and applies the list to our cache (deletes for objects gone since the last list included). */
  async #list(isCurrent: () => boolean): Promise<KubernetesListObject<T>> {
    // The runtime does not know T's schema: reconcilers parse what they read (zod) before trusting it.
    const timeoutMs = this.#options.listTimeoutMs ?? 60_000;
    const list = (await withTimeout(
      (signal) => this.#listFunction(signal),
      timeoutMs,
      this.#clock,
      `list of ${resourceId(this.resource)} did not answer within ${timeoutMs} ms`,
    )) as KubernetesListObject<T>;
    if (!isCurrent()) return list;
    this.#options.onLifecycle?.({ type: "relist", reason: "list" });
    const seen = new Set<string>();
    for (const item of list.items) {
      const key = objectKey(item);
      if (key !== undefined) seen.add(key);
    }
    const gone: T[] = [];
    for (const objects of this.#cache.values()) {
      for (const object of objects.values()) {
        const key = objectKey(object);
        if (key !== undefined && !seen.has(key)) gone.push(object);
      }
    }
    // Applied in chunks: handlers run per object, and 10,000 objects in one go would stall the event loop.
    for (let index = 0; index < gone.length; index++) {
      this.#remove(gone[index] as T);
      if ((index + 1) % APPLY_CHUNK === 0) await yieldToEventLoop();
    }
    for (let index = 0; index < list.items.length; index++) {
      if (!isCurrent()) return list;
      this.#upsert(list.items[index] as T);
      if ((index + 1) % APPLY_CHUNK === 0) await yieldToEventLoop();
    }
    this.#touch();
    this.#consecutiveFailures = 0;
    this.#lastError = undefined;
    if (this.#missingLogged) {
      this.#missingLogged = false;
      this.#logger.info(`${resourceId(this.resource)} is served again`);
    }
    if (!this.#synced) {
      this.#synced = true;
      this.#logger.info({ objects: list.items.length }, "informer synced");
      for (const resolve of this.#syncWaiters.splice(0)) resolve();
    }
    return list;
  }

  #onError(error: unknown): void {
    const delay = this.#restartDelay();
    this.#consecutiveFailures++;
    const missing = statusOf(error) === 404 && this.resource.group !== "";
    const reason = missing
      ? missingResourceMessage(this.resource)
      : error instanceof Error
        ? error.message
        : String(error);
    this.#lastError = reason;
    this.#options.onLifecycle?.({ type: "error", reason });
    if (missing && !this.#missingLogged) {
      // Once per informer (again only after it was served in between): the retries below stay at warn level.
      this.#missingLogged = true;
      this.#logger.error({ retryInMs: delay }, reason);
    } else {
      this.#logger.warn({ err: error, retryInMs: delay, failures: this.#consecutiveFailures }, "list/watch failed");
    }
    if (this.#restartTimer !== undefined) return;
    this.#restartTimer = this.#clock.setTimeout(() => {
      this.#restartTimer = undefined;
      this.restart(`after error: ${reason}`);
    }, delay);
  }

  #restartDelay(): number {
    const base = this.#options.restartBaseDelayMs ?? 1000;
    const max = this.#options.restartMaxDelayMs ?? 30_000;
    return Math.min(max, jitter(base * 2 ** Math.min(this.#consecutiveFailures, 20), 0.2, this.#random));
  }

  #armWatchdog(): void {
    const interval = this.#options.staleCheckIntervalMs ?? 5000;
    this.#watchdogTimer = this.#clock.setTimeout(() => {
      if (!this.#running) return;
      const staleAfter = this.#options.staleAfterMs ?? 300_000;
      const silentFor = this.#clock.now() - this.#lastActivityAt;
      if (silentFor > staleAfter && this.#restartTimer === undefined) {
        this.#logger.warn({ silentForMs: silentFor }, "watch is stale, relisting");
        this.#touch(); // one restart per stale period, not one per check
        this.restart("stale watch");
      }
      this.#armWatchdog();
    }, interval);
  }

  #touch(): void {
    this.#lastActivityAt = this.#clock.now();
  }

  #upsert(object: T): void {
    const name = object.metadata?.name;
    if (!name) return;
    (this.#options.transform ?? stripUnread)(object);
    const namespace = this.resource.namespaced ? (object.metadata?.namespace ?? "") : "";
    let objects = this.#cache.get(namespace);
    if (objects === undefined) {
      objects = new Map();
      this.#cache.set(namespace, objects);
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

  #remove(object: T): void {
    const name = object.metadata?.name;
    if (!name) return;
    const namespace = this.resource.namespaced ? (object.metadata?.namespace ?? "") : "";
    const objects = this.#cache.get(namespace);
    const cached = objects?.get(name);
    if (objects === undefined || cached === undefined) return;
    objects.delete(name);
    if (objects.size === 0) this.#cache.delete(namespace);
    this.#emit({ type: "delete", object: cached });
  }

  #emit(event: InformerEvent<T>): void {
    for (const handler of this.#handlers) {
      try {
        handler(event);
      } catch (error) {
        this.#logger.error({ err: error, event: event.type }, "informer handler threw; handlers must only enqueue");
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

/** The default transform: drop what the operator never reads and costs memory per object. */
export function stripUnread(object: KubernetesObject): void {
  const metadata = object.metadata;
  if (metadata === undefined) return;
  delete metadata.managedFields;
  if (metadata.annotations !== undefined && LAST_APPLIED in metadata.annotations) {
    delete metadata.annotations[LAST_APPLIED];
  }
}

/** The actionable message of a list answered 404: the API server does not serve the custom resource. */
export function missingResourceMessage(resource: KubeResource): string {
  return `the Kubernetes API has no ${resourceId(resource)}: install the CRDs (kubectl apply -f crds/)`;
}

/** One informer per watched namespace, read as one cache. */
export class MultiNamespaceInformer<T extends KubernetesObject = KubernetesObject> implements ObjectInformer<T> {
  readonly resource: KubeResource;
  readonly #informers: Map<string, ResilientInformer<T>>;

  constructor(options: Omit<InformerOptions, "namespace">, namespaces: readonly string[]) {
    if (namespaces.length === 0) throw new RangeError("MultiNamespaceInformer needs at least one namespace");
    this.resource = options.resource;
    this.#informers = new Map(
      namespaces.map((namespace) => [namespace, new ResilientInformer<T>({ ...options, namespace })]),
    );
  }

  on(handler: InformerHandler<T>): () => void {
    const offs = [...this.#informers.values()].map((informer) => informer.on(handler));
    return () => {
      for (const off of offs) off();
    };
  }

  get(namespace: string, name: string): T | undefined {
    return this.#informers.get(namespace)?.get(namespace, name);
  }

  list(namespace?: string): T[] {
    if (namespace !== undefined) return this.#informers.get(namespace)?.list(namespace) ?? [];
    return [...this.#informers.values()].flatMap((informer) => informer.list());
  }

  hasSynced(): boolean {
    return [...this.#informers.values()].every((informer) => informer.hasSynced());
  }

  async waitForSync(signal?: AbortSignal): Promise<void> {
    await Promise.all([...this.#informers.values()].map((informer) => informer.waitForSync(signal)));
  }

  syncError(): string | undefined {
    for (const [namespace, informer] of this.#informers) {
      const error = informer.syncError();
      if (error !== undefined) return `namespace ${namespace}: ${error}`;
    }
    return undefined;
  }

  start(): void {
    for (const informer of this.#informers.values()) informer.start();
  }

  async stop(): Promise<void> {
    await Promise.all([...this.#informers.values()].map((informer) => informer.stop()));
  }
}

/** The selectors an informer was given, without undefined keys (they would be sent as "undefined"). */
function selectorsOf(options: Pick<InformerOptions, "fieldSelector" | "labelSelector">): {
  fieldSelector?: string;
  labelSelector?: string;
} {
  return {
    ...(options.fieldSelector !== undefined ? { fieldSelector: options.fieldSelector } : {}),
    ...(options.labelSelector !== undefined ? { labelSelector: options.labelSelector } : {}),
  };
}
