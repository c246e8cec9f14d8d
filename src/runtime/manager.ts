// The Manager ties the runtime together: shared informers (one per resource per namespace set), controllers,
// the event recorder, metrics, the /metrics /healthz /readyz servers, leader election and graceful shutdown.
// Standby replicas (not leading) keep caches warm and queue keys, but run no reconciles. Every Kubernetes write
// (KubeClient, EventRecorder) and every cloud write of the controllers (`fence`) passes the leadership fence
// (fencing.ts): none leaves a replica that does not hold its Lease with margin, nor a cancelled pass.
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { KubeConfig, KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { type OperatorConfig, parseConfig } from "./config.ts";
import { Controller, ReconcilePacer } from "./controller.ts";
import type { ControllerRegistration } from "./controller-registration.ts";
import { enqueueOwnEvents, enqueueWatchedEvents } from "./event-routing.ts";
import { EventRecorder } from "./events.ts";
import { fenceKubeConfig, LeadershipFence } from "./fencing.ts";
import type { ObjectInformer } from "./informer.ts";
import type { InformerView } from "./informer-cache.ts";
import { KubeClient } from "./kube.ts";
import { instrumentKubeConfig } from "./kube-request-metrics.ts";
import { LeaderElector } from "./leader-election.ts";
import { Metrics } from "./metrics.ts";
import { countWithoutOwner, type OwnedObjects, reportWithoutOwner } from "./objects-without-owner.ts";
import type { KubeResource } from "./resource.ts";
import { type RunningServer, startOperatorServers } from "./server.ts";
import { ShardLeases } from "./shard-leases.ts";
import { shardLeaseName } from "./sharding.ts";
import { type InformerTuning, type Selection, SharedInformers } from "./shared-informers.ts";
import { SignalShutdown } from "./signal-shutdown.ts";
import { SyncPeriods } from "./sync-periods.ts";
import { formatDuration } from "./time.ts";

/** `Manager.start()` rejects with this when the caches did not sync within --cache-sync-timeout. */
export class CacheSyncTimeoutError extends Error {
  override name = "CacheSyncTimeoutError";
}

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
  readonly #informers: SharedInformers;
  readonly #controllers: OwnedObjects[] = [];
  /** --max-reconcile-rate: one pacer for every controller. */
  readonly #pacer: ReconcilePacer | undefined;
  readonly #syncPeriods: SyncPeriods;
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
  #signals: SignalShutdown | undefined;
  #serverUrls: { metrics?: string; probes?: string } = {};

  constructor(options: ManagerOptions) {
    this.#options = options;
    this.config = options.config;
    this.logger = options.logger;
    this.identity = options.identity ?? `${process.env.POD_NAME || hostname()}_${randomUUID().slice(0, 8)}`;
    this.userAgent = `gpuvm-operator (${this.identity})`;
    this.metrics = new Metrics();
    this.#pacer = options.config.maxReconcileRate > 0 ? new ReconcilePacer(options.config.maxReconcileRate) : undefined;
    this.#syncPeriods = new SyncPeriods({
      logger: options.logger,
      ...(options.syncPeriodFloorMs === undefined ? {} : { floorMs: options.syncPeriodFloorMs }),
    });
    this.metrics.observeReadiness(() => this.hasSynced());
    this.metrics.observeOwnership(() => countWithoutOwner(this.#controllers, this.#shardLeases));
    this.#kubeConfig = instrumentKubeConfig(options.kubeConfig, this.metrics.restClientRequestsTotal, this.userAgent);
    this.#informers = new SharedInformers({
      kubeConfig: this.#kubeConfig,
      logger: options.logger,
      namespaces: options.config.watchNamespaces,
      ...(options.informer === undefined ? {} : { tuning: options.informer }),
    });
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
    namespaces?: readonly string[],
    selection: Selection = {},
  ): ObjectInformer<T> {
    return this.#informers.informerFor<T>(resource, namespaces, selection);
  }

  /**
   * What the informers of `resource` hold in full, and what they only note (sharding: a shard holds what it
   * reconciles and what that refers to). Before any informer of the resource is asked for.
   */
  setView(resource: KubeResource, view: InformerView<KubernetesObject>): void {
    this.#informers.setView(resource, view);
  }

  /** What the informers of `resource` keep of each object (default: all but what nobody reads; stripUnread). */
  setTransform(resource: KubeResource, transform: (object: KubernetesObject) => void): void {
    this.#informers.setTransform(resource, transform);
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
    return this.#informers.informerForObject<T>(resource, namespace, name);
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
    const controller = new Controller({
      name: registration.name,
      reconciler: registration.reconciler,
      logger: this.logger,
      workers: registration.workers ?? this.config.maxConcurrentReconciles,
      metrics: this.metrics,
      resyncPeriodFor: (request) =>
        this.#syncPeriods.periodOf(
          informer.get(request.namespace, request.name),
          request,
          registration.syncPeriodMs ?? this.config.syncPeriodMs,
        ),
      ...(this.#pacer ? { pacer: this.#pacer } : {}),
      ...(this.config.shard.count > 1 ? { shard: this.config.shard } : {}),
    });
    enqueueOwnEvents(informer, controller, registration.isEcho?.bind(registration));
    for (const watch of registration.watches ?? []) {
      const selection = {
        ...(watch.labelSelector === undefined ? {} : { labelSelector: watch.labelSelector }),
        ...(watch.fieldSelector === undefined ? {} : { fieldSelector: watch.fieldSelector }),
      };
      enqueueWatchedEvents(
        this.informerFor(watch.resource, watch.namespaces, selection),
        controller,
        watch,
        this.logger,
      );
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
    return this.#informers.hasSynced();
  }

  /**
   * Starts servers and informers, waits for the caches, then starts the controllers (directly, or when elected).
   * Resolves once running; `wait()` resolves when the manager has stopped.
   */
  async start(): Promise<void> {
    if (this.#started) throw new Error("manager already started");
    this.#started = true;
    if (this.#options.handleSignals) {
      this.#signals = new SignalShutdown({
        stop: () => this.stop(),
        exit: this.#options.exit ?? ((code: number) => process.exit(code)),
        logger: this.logger,
      });
      this.#signals.install();
    }
    const servers = await startOperatorServers({
      metrics: this.config.metricsBindAddress,
      probes: this.config.healthProbeBindAddress,
      registry: this.metrics,
      ready: () => (this.hasSynced() ? undefined : `not synced: ${this.#informers.unsyncedSummary()}`),
      logger: this.logger.child({ component: "server" }),
    });
    this.#servers.push(...servers.servers);
    this.#serverUrls = servers.urls;
    this.#informers.start();
    const aborted = new AbortController();
    void this.#stoppedPromise.then(() => aborted.abort());
    const synced = this.#informers.waitForSync(aborted.signal);
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
        `caches did not sync within ${formatDuration(timeoutMs)} (--cache-sync-timeout): ${this.#informers.unsyncedSummary()}`,
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
        () =>
          reportWithoutOwner(this.#controllers, shardLeases, {
            shard: this.config.shard,
            leaseDurationMs: this.config.leaseDurationMs,
            leading: this.#leading,
            logger: this.logger,
          }),
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
    await this.#informers.stop();
    await Promise.all(this.#servers.splice(0).map((server) => server.close()));
    // Stopped: a later signal should get Node's default behaviour again.
    this.#signals?.remove();
    this.logger.info({ drained: drained.every(Boolean) }, "stopped");
    this.#stopped();
  }

  /** The addresses the servers listen on (after start), e.g. to find port 0's real port in tests. */
  get serverUrls(): { metrics?: string; probes?: string } {
    return { ...this.#serverUrls };
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
    // Every key known, held or only noted (an informer with a view: see InformerView); the controller drops the
    // keys another shard reconciles.
    for (const key of informer.keys()) controller.enqueue(key);
    controller.start();
  }
}
