// One prom-client registry per manager (no global registry: two managers in one test process must not
// collide). Metric names follow controller-runtime and client-go so existing dashboards work unchanged.
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { RestClientLabels } from "./kube-request-metrics.ts";
import type { WorkQueue, WorkQueueObserver } from "./workqueue.ts";

/** The `result` label of controller_runtime_reconcile_total. */
/** controller-runtime's results, and `parked`: a reconcile that waits for a slot of its cloud account. */
export type ReconcileResult = "success" | "error" | "requeue" | "requeue_after" | "parked";

/** prom-client's event-loop lag gauge, whose collect sets every nodejs_eventloop_lag_* gauge (and resets them). */
const EVENT_LOOP_LAG = "nodejs_eventloop_lag_seconds";
const EVENT_LOOP_LAG_PREFIX = "nodejs_eventloop_lag_";

const MISNAMED_DEFAULT_METRICS = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
] as const;

/** What the cloud operation gauges show for one family, sampled at scrape time. */
export interface CloudOperationsSample {
  family: string;
  inFlight: number;
  /** Age of the oldest operation still in flight; 0 when none is. */
  oldestAgeSeconds: number;
}

export interface MetricsOptions {
  /** Include prom-client's default process metrics (default true). */
  defaultMetrics?: boolean;
}

/** A gauge set from `sample` at each scrape. */
function sampledGauge<Label extends string>(
  registry: Registry,
  options: { name: string; help: string; labelNames?: readonly Label[] },
  sample: (gauge: Gauge<Label>) => void,
): Gauge<Label> {
  return new Gauge<Label>({
    ...options,
    registers: [registry],
    collect(this: Gauge<Label>) {
      sample(this);
    },
  });
}

const QUEUE_BUCKETS = [1e-4, 1e-3, 0.01, 0.1, 1, 10, 60, 300, 1000];

export class Metrics {
  readonly registry = new Registry();
  readonly #queues = new Map<string, WorkQueue>();
  #isReady: () => boolean = () => false;
  #ownership: () => readonly { controller: string; objects: number }[] = () => [];
  #cloudOperations: () => readonly CloudOperationsSample[] = () => [];

  // controller-runtime's reconcile metrics.
  readonly reconcileTotal = new Counter({
    name: "controller_runtime_reconcile_total",
    help: "Total number of reconciliations per controller",
    labelNames: ["controller", "result"],
    registers: [this.registry],
  });
  readonly reconcileErrorsTotal = new Counter({
    name: "controller_runtime_reconcile_errors_total",
    help: "Total number of reconciliation errors per controller",
    labelNames: ["controller"],
    registers: [this.registry],
  });
  readonly reconcilePanicsTotal = new Counter({
    name: "controller_runtime_reconcile_panics_total",
    help: "Total number of reconciliation panics per controller (the reconciler threw instead of returning an outcome)",
    labelNames: ["controller"],
    registers: [this.registry],
  });
  readonly terminalReconcileErrorsTotal = new Counter({
    name: "controller_runtime_terminal_reconcile_errors_total",
    help: "Total number of terminal reconciliation errors per controller",
    labelNames: ["controller"],
    registers: [this.registry],
  });
  readonly reconcileTimeSeconds = new Histogram({
    name: "controller_runtime_reconcile_time_seconds",
    help: "Length of time per reconciliation per controller",
    labelNames: ["controller"],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly maxConcurrentReconciles = new Gauge({
    name: "controller_runtime_max_concurrent_reconciles",
    help: "Maximum number of concurrent reconciles per controller",
    labelNames: ["controller"],
    registers: [this.registry],
  });
  readonly activeWorkers = new Gauge({
    name: "controller_runtime_active_workers",
    help: "Number of currently used workers per controller",
    labelNames: ["controller"],
    registers: [this.registry],
  });

  // client-go's work queue metrics: the gauges are read from the queues (trackQueue) at each scrape.
  readonly workqueueDepth = this.#queueGauge("workqueue_depth", "Current depth of workqueue", (q) => q.len());
  readonly workqueueAddsTotal = new Counter({
    name: "workqueue_adds_total",
    help: "Total number of adds handled by workqueue",
    labelNames: ["name"],
    registers: [this.registry],
  });
  readonly workqueueRetriesTotal = new Counter({
    name: "workqueue_retries_total",
    help: "Total number of retries handled by workqueue",
    labelNames: ["name"],
    registers: [this.registry],
  });
  readonly workqueueQueueDurationSeconds = new Histogram({
    name: "workqueue_queue_duration_seconds",
    help: "How long in seconds an item stays in workqueue before being requested",
    labelNames: ["name"],
    buckets: QUEUE_BUCKETS,
    registers: [this.registry],
  });
  readonly workqueueWorkDurationSeconds = new Histogram({
    name: "workqueue_work_duration_seconds",
    help: "How long in seconds processing an item from workqueue takes",
    labelNames: ["name"],
    buckets: QUEUE_BUCKETS,
    registers: [this.registry],
  });
  readonly workqueueUnfinishedWorkSeconds = this.#queueGauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has been done that is in progress and hasn't been observed by work_duration",
    (q) => q.unfinishedWorkSeconds(),
  );
  readonly workqueueLongestRunningProcessorSeconds = this.#queueGauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running",
    (q) => q.longestRunningProcessorSeconds(),
  );

