// A list/watch cache that keeps itself alive. It runs @kubernetes/client-node's ListWatch and guards the known
// failure modes of 2.0.1 (see docs/runtime.md):
// - after a list error (or any non-410 watch error) ListWatch stops for good → restart with jittered backoff,
//   but never after our own stop (ListWatch.stop() itself emits `error`): every ListWatch instance belongs to a
//   generation and events/errors of retired generations are ignored;
// - ListWatch asks for neither bookmarks nor a timeout, and runs its handlers in an async function nobody awaits
//   → bookmarking-watch.ts;
// - half-open connections hang silently → a watchdog relists when nothing (not even a bookmark) arrived for
//   `staleAfterMs`; a list that hangs is aborted after `listTimeoutMs` and counts as an error;
// - a list answered 404 (CRD not installed) → one actionable error log, then quiet retries; `syncError()`
//   tells /readyz and the manager's cache-sync timeout why the informer has not synced.
// The cache itself is ours (informer-cache.ts), fed from every list (so a fresh ListWatch after a restart still
// reports deletes that happened while we were disconnected) and from watch events.
import type { KubeConfig, KubernetesListObject, KubernetesObject } from "@kubernetes/client-node";
// By path, not the package root (which loads every generated API and model): see kube-client-loading.ts.
import { ListWatch } from "@kubernetes/client-node/dist/cache.js";
import type { Logger } from "pino";
import type { StringInterner } from "../util/intern.ts";
import { BookmarkingWatch } from "./bookmarking-watch.ts";
import { InformerCache, type InformerHandler, type InformerView, type NoteHandler } from "./informer-cache.ts";
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

