// The Manager ties the runtime together: shared informers (one per resource per namespace set), controllers,
// the event recorder, metrics, the /metrics /healthz /readyz servers, leader election and graceful shutdown.
// Standby replicas (not leading) keep caches warm and queue keys, but run no reconciles. Every Kubernetes write
// (KubeClient, EventRecorder) and every cloud write of the controllers (`fence`) passes the leadership fence
// (fencing.ts): none leaves a replica that does not hold its Lease with margin, nor a cancelled pass.
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { KubeConfig, KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { MIN_SYNC_PERIOD_MS, SYNC_PERIOD_ANNOTATION } from "../api/common.ts";
import { type OperatorConfig, parseConfig } from "./config.ts";
import { Controller, keyOf, ReconcilePacer, type ReconcileRequest, type Reconciler } from "./controller.ts";
import { EventRecorder } from "./events.ts";
import { fenceKubeConfig, LeadershipFence } from "./fencing.ts";
import { type InformerOptions, type ObjectInformer, ResilientInformer } from "./informer.ts";
import type { InformerEvent } from "./informer-cache.ts";
import { KubeClient } from "./kube.ts";
import { instrumentKubeConfig } from "./kube-request-metrics.ts";
import { LeaderElector } from "./leader-election.ts";
import { Metrics } from "./metrics.ts";
import { MultiNamespaceInformer } from "./multi-namespace-informer.ts";
import { type KubeResource, resourceId } from "./resource.ts";
import { healthRoute, metricsRoute, type RunningServer, startHttpServer } from "./server.ts";
import { ShardLeases } from "./shard-leases.ts";
import { shardLeaseName, shardOfKey } from "./sharding.ts";
import { formatDuration, syncPeriodOf } from "./time.ts";
import type { Priority } from "./workqueue.ts";

/** `Manager.start()` rejects with this when the caches did not sync within --cache-sync-timeout. */
export class CacheSyncTimeoutError extends Error {
  override name = "CacheSyncTimeoutError";
}

/** A secondary watch: when an object of `resource` changes, enqueue the keys `mapToKeys` returns. */
export interface WatchMapping<T extends KubernetesObject = KubernetesObject> {
  resource: KubeResource;
  /** Keys (`namespace/name`) of the controller's objects affected by `object`. Must not throw; must be quick. */
  mapToKeys: (object: T) => string[];
  /** Namespaces to watch for this resource (default: the manager's watch namespaces). */
  namespaces?: readonly string[];
  /** Only objects with these labels (the informer is shared with every user of the same selector). */
  labelSelector?: string;
  /** Only objects these fields select (`metadata.name=…`). */
  fieldSelector?: string;
}

export interface ControllerRegistration {
  /** Lower-case name, used in logs and metric labels (e.g. "gpuvm"). */
  name: string;
  resource: KubeResource;
  /** Only objects of `resource` with these labels are reconciled (and cached). */
  labelSelector?: string;
  /** The namespaces whose objects are reconciled; default: the watched namespaces (--watch-namespace). */
  namespaces?: readonly string[];
  reconciler: Reconciler;
  /** Default: --max-concurrent-reconciles. */
  workers?: number;
  /** Default: --sync-period; per object: annotation gpucloud.dev/sync-period. */
  syncPeriodMs?: number;
  watches?: WatchMapping[];
  /**
   * Whether an update of the controller's own object at `resourceVersion` only echoes a write its reconciler made
   * (the pass that wrote decided what comes next): such an event enqueues nothing. May answer later (a promise)
   * when the write is still awaiting its answer. Without it, every event enqueues (controller-runtime's default).
   */
  isEcho?(key: string, resourceVersion: string): boolean | Promise<boolean>;
  /**
   * With sharding and --leader-elect: called on one replica (the leader of the lowest shard led) with the keys
   * of objects whose shard has had no leader for twice the lease duration, every retry period. It may say so in
   * their status (a condition); it must not reconcile them. Must not throw.
   */
  onWithoutOwner?(keys: string[]): void;
}

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

export interface ManagerOptions {
  kubeConfig: KubeConfig;
  config: OperatorConfig;
  logger: Logger;
  /** Install SIGTERM/SIGINT handlers that stop gracefully and then call `exit(0)` (default false). */
  handleSignals?: boolean;
  /** Called after a signal-triggered shutdown (default process.exit). */
  exit?: (code: number) => void;
  /** Leader-election identity and event reportingInstance (default: $POD_NAME or hostname, plus a suffix). */
  identity?: string;
  informer?: InformerTuning;
  /** The shortest per-object sync period honoured (default MIN_SYNC_PERIOD_MS, 10 s); tests lower it. */
  syncPeriodFloorMs?: number;
}

/** `defaultConfig({ watchNamespaces: ["team-a"] })`: the defaults of every flag, with overrides (tests). */
export function defaultConfig(overrides: Partial<OperatorConfig> = {}): OperatorConfig {
  const parsed = parseConfig([], {});
  if (parsed.kind !== "config") throw new Error("the flag defaults do not parse");
  return { ...parsed.config, ...overrides };
}

export class Manager {
  readonly config: OperatorConfig;
  readonly logger: Logger;
  readonly identity: string;
  readonly metrics: Metrics;
  readonly events: EventRecorder;
  readonly kube: KubeClient;
  /** Passed by every write of this process (the Kubernetes client and Events here; the controllers' cloud clients). */
  readonly fence: LeadershipFence;
  /** The User-Agent of every request (Kubernetes and cloud): the replica's identity, for the servers' logs. */
  readonly userAgent: string;
  readonly #options: ManagerOptions;
  /** options.kubeConfig with every request counted in rest_client_requests_total. */
  readonly #kubeConfig: KubeConfig;
  readonly #informers = new Map<string, ObjectInformer>();
  readonly #controllers: Array<{
    controller: Controller;
    informer: ObjectInformer;
    onWithoutOwner?: (keys: string[]) => void;
  }> = [];
  /** --max-reconcile-rate: one pacer for every controller. */
  readonly #pacer: ReconcilePacer | undefined;
  readonly #servers: RunningServer[] = [];
  #elector: LeaderElector | undefined;
  /** With --leader-elect: the Leases of every shard set (rival sets, objects without an owner). */
  #shardLeases: ShardLeases | undefined;
  #shardLeaseTimer: ReturnType<typeof setInterval> | undefined;
  #started = false;
  #leading = false;
  #stopping: Promise<void> | undefined;
  #stopped: () => void = () => {};
  readonly #stoppedPromise: Promise<void>;
  #signalHandler: ((signal: NodeJS.Signals) => void) | undefined;
  #serverUrls: { metrics?: string; probes?: string } = {};

  constructor(options: ManagerOptions) {
    this.#options = options;
    this.config = options.config;
    this.logger = options.logger;
    this.identity = options.identity ?? `${process.env.POD_NAME || hostname()}_${randomUUID().slice(0, 8)}`;
    this.userAgent = `gpuvm-operator (${this.identity})`;
    this.metrics = new Metrics();
    this.#pacer = options.config.maxReconcileRate > 0 ? new ReconcilePacer(options.config.maxReconcileRate) : undefined;
    this.metrics.observeReadiness(() => this.hasSynced());
    this.metrics.observeOwnership(() => this.#objectsWithoutOwner());
    this.#kubeConfig = instrumentKubeConfig(options.kubeConfig, this.metrics.restClientRequestsTotal, this.userAgent);
    this.fence = new LeadershipFence(() => this.#mayAct());
    // Reads (informers) and the Lease's own requests use #kubeConfig; every other write goes through the fence.
    const writes = fenceKubeConfig(this.#kubeConfig, this.fence);
    this.kube = new KubeClient(writes, options.logger.child({ component: "kube" }));
    this.events = new EventRecorder({
      kubeConfig: writes,
      reportingInstance: this.identity,
      logger: options.logger.child({ component: "events" }),
      fence: this.fence,
    });
    this.#stoppedPromise = new Promise((resolve) => {
      this.#stopped = resolve;
    });
  }

  /**
   * The shared informer of a resource: one per resource per namespace set (and label selector), started with the
   * manager (or at once if the manager runs already). Namespaces default to --watch-namespace (all when empty).
   */
  informerFor<T extends KubernetesObject = KubernetesObject>(
    resource: KubeResource,
    namespaces: readonly string[] = this.config.watchNamespaces,
    selection: { labelSelector?: string; fieldSelector?: string } = {},
  ): ObjectInformer<T> {
    const scoped = resource.namespaced ? [...new Set(namespaces)].sort() : [];
    const { labelSelector: labels, fieldSelector: fields } = selection;
    const query = [labels === undefined ? "" : `?${labels}`, fields === undefined ? "" : `&${fields}`].join("");
    const key = `${resourceId(resource)}@${scoped.join(",")}${query}`;
    let informer = this.#informers.get(key);
    if (informer === undefined) {
      const options: InformerOptions = {
        ...this.#options.informer,
        kubeConfig: this.#kubeConfig,
        resource,
        logger: this.logger,
        ...(labels === undefined ? {} : { labelSelector: labels }),
        ...(fields === undefined ? {} : { fieldSelector: fields }),
      };
      if (scoped.length > 1) informer = new MultiNamespaceInformer(options, scoped);
      else informer = new ResilientInformer({ ...options, ...(scoped[0] ? { namespace: scoped[0] } : {}) });
      this.#informers.set(key, informer);
      if (this.#started) informer.start();
    }
    // Callers name T; the cache holds what the API returned and reconcilers parse it before trusting it.
    return informer as unknown as ObjectInformer<T>;
  }

  /**
   * An informer of exactly one object (list and watch with `metadata.name=<name>` in its namespace), whatever
   * namespaces the operator watches: the default credentials Secret lives in the operator's own namespace.
   */
  informerForObject<T extends KubernetesObject = KubernetesObject>(
    resource: KubeResource,
    namespace: string,
    name: string,
  ): ObjectInformer<T> {
    const key = `${resourceId(resource)}@${namespace}/${name}`;
    let informer = this.#informers.get(key);
    if (informer === undefined) {
      informer = new ResilientInformer({
        ...this.#options.informer,
        kubeConfig: this.#kubeConfig,
        resource,
        logger: this.logger,
        namespace,
        fieldSelector: `metadata.name=${name}`,
      });
      this.#informers.set(key, informer);
      if (this.#started) informer.start();
    }
    return informer as unknown as ObjectInformer<T>;
  }

  /** Adds a controller for `resource`; events of its informer and of every `watches` entry enqueue keys. */
  addController(registration: ControllerRegistration): Controller {
    if (this.#controllers.some((entry) => entry.controller.name === registration.name)) {
      throw new RangeError(`a controller named "${registration.name}" exists already`);
    }
    const informer = this.informerFor(
      registration.resource,
      registration.namespaces,
      registration.labelSelector === undefined ? {} : { labelSelector: registration.labelSelector },
    );
    const logger = this.logger;
    const controller = new Controller({
      name: registration.name,
      reconciler: registration.reconciler,
      logger,
      workers: registration.workers ?? this.config.maxConcurrentReconciles,
      metrics: this.metrics,
      resyncPeriodFor: (request) =>
        this.#syncPeriodOf(informer, request, registration.syncPeriodMs ?? this.config.syncPeriodMs),
      ...(this.#pacer ? { pacer: this.#pacer } : {}),
      ...(this.config.shard.count > 1 ? { shard: this.config.shard } : {}),
    });
    informer.on((event) => {
      const name = event.object.metadata?.name;
      if (!name) return;
      const key = keyOf(event.object.metadata?.namespace, name);
      const version = event.object.metadata?.resourceVersion;
      const echo = event.type === "update" && version !== undefined ? registration.isEcho?.(key, version) : false;
      if (echo === true) return;
      if (echo === false || echo === undefined) {
        controller.enqueue(key, priorityOf(event));
        return;
      }
      echo.then(
        (isEcho) => {
          if (!isEcho) controller.enqueue(key, priorityOf(event));
        },
        () => controller.enqueue(key, priorityOf(event)),
      );
    });
    for (const watch of registration.watches ?? []) {
      const selection = {
        ...(watch.labelSelector === undefined ? {} : { labelSelector: watch.labelSelector }),
        ...(watch.fieldSelector === undefined ? {} : { fieldSelector: watch.fieldSelector }),
      };
      this.informerFor(watch.resource, watch.namespaces, selection).on(({ object }) => {
        let keys: string[];
        try {
          keys = watch.mapToKeys(object);
        } catch (error) {
          logger.error({ err: error, controller: registration.name }, "mapToKeys threw; no keys enqueued");
          return;
        }
        for (const key of keys) controller.enqueue(key);
      });
    }
    this.#controllers.push({
      controller,
      informer,
      ...(registration.onWithoutOwner ? { onWithoutOwner: registration.onWithoutOwner } : {}),
    });
    if (this.#leading) this.#startController(controller, informer);
    return controller;
  }

  /** True when this replica runs reconciles (always, without --leader-elect). */
  isLeader(): boolean {
    return this.#leading;
  }

  /** True when every informer has synced (the /readyz check). */
  hasSynced(): boolean {
    return [...this.#informers.values()].every((informer) => informer.hasSynced());
  }

  /**
   * Starts servers and informers, waits for the caches, then starts the controllers (directly, or when elected).
   * Resolves once running; `wait()` resolves when the manager has stopped.
   */
  async start(): Promise<void> {
    if (this.#started) throw new Error("manager already started");
    this.#started = true;
    if (this.#options.handleSignals) this.#installSignalHandlers();
    await this.#startServers();
    for (const informer of this.#informers.values()) informer.start();
    const aborted = new AbortController();
    void this.#stoppedPromise.then(() => aborted.abort());
    const synced = Promise.all([...this.#informers.values()].map((informer) => informer.waitForSync(aborted.signal)));
    const timeoutMs = this.config.cacheSyncTimeoutMs;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      if (timeoutMs > 0) timer = setTimeout(() => resolve("timeout"), timeoutMs);
    });
    const result = await Promise.race([synced.then(() => "synced" as const), timedOut]);
    clearTimeout(timer);
    if (result === "timeout" && this.#stopping === undefined) {
      aborted.abort();
      // The caller (the run command) logs this and stops the manager; informers keep retrying until then.
      throw new CacheSyncTimeoutError(
        `caches did not sync within ${formatDuration(timeoutMs)} (--cache-sync-timeout): ${this.#unsyncedSummary()}`,
      );
    }
    if (this.#stopping !== undefined) return;
    this.logger.info({ informers: this.#informers.size }, "caches synced");
    if (!this.config.leaderElect) {
      this.#onStartedLeading();
      return;
    }
    const shardLeases = new ShardLeases({
      kubeConfig: this.#kubeConfig,
      namespace: this.config.leaderElectionNamespace,
      leaderElectionId: this.config.leaderElectionId,
      shard: this.config.shard,
    });
    this.#shardLeases = shardLeases;
    // Fresh for the metric of objects without an owner while leading (a standby looks at each campaign too).
    this.#shardLeaseTimer = setInterval(() => {
      shardLeases.refresh().then(
        () => this.#reportWithoutOwner(shardLeases),
        (error: unknown) => this.logger.debug({ err: error }, "could not list the Leases"),
      );
    }, this.config.retryPeriodMs);
    this.#shardLeaseTimer.unref();
    this.#elector = new LeaderElector({
      kubeConfig: this.#kubeConfig,
      namespace: this.config.leaderElectionNamespace,
      name: shardLeaseName(this.config.leaderElectionId, this.config.shard),
      mayLead: () => shardLeases.rivalReason(),
      identity: this.identity,
      logger: this.logger,
      leaseDurationMs: this.config.leaseDurationMs,
      renewDeadlineMs: this.config.renewDeadlineMs,
      retryPeriodMs: this.config.retryPeriodMs,
      metrics: this.metrics,
      onStartedLeading: () => this.#onStartedLeading(),
      onStoppedLeading: () => this.#onStoppedLeading(),
      onNewLeader: (identity) => this.logger.info({ leader: identity }, "observed leader"),
    });
    this.#elector.start();
  }

  /** The unsynced informers and why: "gpuvms.gpucloud.dev: the Kubernetes API has no …; secrets (namespaces a,b): …". */
  #unsyncedSummary(): string {
    return [...this.#informers.entries()]
      .filter(([, informer]) => !informer.hasSynced())
      .map(([key, informer]) => {
        const [resource, namespaces] = key.split("@");
        const label = namespaces ? `${resource} (namespaces ${namespaces})` : resource;
        return `${label}: ${informer.syncError() ?? "no list answered yet"}`;
      })
      .join("; ");
  }

  /** Resolves when the manager has stopped. */
  wait(): Promise<void> {
    return this.#stoppedPromise;
  }

  /**
   * Graceful shutdown: stop intake, let running reconciles finish within --graceful-shutdown-timeout, release
   * the Lease, flush events, stop informers and servers. Idempotent.
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#shutdown();
    return this.#stopping;
  }

  async #shutdown(): Promise<void> {
    this.logger.info("shutting down");
    this.#leading = false;
    const timeoutMs = this.config.gracefulShutdownTimeoutMs;
    const drained = await Promise.all(this.#controllers.map(({ controller }) => controller.stop(timeoutMs)));
    clearInterval(this.#shardLeaseTimer);
    await this.#elector?.stop();
    await Promise.race([this.events.flush(), new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
    await Promise.all([...this.#informers.values()].map((informer) => informer.stop()));
    await Promise.all(this.#servers.splice(0).map((server) => server.close()));
    this.#removeSignalHandlers();
    this.logger.info({ drained: drained.every(Boolean) }, "stopped");
    this.#stopped();
  }

  /** The addresses the servers listen on (after start), e.g. to find port 0's real port in tests. */
  get serverUrls(): { metrics?: string; probes?: string } {
    return { ...this.#serverUrls };
  }

  async #startServers(): Promise<void> {
    const { metricsBindAddress: metrics, healthProbeBindAddress: probes } = this.config;
    const healthChecks = { ping: () => undefined };
    const readyChecks = {
      informers: () => (this.hasSynced() ? undefined : `not synced: ${this.#unsyncedSummary()}`),
    };
    const probeRoutes = { "/healthz": healthRoute(healthChecks), "/readyz": healthRoute(readyChecks) };
    const logger = this.logger.child({ component: "server" });
    const same =
      metrics && probes && metrics.host === probes.host && metrics.port === probes.port && metrics.port !== 0;
    if (metrics) {
      const routes = same
        ? { "/metrics": metricsRoute(this.metrics), ...probeRoutes }
        : { "/metrics": metricsRoute(this.metrics) };
      const server = await startHttpServer(metrics, routes, logger, "--metrics-bind-address");
      this.#servers.push(server);
      this.#serverUrls.metrics = server.url;
      if (same) this.#serverUrls.probes = server.url;
    }
    if (probes && !same) {
      const server = await startHttpServer(probes, probeRoutes, logger, "--health-probe-bind-address");
      this.#servers.push(server);
      this.#serverUrls.probes = server.url;
    }
  }

  /**
   * Why this process may not write now: with --leader-elect, unless it holds its Lease with margin (checked on
   * the clock, so a process frozen past its renew deadline writes nothing even before its elector notices).
   */
  #mayAct(): string | undefined {
    const elector = this.#elector;
    if (!this.config.leaderElect) return undefined;
    if (elector?.holdsLease()) return undefined;
    const lease = `${this.config.leaderElectionNamespace}/${shardLeaseName(this.config.leaderElectionId, this.config.shard)}`;
    return `this replica does not hold the Lease ${lease} now (lost, past its renew deadline, or not acquired)`;
  }

  /**
   * Per controller, the objects no held Lease of any shard set covers. 0 without --leader-elect (nothing tells
   * whether other shards run) and until the Leases were first listed.
   */
  #objectsWithoutOwner(): { controller: string; objects: number }[] {
    const leases = this.#shardLeases;
    return this.#controllers.map(({ controller, informer }) => {
      let objects = 0;
      if (leases?.held === undefined) return { controller: controller.name, objects };
      for (const object of informer.list()) {
        const name = object.metadata?.name;
        if (name && leases.isOwned(keyOf(object.metadata?.namespace, name)) === false) objects++;
      }
      return { controller: controller.name, objects };
    });
  }

  /**
   * The leader of the lowest shard led hands the keys of objects whose shard has had no leader for twice the
   * lease duration (and no other set covers) to their controller's onWithoutOwner.
   */
  #reportWithoutOwner(leases: ShardLeases): void {
    const { shard, leaseDurationMs } = this.config;
    if (shard.count <= 1 || !this.#leading || leases.lowestLedShard() !== shard.index) return;
    const leaderless = new Set(leases.leaderlessFor(2 * leaseDurationMs));
    if (leaderless.size === 0) return;
    for (const { controller, informer, onWithoutOwner } of this.#controllers) {
      if (onWithoutOwner === undefined) continue;
      const keys: string[] = [];
      for (const object of informer.list()) {
        const name = object.metadata?.name;
        if (!name) continue;
        const key = keyOf(object.metadata?.namespace, name);
        if (leaderless.has(shardOfKey(key, shard.count)) && leases.isOwned(key) === false) keys.push(key);
      }
      if (keys.length === 0) continue;
      try {
        onWithoutOwner(keys);
      } catch (error) {
        this.logger.error({ err: error, controller: controller.name }, "onWithoutOwner threw");
      }
    }
  }

  #onStartedLeading(): void {
    if (this.#stopping !== undefined) return;
    this.#leading = true;
    for (const { controller, informer } of this.#controllers) this.#startController(controller, informer);
  }

  #onStoppedLeading(): void {
    this.#leading = false;
    if (this.#stopping !== undefined) return;
    // Another replica may already be reconciling: stop at once, do not drain.
    this.logger.warn("leadership lost: stopping all workers now");
    for (const { controller } of this.#controllers) controller.stopNow();
  }

  #startController(controller: Controller, informer: ObjectInformer): void {
    // Every cached object gets a look (the queue is fresh after a lost lease). Enqueue before starting the
    // workers: keys already queued by informer events dedupe, instead of being re-added while in flight.
    controller.prepare();
    for (const object of informer.list()) {
      const name = object.metadata?.name;
      if (name) controller.enqueue(keyOf(object.metadata?.namespace, name));
    }
    controller.start();
  }

  readonly #badSyncPeriods = new Set<string>();

  #syncPeriodOf(informer: ObjectInformer, request: ReconcileRequest, fallbackMs: number): number | undefined {
    const object = informer.get(request.namespace, request.name);
    if (object === undefined) return undefined; // deleted: no more polling
    const annotation = object.metadata?.annotations?.[SYNC_PERIOD_ANNOTATION];
    if (annotation === undefined) return fallbackMs;
    const floorMs = this.#options.syncPeriodFloorMs ?? MIN_SYNC_PERIOD_MS;
    const period = syncPeriodOf(annotation, floorMs);
    if ("ms" in period && period.raisedFrom === undefined) return period.ms;
    // Reported once per object and value (the reconciler also records an Event when it raises one).
    const key = `${keyOf(request.namespace, request.name)}=${annotation}`;
    if (!this.#badSyncPeriods.has(key)) {
      this.#badSyncPeriods.add(key);
      const where = { namespace: request.namespace, name: request.name, annotation };
      if ("error" in period)
        this.logger.warn({ ...where, err: period.error }, `ignoring invalid ${SYNC_PERIOD_ANNOTATION}`);
      else
        this.logger.warn(
          { ...where, usedMs: period.ms },
          `${SYNC_PERIOD_ANNOTATION} below the floor of ${formatDuration(floorMs)}: raised to it`,
        );
    }
    return "ms" in period ? period.ms : fallbackMs;
  }

  #installSignalHandlers(): void {
    const exit = this.#options.exit ?? ((code: number) => process.exit(code));
    let signals = 0;
    this.#signalHandler = (signal) => {
      signals++;
      if (signals > 1) {
        this.logger.warn({ signal }, "second signal: exiting without waiting");
        exit(1);
        return;
      }
      this.logger.info({ signal }, "signal received, shutting down gracefully");
      void this.stop().then(() => exit(0));
    };
    process.on("SIGTERM", this.#signalHandler);
    process.on("SIGINT", this.#signalHandler);
  }

  #removeSignalHandlers(): void {
    if (this.#signalHandler === undefined) return;
    // Stopped: a later signal should get Node's default behaviour again.
    process.off("SIGTERM", this.#signalHandler);
    process.off("SIGINT", this.#signalHandler);
    this.#signalHandler = undefined;
  }
}

/**
 * The lane an event of a controller's own object goes to: a change somebody asked for (spec, deletion,
 * annotations, labels) is `high`, so it never waits behind a backlog of new objects or resyncs; anything else
 * (a new object, our own status writes coming back) is `normal`.
 */
export function priorityOf(event: InformerEvent<KubernetesObject>): Priority {
  const { object, previous } = event;
  if (event.type !== "update" || previous === undefined) return "normal";
  const now = object.metadata;
  const before = previous.metadata;
  if (now?.generation !== before?.generation) return "high";
  if (now?.deletionTimestamp !== before?.deletionTimestamp) return "high";
  if (!sameStrings(now?.annotations, before?.annotations) || !sameStrings(now?.labels, before?.labels)) return "high";
  return "normal";
}

function sameStrings(a: Record<string, string> | undefined, b: Record<string, string> | undefined): boolean {
  const left = a ?? {};
  const right = b ?? {};
  const keys = Object.keys(left);
  return keys.length === Object.keys(right).length && keys.every((key) => left[key] === right[key]);
}