  readonly leaderElectionMasterStatus = new Gauge({
    name: "leader_election_master_status",
    help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master",
    labelNames: ["name"],
    registers: [this.registry],
  });
  /** Objects whose shard no held Lease covers: nobody reconciles them (sampled at scrape time; --leader-elect). */
  readonly objectsWithoutOwner = sampledGauge(
    this.registry,
    {
      name: "gpucloud_operator_objects_without_owner",
      help: "Objects no replica reconciles: no held Lease of any shard set covers their shard (with --leader-elect; the same on every replica)",
      labelNames: ["controller"],
    },
    (gauge) => {
      gauge.reset();
      for (const { controller, objects } of this.#ownership()) gauge.set({ controller }, objects);
    },
  );
  /** 1 while /readyz passes (every informer cache synced), else 0; set by the manager. */
  readonly operatorReady = sampledGauge(
    this.registry,
    {
      name: "gpucloud_operator_ready",
      help: "1 while this replica is ready (every informer cache has synced, /readyz answers 200), else 0",
    },
    (gauge) => gauge.set(this.#isReady() ? 1 : 0),
  );

  /** Every request to the Kubernetes API (client-go's name and labels); fed by instrumentKubeConfig. */
  readonly restClientRequestsTotal: Counter<RestClientLabels> = new Counter({
    name: "rest_client_requests_total",
    help: "Number of HTTP requests to the Kubernetes API, partitioned by status code, method, and host",
    labelNames: ["code", "method", "host"],
    registers: [this.registry],
  });

  // The cloud side: fed by the cloud client's observer and the operation trackers (controllers wire them).
  readonly cloudApiRequestsTotal = new Counter({
    name: "gpucloud_api_requests_total",
    help: "Requests sent to the GPU cloud API, by method, route template and HTTP status (or 'error')",
    labelNames: ["method", "route", "code"],
    registers: [this.registry],
  });
  readonly cloudApiRequestDurationSeconds = new Histogram({
    name: "gpucloud_api_request_duration_seconds",
    help: "Latency of GPU cloud API requests",
    labelNames: ["method", "route"],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly cloudOperationsInFlight = sampledGauge(
    this.registry,
    {
      name: "gpucloud_operations_in_flight",
      help: "Cloud operations being tracked, by family (vm, disk, network, firewall-rule)",
      labelNames: ["family"],
    },
    (gauge) => {
      for (const sample of this.#cloudOperations()) gauge.set({ family: sample.family }, sample.inFlight);
    },
  );
  readonly cloudOperationsOldestAgeSeconds = sampledGauge(
    this.registry,
    {
      name: "gpucloud_operations_oldest_age_seconds",
      help: "Age of the oldest cloud operation still in flight, by family (0 when none); counted from when this replica began tracking it",
      labelNames: ["family"],
    },
    (gauge) => {
      for (const sample of this.#cloudOperations()) gauge.set({ family: sample.family }, sample.oldestAgeSeconds);
    },
  );
  readonly cloudOperationDurationSeconds = new Histogram({
    name: "gpucloud_operation_duration_seconds",
    help: "Time from submitting a cloud operation to its final state",
    labelNames: ["family", "operation", "result"],
    buckets: [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800],
    registers: [this.registry],
  });

  constructor(options: MetricsOptions = {}) {
    if (options.defaultMetrics !== false) {
      collectDefaultMetrics({ register: this.registry });
      // prom-client also exports these gauges with a `_total` suffix, which only counters may carry (promtool
      // check metrics refuses them); the same values are in nodejs_active_{handles,requests,resources} by type.
      for (const name of MISNAMED_DEFAULT_METRICS) this.registry.removeSingleMetric(name);
    }
  }

  /** A work queue gauge, per queue name, read from every tracked queue at each scrape. */
  #queueGauge(name: string, help: string, read: (queue: WorkQueue) => number): Gauge<"name"> {
    return sampledGauge(this.registry, { name, help, labelNames: ["name"] }, (gauge) => {
      for (const [queueName, queue] of this.#queues) gauge.set({ name: queueName }, read(queue));
    });
  }

  /** Counter/histogram hooks for a queue name (usable before the queue exists). */
  queueObserver(name: string): WorkQueueObserver {
    const labels = { name };
    return {
      onAdd: () => this.workqueueAddsTotal.inc(labels),
      onRetry: () => this.workqueueRetriesTotal.inc(labels),
      onQueueLatency: (seconds) => this.workqueueQueueDurationSeconds.observe(labels, seconds),
      onWorkDuration: (seconds) => this.workqueueWorkDurationSeconds.observe(labels, seconds),
    };
  }

  /** The readiness gpucloud_operator_ready reports at each scrape (the manager's /readyz check). */
  observeReadiness(isReady: () => boolean): void {
    this.#isReady = isReady;
  }

  /** Where gpucloud_operator_objects_without_owner reads at each scrape. */
  observeOwnership(sample: () => readonly { controller: string; objects: number }[]): void {
    this.#ownership = sample;
  }

  /** Where gpucloud_operations_in_flight and gpucloud_operations_oldest_age_seconds read at each scrape. */
  observeCloudOperations(sample: () => readonly CloudOperationsSample[]): void {
    this.#cloudOperations = sample;
  }

  /** Registers a queue for the sampled gauges (depth, unfinished work, longest running processor). */
  trackQueue(queue: WorkQueue): void {
    this.#queues.set(queue.name, queue);
  }

  /**
   * The exposition text of every metric in this registry, or only of the families named (unknown names are left
   * out, as Prometheus' federation leaves out what matches nothing). A sampler that reads one gauge every few
   * seconds then costs the operator a few families' text, not the whole registry's: the bench scraped everything
   * every 2 s, about a tenth of a steady operator's CPU. prom-client sets the event-loop gauges when it collects
   * nodejs_eventloop_lag_seconds, so asking for any of them collects that one too (first, as the registry does).
   */
  async text(names?: Iterable<string>): Promise<string> {
    if (names === undefined) return this.registry.metrics();
    const wanted = new Set(names);
    if ([...wanted].some((name) => name.startsWith(EVENT_LOOP_LAG_PREFIX))) wanted.add(EVENT_LOOP_LAG);
    const parts: string[] = [];
    for (const metric of this.registry.getMetricsAsArray()) {
      if (wanted.has(metric.name)) parts.push(await this.registry.getSingleMetricAsString(metric.name));
    }
    return parts.length === 0 ? "" : `${parts.join("\n\n")}\n`;
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