/** The read side shared by a single-namespace informer and a set of per-namespace informers. */
export interface ObjectInformer<T extends KubernetesObject = KubernetesObject> {
  readonly resource: KubeResource;
  /** Subscribes to cache changes; returns the unsubscribe function. */
  on(handler: InformerHandler<T>): () => void;
  /** Cached object by namespace and name (namespace "" for cluster-scoped objects). */
  get(namespace: string, name: string): T | undefined;
  /** Cached objects, of one namespace or all. */
  list(namespace?: string): T[];
  /** The key of every object known, held in full or only noted (see InformerView). */
  keys(): string[];
  /** Whether an object of this key is known, held or noted. */
  knows(namespace: string, name: string): boolean;
  /** The note of an object not held in full (undefined when held or unknown). */
  noteOf(namespace: string, name: string): unknown;
  /** Subscribes to changes of the objects only noted; returns the unsubscribe function. */
  onNote(handler: NoteHandler<T>): () => void;
  /**
   * Reads one object again (what the view keeps of it may have changed without an event: another object now
   * refers to it) and holds or notes it as the view says now.
   */
  recheck(namespace: string, name: string): Promise<void>;
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
  /** Hold in full only what the view keeps, note the rest (sharding; default: hold everything). */
  view?: InformerView<KubernetesObject>;
  /** Lifecycle hook for metrics/tests: "restart" (with reason) and "relist". */
  onLifecycle?: (event: { type: "restart" | "relist" | "error"; reason: string }) => void;
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

export class ResilientInformer<T extends KubernetesObject = KubernetesObject> implements ObjectInformer<T> {
  readonly resource: KubeResource;
  readonly namespace: string | undefined;
  readonly #options: InformerOptions;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #listFunction: ListFunction;
  readonly #cache: InformerCache<T>;

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
    this.#cache = new InformerCache<T>({
      namespaced: options.resource.namespaced,
      logger: this.#logger,
      ...(options.transform ? { transform: options.transform } : {}),
      ...(options.interner ? { interner: options.interner } : {}),
      ...(options.view ? { view: options.view } : {}),
    });
    this.#listFunction =
      options.listFunction ??
      makeListFunction(options.kubeConfig, options.resource, this.namespace, selectorsOf(options));
  }

  on(handler: InformerHandler<T>): () => void {
    return this.#cache.on(handler);
  }

  get(namespace: string, name: string): T | undefined {
    return this.#cache.get(namespace, name);
  }

  list(namespace?: string): T[] {
    return this.#cache.list(namespace);
  }

  keys(): string[] {
    return this.#cache.keys();
  }

  knows(namespace: string, name: string): boolean {
    return this.#cache.knows(namespace, name);
  }

  noteOf(namespace: string, name: string): unknown {
    return this.#cache.noteOf(namespace, name);
  }

  onNote(handler: NoteHandler<T>): () => void {
    return this.#cache.onNote(handler);
  }

  /** How many objects are held in full and how many only noted. */
  sizes(): { held: number; noted: number } {
    return this.#cache.sizes();
  }

  async recheck(namespace: string, name: string): Promise<void> {
    const scope = this.resource.namespaced ? (this.namespace ?? namespace) : undefined;
    if (this.resource.namespaced && scope !== namespace) return;
    const byName = `metadata.name=${name}`;
    const fieldSelector =
      this.#options.fieldSelector === undefined ? byName : `${this.#options.fieldSelector},${byName}`;
    const list = makeListFunction(this.#options.kubeConfig, this.resource, scope, {
      fieldSelector,
      ...(this.#options.labelSelector !== undefined ? { labelSelector: this.#options.labelSelector } : {}),
    });
    const items = ((await list()) as KubernetesListObject<T>).items;
    if (items.length === 0) this.#cache.remove({ metadata: { namespace, name } } as T);
    for (const item of items) this.#cache.upsert(item);
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
    const view = this.#options.view;
    const watch = new BookmarkingWatch(
      this.#options.kubeConfig,
      () => jitter(this.#options.watchTimeoutSeconds ?? 300, 0.2, this.#random),
      () => this.#touch(),
      (phase, error) => this.#logger.warn({ phase, err: error }, "ignoring a malformed watch event"),
      selectorsOf(this.#options),
      view === undefined ? undefined : (phase, object) => (isCurrent() ? this.#route(view, phase, object) : phase),
    );
    const listWatch = new ListWatch<T>(
      collectionPath(this.resource, this.namespace),
      watch,
      () => this.#list(isCurrent),
      false,
    );
    listWatch.on("add", (object) => isCurrent() && this.#cache.upsert(object));
    listWatch.on("update", (object) => isCurrent() && this.#cache.upsert(object));
    // ListWatch knows only the objects held (#route, #list): what it deletes is held, never a note.
    listWatch.on("delete", (object) => isCurrent() && this.#cache.removeHeld(object));
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

  /**
   * With a view, what ListWatch (which keeps its own map of every object it is shown) sees of a watch event: the
   * objects held pass; one not held is noted here and shown to ListWatch as a bookmark (its resourceVersion
   * moves on); one held until now and not kept any more is noted and shown as deleted.
   */
  #route(view: InformerView<KubernetesObject>, phase: string, object: KubernetesObject): string {
    if (phase !== "ADDED" && phase !== "MODIFIED" && phase !== "DELETED") return phase;
    const held = this.#cache.holds(object);
    if (phase === "DELETED") {
      if (held) return phase;
      this.#cache.remove(object as T);
      return "BOOKMARK";
    }
    if (view.keep(object)) return phase;
    this.#cache.upsert(object as T);
    return held ? "DELETED" : "BOOKMARK";
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
    const gone = this.#cache.missingFrom(list.items);
    // Applied in chunks: handlers run per object, and 10,000 objects in one go would stall the event loop.
    for (let index = 0; index < gone.length; index++) {
      this.#cache.remove(gone[index] as T);
      if ((index + 1) % APPLY_CHUNK === 0) await yieldToEventLoop();
    }
    for (let index = 0; index < list.items.length; index++) {
      if (!isCurrent()) return list;
      this.#cache.upsert(list.items[index] as T);
      if ((index + 1) % APPLY_CHUNK === 0) await yieldToEventLoop();
    }
    // ListWatch keeps its own map of what it is handed: with a view, only what is held.
    const handed =
      this.#options.view === undefined
        ? list
        : { ...list, items: list.items.filter((item) => this.#cache.holds(item)) };
    this.#touch();
    this.#consecutiveFailures = 0;
    this.#lastError = undefined;
    if (this.#missingLogged) {
      this.#missingLogged = false;
      this.#logger.info(`${resourceId(this.resource)} is served again`);
    }
    if (!this.#synced) {
      this.#synced = true;
      this.#logger.info({ objects: list.items.length, ...this.#cache.sizes() }, "informer synced");
      for (const resolve of this.#syncWaiters.splice(0)) resolve();
    }
    return handed;
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
}

/** The actionable message of a list answered 404: the API server does not serve the custom resource. */
export function missingResourceMessage(resource: KubeResource): string {
  return `the Kubernetes API has no ${resourceId(resource)}: install the CRDs (kubectl apply -f crds/)`;
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
