// The scenarios of `npm run bench`, each in fresh processes: a burst of N mixed objects, the adoption of N
// existing VMs, and (after a burst) the steady state and the latency of one spec change. Every figure is read
// from outside the operator: the simulator's request counts, a watch on the objects, /proc for CPU and memory,
// and the operator's own /metrics for the event-loop lag and its Kubernetes requests.
import { mkdirSync, readdirSync } from "node:fs";
import path from "node:path";
import {
  KubeHttp,
  type Manifest,
  mixedManifests,
  type ObjectTrack,
  ObjectWatch,
  pluralOf,
  SSH_KEY,
  vmManifest,
} from "./cluster.ts";
import {
  callsMatching,
  difference,
  kubeWrites,
  percentile,
  type RequestCounts,
  resetSimulatorCounts,
  type Samples,
  scrape,
  simulatorCounts,
  sumOf,
  totalCalls,
} from "./metrics.ts";
import {
  type KubeProcess,
  loadAverage,
  type OperatorProcess,
  type ProcessSample,
  type SimulatorProcess,
  sampleProcess,
  sleep,
  startBusyProcesses,
  startKubeProcess,
  startOperatorProcess,
  startSimulatorProcess,
} from "./processes.ts";

export const NAMESPACE = "bench";
export const SECRET = "gpucloud-credentials";
/** Where a warm-up's objects live (never counted in the burst that follows). */
const WARM_NAMESPACE = "bench-warmup";

export interface EnvironmentOptions {
  workDir: string;
  latencyMs: number;
  rate: { ratePerSec: number; burst: number };
  vmCapacity: number;
}

export interface Environment {
  sim: SimulatorProcess;
  kube: KubeProcess;
  http: KubeHttp;
  stop(): Promise<void>;
}

export async function startEnvironment(options: EnvironmentOptions): Promise<Environment> {
  mkdirSync(options.workDir, { recursive: true });
  const [sim, kube] = await Promise.all([
    startSimulatorProcess({
      workDir: options.workDir,
      latencyMs: options.latencyMs,
      rateLimit: options.rate,
      vmCapacity: options.vmCapacity,
    }),
    startKubeProcess({ workDir: options.workDir }),
  ]);
  const http = new KubeHttp(kube.url);
  await http.ensureNamespace(NAMESPACE);
  await http.createCredentials(NAMESPACE, SECRET, { apiKey: sim.apiKey, projectId: sim.projectId, url: sim.url });
  return {
    sim,
    kube,
    http,
    stop: async () => {
      await Promise.all([sim.stop(), kube.stop()]);
    },
  };
}

export interface OperatorRunOptions {
  name: string;
  flags: string[];
  cpuProfileDir?: string;
}

const LAG_FAMILIES = ["nodejs_eventloop_lag_p99_seconds", "nodejs_eventloop_lag_max_seconds"];

/** Samples the operator's CPU, memory and event-loop lag while a phase runs. */
export class OperatorSampler {
  readonly samples: ProcessSample[] = [];
  readonly lagP99: number[] = [];
  readonly lagMax: number[] = [];
  readonly #operator: OperatorProcess;
  readonly #intervalMs: number;
  #timer: NodeJS.Timeout | undefined;

  constructor(operator: OperatorProcess, intervalMs: number) {
    this.#operator = operator;
    this.#intervalMs = intervalMs;
  }

  start(): void {
    this.samples.push(sampleProcess(this.#operator.pid));
    this.#timer = setInterval(() => void this.#tick(), this.#intervalMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#tick();
  }

  async #tick(): Promise<void> {
    try {
      this.samples.push(sampleProcess(this.#operator.pid));
      // Only the lag gauges: a whole exposition every 2 s cost the operator about a tenth of its steady CPU (a
      // Prometheus scrapes every 15 to 60 s). The counters are read whole, before and after a phase.
      const metrics = await scrape(this.#operator.metricsUrl, LAG_FAMILIES);
      // prom-client resets its event-loop histogram at each scrape: every value covers one interval.
      this.lagP99.push(sumOf(metrics, "nodejs_eventloop_lag_p99_seconds"));
      this.lagMax.push(sumOf(metrics, "nodejs_eventloop_lag_max_seconds"));
    } catch {
      // the operator is stopping
    }
  }

  cpuSeconds(): number {
    const first = this.samples[0];
    const last = this.samples.at(-1);
    return first === undefined || last === undefined ? 0 : last.cpuSeconds - first.cpuSeconds;
  }

  peakRssBytes(): number {
    return Math.max(0, ...this.samples.map((s) => s.rssBytes));
  }
}

export interface BurstResult {
  scenario: string;
  /** Objects brought to Ready before this burst (0: a fresh operator). */
  warmup: number;
  variant: string;
  /** Where the objects were created (a `-` in it gives them hashed cloud names), by how many parallel writers. */
  namespace?: string;
  writers?: number;
  /** CPU-bound processes that ran beside the operator (0: a quiet machine). */
  busy?: number;
  n: number;
  kinds: Record<string, number>;
  load: { before: number; after: number };
  latencyMs: number;
  rate: { ratePerSec: number; burst: number };
  /** L + N/R: operation latency plus the time the server's rate limit needs for one call per object. */
  physicalLimitSeconds: number;
  timedOut: boolean;
  ready: number;
  timeToAllReadySeconds: number;
  ratioToLimit: number;
  firstReadySeconds: number;
  readyP50Seconds: number;
  readyP99Seconds: number;
  /** Per VM: from its create operation's completion in the cloud to Ready (fair progress). */
  settleToReadyP50Seconds: number;
  settleToReadyP99Seconds: number;
  settleToReadyMaxSeconds: number;
  cloudCalls: number;
  cloudCallsPerObject: number;
  calls429: number;
  callsByRoute: RequestCounts;
  /** Writes to the managed objects (watch events after the create) per object until Ready, and over the run. */
  objectWritesToReadyPerObject: number;
  objectWritesToReadyMax: number;
  /** Per kind: average and largest number of writes to an object until it was Ready. */
  writesToReadyByKind: Record<string, { average: number; max: number }>;
  kubeWriteRequests: number;
  kubeWritesPerObject: number;
  /** Kubernetes requests by method per object (POST: Events; PATCH: finalizers and status). */
  kubeRequestsPerObjectByMethod: Record<string, number>;
  /** Reconciles (every controller) per object, and by result (success, requeue_after, requeue, parked, error). */
  reconcilesPerObject: number;
  reconcilesByResult: Record<string, number>;
  operatorCpuSeconds: number;
  cpuMsPerObject: number;
  idleRssMiB: number;
  peakRssMiB: number;
  endRssMiB: number;
  eventLoopLagP99MaxMs: number;
  /** The event loop's p99 lag of each 2-s interval: their median, and the share of intervals above 50 ms. */
  eventLoopLagP99MedianMs: number;
  eventLoopLagIntervalsOver50Ms: number;
  eventLoopLagMaxMs: number;
  /** Every 5 s: seconds since the start, cloud calls so far, objects Ready so far. */
  timeline: [number, number, number][];
}

const MiB = 1024 * 1024;

interface SimStateOperation {
  operation_id?: string;
  resourceId?: string;
  name?: string;
  family?: string;
  settleAtMs?: number;
}

/** When each VM's CREATE operation completed in the cloud, by VM id (from the simulator's state). */
async function createCompletions(adminUrl: string): Promise<Map<string, number>> {
  const state = (await (await fetch(`${adminUrl}/state`)).json()) as { operations?: SimStateOperation[] };
  const completions = new Map<string, number>();
  for (const op of state.operations ?? []) {
    if (op.family !== "vm" || op.name !== "CREATE" || op.resourceId === undefined) continue;
    if (op.settleAtMs !== undefined) completions.set(op.resourceId, op.settleAtMs);
  }
  return completions;
}

export interface BurstOptions {
  workDir: string;
  n: number;
  variant: string;
  operatorFlags: string[];
  latencyMs: number;
  rate: { ratePerSec: number; burst: number };
  timeoutMs: number;
  cpuProfileDir?: string;
  /** More flags for the operator's node (heap snapshots, heap profiles). */
  operatorNodeArgs?: string[];
  /** Only VMs (adoption, CI) instead of the mixed set. */
  manifests?: (n: number) => Manifest[];
  /** Keep the environment and operator running after the burst (steady state, change latency follow). */
  keep?: boolean;
  /**
   * Objects brought to Ready (VMs and disks, in a namespace of their own) before the burst is measured: the
   * burst then shows a running operator's cost, without the one-time compilation of a fresh process.
   */
  warmup?: number;
  /** Runs once the simulator and the Kubernetes API are up, before the operator starts (seeding). */
  onEnvironment?: (env: Environment) => Promise<void>;
  log?: (line: string) => void;
}

export interface KeptRun {
  env: Environment;
  operator: OperatorProcess;
  watch: ObjectWatch;
  stop(): Promise<void>;
}

export async function runBurst(options: BurstOptions): Promise<{ result: BurstResult; kept?: KeptRun }> {
  const env = await startEnvironment({
    workDir: options.workDir,
    latencyMs: options.latencyMs,
    rate: options.rate,
    vmCapacity: options.n + 100,
  });
  await options.onEnvironment?.(env);
  const operator = await startOperatorProcess({
    workDir: options.workDir,
    name: options.variant,
    kubeconfig: env.kube.kubeconfig,
    apiUrl: env.sim.url,
    credentialsSecret: `${NAMESPACE}/${SECRET}`,
    flags: options.operatorFlags,
    ...(options.cpuProfileDir ? { cpuProfileDir: options.cpuProfileDir } : {}),
    ...(options.operatorNodeArgs ? { nodeArgs: options.operatorNodeArgs } : {}),
  });
  const stopAll = async (): Promise<void> => {
    await operator.stop();
    await env.stop();
  };
  try {
    await sleep(2000); // caches synced, the operator idle
    if (options.warmup !== undefined && options.warmup > 0) await warmUp(env, options.warmup, options.log);
    const manifests = (options.manifests ?? ((n) => mixedManifests(n, NAMESPACE, SECRET)))(options.n);
    return await measureBurst({ ...options, env, operator, manifests, namespace: NAMESPACE, stop: stopAll });
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/** A burst on a running environment and operator: `manifests` created at once, until every one is Ready. */
export interface MeasuredBurst extends Omit<BurstOptions, "manifests"> {
  env: Environment;
  operator: OperatorProcess;
  manifests: Manifest[];
  namespace: string;
  /** Parallel writers creating the manifests (default 16). */
  writers?: number;
  /** CPU-bound processes beside the operator while the burst runs (default none). */
  busy?: number;
  stop(): Promise<void>;
}

export async function measureBurst(input: MeasuredBurst): Promise<{ result: BurstResult; kept?: KeptRun }> {
  const { env, operator, manifests } = input;
  const log = input.log ?? (() => undefined);
  const idle = sampleProcess(operator.pid);
  const kinds: Record<string, number> = {};
  for (const m of manifests) kinds[m.kind] = (kinds[m.kind] ?? 0) + 1;
  const watch = new ObjectWatch(env.http, input.namespace);
  await watch.start();
  await resetSimulatorCounts(env.sim.adminUrl);
  const metricsBefore = await scrape(operator.metricsUrl);
  const busy = startBusyProcesses(input.busy ?? 0);
  const sampler = new OperatorSampler(operator, 2000);
  const loadBefore = loadAverage();
  sampler.start();
  const started = Date.now();
  log(`  ${input.variant}: applying ${manifests.length} objects (load ${loadBefore.toFixed(1)})`);
  const progress = setInterval(() => log(`    ${watch.readyCount}/${manifests.length} Ready`), 30_000);
  const timeline: [number, number, number][] = [];
  const timelineTimer = setInterval(() => {
    void simulatorCounts(env.sim.adminUrl)
      .then((counts) =>
        timeline.push([Math.round((Date.now() - started) / 1000), totalCalls(counts), watch.readyCount]),
      )
      .catch(() => undefined);
  }, 5000);
  try {
    await env.http.createAll(manifests, input.writers ?? 16);
    const allReady = await watch.waitForReady(manifests.length, input.timeoutMs - (Date.now() - started));
    const finished = Date.now();
    clearInterval(progress);
    clearInterval(timelineTimer);
    await sampler.stop();
    const counts = await simulatorCounts(env.sim.adminUrl);
    const metricsAfter = await scrape(operator.metricsUrl);
    const loadAtEnd = loadAverage();
    busy.stop();
    const completions = await createCompletions(env.sim.adminUrl);
    const names = new Set(manifests.map((m) => `${m.kind}/${m.metadata.name}`));
    const tracks = [...watch.objects.values()].filter((t) => names.has(`${t.kind}/${t.name}`));
    const result = summarize({
      options: input,
      kinds,
      tracks,
      started,
      finished,
      allReady,
      counts,
      completions,
      sampler,
      idle,
      kubeWrites: kubeWrites(metricsAfter) - kubeWrites(metricsBefore),
      reconciles: reconcilesByResult(metricsAfter, metricsBefore),
      kubeByMethod: kubeRequestsByMethod(metricsAfter, metricsBefore),
      calls429: throttled(metricsAfter) - throttled(metricsBefore),
      loadBefore,
      loadAtEnd,
      timeline,
    });
    log(
      `    ${result.ready}/${result.n} Ready in ${result.timeToAllReadySeconds.toFixed(1)} s ` +
        `(limit ${result.physicalLimitSeconds.toFixed(1)} s, ×${result.ratioToLimit.toFixed(2)}), ` +
        `${result.cloudCallsPerObject.toFixed(3)} calls/object, ` +
        `CPU ${result.operatorCpuSeconds.toFixed(1)} s, ${result.reconcilesPerObject.toFixed(1)} reconciles/object, peak RSS ${result.peakRssMiB.toFixed(0)} MiB`,
    );
    if (input.keep) return { result, kept: { env, operator, watch, stop: input.stop } };
    watch.stop();
    await input.stop();
    return { result };
  } finally {
    clearInterval(progress);
    clearInterval(timelineTimer);
    busy.stop();
  }
}

/** Bring `count` VMs and disks to Ready in a namespace of their own, then let the account's bucket refill. */
async function warmUp(env: Environment, count: number, log: (line: string) => void = () => undefined): Promise<void> {
  await env.http.ensureNamespace(WARM_NAMESPACE);
  await env.http.createCredentials(WARM_NAMESPACE, SECRET, {
    apiKey: env.sim.apiKey,
    projectId: env.sim.projectId,
    url: env.sim.url,
  });
  const disks = Math.round(count * 0.15);
  const pad = (i: number): string => String(i).padStart(5, "0");
  const manifests: Manifest[] = [
    ...mixedManifests(disks * 10, WARM_NAMESPACE, SECRET)
      .filter((m) => m.kind === "GpuDisk")
      .slice(0, disks),
    ...Array.from({ length: count - disks }, (_, i) => vmManifest(`warm-${pad(i)}`, WARM_NAMESPACE, SECRET)),
  ];
  const watch = new ObjectWatch(env.http, WARM_NAMESPACE);
  await watch.start();
  log(`  warm-up: ${manifests.length} objects (VMs and disks) in namespace ${WARM_NAMESPACE}`);
  await env.http.createAll(manifests, 16);
  const ready = await watch.waitForReady(manifests.length, 180_000);
  watch.stop();
  if (!ready) throw new Error(`warm-up: ${watch.readyCount} of ${manifests.length} Ready after 180 s`);
  await sleep(3000); // the account's token bucket refills before the measured burst
}

function summarize(input: {
  options: MeasuredBurst;
  kinds: Record<string, number>;
  tracks: ObjectTrack[];
  started: number;
  finished: number;
  allReady: boolean;
  counts: RequestCounts;
  completions: Map<string, number>;
  sampler: OperatorSampler;
  idle: ProcessSample;
  kubeWrites: number;
  reconciles: Record<string, number>;
  kubeByMethod: Record<string, number>;
  calls429: number;
  loadBefore: number;
  loadAtEnd: number;
  timeline: [number, number, number][];
}): BurstResult {
  const { options, tracks, started, sampler } = input;
  const n = options.n;
  const readyTimes = tracks.flatMap((t) => (t.readyAt === undefined ? [] : [(t.readyAt - started) / 1000]));
  const settleToReady = tracks.flatMap((t) => {
    const completed = t.kind === "GpuVm" && t.id !== undefined ? input.completions.get(t.id) : undefined;
    // Operations of this run only (an adoption's VMs were created before it).
    if (completed === undefined || completed < started || t.readyAt === undefined) return [];
    return [Math.max(0, (t.readyAt - completed) / 1000)];
  });
  const writes = tracks.map((t) => t.writesToReady);
  const limit = options.latencyMs / 1000 + n / options.rate.ratePerSec;
  const elapsed = (input.finished - started) / 1000;
  const calls = totalCalls(input.counts);
  const cpu = sampler.cpuSeconds();
  const last = sampler.samples.at(-1);
  return {
    scenario: options.warmup ? "burst-warm" : "burst",
    warmup: options.warmup ?? 0,
    variant: options.variant,
    namespace: options.namespace,
    writers: options.writers ?? 16,
    busy: options.busy ?? 0,
    n,
    kinds: input.kinds,
    load: { before: input.loadBefore, after: input.loadAtEnd },
    latencyMs: options.latencyMs,
    rate: options.rate,
    physicalLimitSeconds: limit,
    timedOut: !input.allReady,
    ready: readyTimes.length,
    timeToAllReadySeconds: elapsed,
    ratioToLimit: elapsed / limit,
    firstReadySeconds: readyTimes.length === 0 ? Number.NaN : Math.min(...readyTimes),
    readyP50Seconds: percentile(readyTimes, 50),
    readyP99Seconds: percentile(readyTimes, 99),
    settleToReadyP50Seconds: percentile(settleToReady, 50),
    settleToReadyP99Seconds: percentile(settleToReady, 99),
    settleToReadyMaxSeconds: settleToReady.length === 0 ? Number.NaN : Math.max(...settleToReady),
    cloudCalls: calls,
    cloudCallsPerObject: calls / n,
    calls429: input.calls429,
    callsByRoute: input.counts,
    objectWritesToReadyPerObject: writes.reduce((a, b) => a + b, 0) / Math.max(1, writes.length),
    objectWritesToReadyMax: Math.max(0, ...writes),
    writesToReadyByKind: writesByKind(tracks),
    kubeWriteRequests: input.kubeWrites,
    kubeWritesPerObject: input.kubeWrites / n,
    kubeRequestsPerObjectByMethod: Object.fromEntries(
      Object.entries(input.kubeByMethod).map(([method, count]) => [method, count / n]),
    ),
    reconcilesPerObject: Object.values(input.reconciles).reduce((a, b) => a + b, 0) / n,
    reconcilesByResult: input.reconciles,
    operatorCpuSeconds: cpu,
    cpuMsPerObject: (cpu * 1000) / n,
    idleRssMiB: input.idle.rssBytes / MiB,
    peakRssMiB: sampler.peakRssBytes() / MiB,
    endRssMiB: (last?.rssBytes ?? 0) / MiB,
    eventLoopLagP99MaxMs: Math.max(0, ...sampler.lagP99) * 1000,
    eventLoopLagP99MedianMs: percentile(sampler.lagP99, 50) * 1000,
    eventLoopLagIntervalsOver50Ms:
      sampler.lagP99.filter((lag) => lag > 0.05).length / Math.max(1, sampler.lagP99.length),
    eventLoopLagMaxMs: Math.max(0, ...sampler.lagMax) * 1000,
    timeline: input.timeline,
  };
}

function writesByKind(tracks: readonly ObjectTrack[]): Record<string, { average: number; max: number }> {
  const byKind: Record<string, { average: number; max: number }> = {};
  for (const kind of new Set(tracks.map((t) => t.kind))) {
    const writes = tracks.filter((t) => t.kind === kind).map((t) => t.writesToReady);
    byKind[kind] = { average: writes.reduce((a, b) => a + b, 0) / writes.length, max: Math.max(...writes) };
  }
  return byKind;
}

const RECONCILE_RESULTS = ["success", "requeue_after", "requeue", "parked", "error"] as const;

/** Reconciles of every controller between two scrapes, by result. */
function reconcilesByResult(after: Samples, before: Samples): Record<string, number> {
  const byResult: Record<string, number> = {};
  for (const result of RECONCILE_RESULTS) {
    const labels = { result: new RegExp(`^${result}$`) };
    byResult[result] =
      sumOf(after, "controller_runtime_reconcile_total", labels) -
      sumOf(before, "controller_runtime_reconcile_total", labels);
  }
  return byResult;
}

/** Kubernetes requests of the operator between two scrapes, by method. */
function kubeRequestsByMethod(after: Samples, before: Samples): Record<string, number> {
  const byMethod: Record<string, number> = {};
  for (const method of ["GET", "POST", "PUT", "PATCH", "DELETE"]) {
    const labels = { method: new RegExp(`^${method}$`) };
    const count =
      sumOf(after, "rest_client_requests_total", labels) - sumOf(before, "rest_client_requests_total", labels);
    if (count > 0) byMethod[method] = count;
  }
  return byMethod;
}

/** Cloud answers 429 the operator got (the simulator counts requests by route, not by answer). */
function throttled(metrics: Samples): number {
  return sumOf(metrics, "gpucloud_api_requests_total", { code: /^429$/ });
}

export interface SteadyResult {
  scenario: "steady";
  n: number;
  periods: number;
  syncPeriodSeconds: number;
  /** The length of each measured period (the sync period unless asked otherwise). */
  periodSeconds?: number;
  load: { before: number; after: number };
  vmListCallsPerPeriod: number;
  listCallsBound: number;
  cloudCallsPerPeriod: number;
  callsByRoute: RequestCounts;
  kubeWrites: number;
  cpuSecondsPerPeriod: number;
  rssMiBPerPeriod: number[];
  rssGrowthMiB: number;
  eventLoopLagP99MaxMs: number;
  eventLoopLagMaxMs: number;
}

/**
 * After a burst: `periods` periods with nothing to do, each a resync period long unless `periodMs` says
 * otherwise (the poll interval, to see what the background lists cost at a long sync period).
 */
export async function runSteady(
  kept: KeptRun,
  options: { n: number; syncPeriodMs: number; periods: number; periodMs?: number; log?: (line: string) => void },
): Promise<SteadyResult> {
  const log = options.log ?? (() => undefined);
  const periodMs = options.periodMs ?? options.syncPeriodMs;
  // One period first so that every object's resync is spread as in steady operation.
  log(`  steady state: settling for one period, then ${options.periods} periods of ${periodMs / 1000} s`);
  await sleep(periodMs);
  const sampler = new OperatorSampler(kept.operator, 2000);
  const loadBefore = loadAverage();
  await resetSimulatorCounts(kept.env.sim.adminUrl);
  const before = await scrape(kept.operator.metricsUrl);
  sampler.start();
  const rss: number[] = [];
  for (let period = 0; period < options.periods; period++) {
    await sleep(periodMs);
    rss.push(sampleProcess(kept.operator.pid).rssBytes / MiB);
  }
  await sampler.stop();
  const after = await scrape(kept.operator.metricsUrl);
  const counts = await simulatorCounts(kept.env.sim.adminUrl);
  const vmLists = callsMatching(counts, /^GET \S*\/projects\/:projectId\/vms$/);
  const result: SteadyResult = {
    scenario: "steady",
    n: options.n,
    periods: options.periods,
    syncPeriodSeconds: options.syncPeriodMs / 1000,
    periodSeconds: periodMs / 1000,
    load: { before: loadBefore, after: loadAverage() },
    vmListCallsPerPeriod: vmLists / options.periods,
    listCallsBound: Math.ceil(options.n / 500),
    cloudCallsPerPeriod: totalCalls(counts) / options.periods,
    callsByRoute: counts,
    kubeWrites: kubeWrites(after) - kubeWrites(before),
    cpuSecondsPerPeriod: sampler.cpuSeconds() / options.periods,
    rssMiBPerPeriod: rss,
    rssGrowthMiB: (rss.at(-1) ?? 0) - (rss[0] ?? 0),
    eventLoopLagP99MaxMs: Math.max(0, ...sampler.lagP99) * 1000,
    eventLoopLagMaxMs: Math.max(0, ...sampler.lagMax) * 1000,
  };
  log(
    `    VM lists per period ${result.vmListCallsPerPeriod.toFixed(2)} (bound ${result.listCallsBound}), ` +
      `Kubernetes writes ${result.kubeWrites}, RSS ${rss.map((r) => r.toFixed(0)).join(" ")} MiB`,
  );
  return result;
}

export interface ChangeResult {
  scenario: "change";
  n: number;
  changes: number;
  load: { before: number; after: number };
  /** Spec change (PATCH answered) → the first cloud call about that VM. */
  firstCallP50Ms: number;
  firstCallP99Ms: number;
  /** Spec change → the action it asks for (the STOP). */
  actionP50Ms: number;
  actionP99Ms: number;
  missed: number;
}

/**
 * One spec change at a time (powerState Running → Stopped on a VM nobody touched): the time from the change to
 * the first cloud call about it, read from the simulator's request counts (polled every 2 ms; nothing else
 * calls VM routes in steady state).
 */
export async function runChanges(
  kept: KeptRun,
  options: { n: number; changes: number; log?: (line: string) => void },
): Promise<ChangeResult> {
  const log = options.log ?? (() => undefined);
  const vms = [...kept.watch.objects.values()].filter((t) => t.kind === "GpuVm" && t.readyAt !== undefined);
  const loadBefore = loadAverage();
  const firstCalls: number[] = [];
  const actions: number[] = [];
  let missed = 0;
  log(`  change latency: ${options.changes} changes, one at a time`);
  const perVm = /\/vms\/:vmId/;
  const action = /^(POST|PATCH|PUT|DELETE) \S*\/vms\/:vmId/;
  for (let i = 0; i < options.changes; i++) {
    const target = vms[Math.floor((i * vms.length) / options.changes)];
    if (target === undefined) break;
    const before = await simulatorCounts(kept.env.sim.adminUrl);
    const changedAt = performance.now();
    await kept.env.http.mergePatch(pluralOf("GpuVm"), NAMESPACE, target.name, { spec: { powerState: "Stopped" } });
    let first: number | undefined;
    let acted: number | undefined;
    while (acted === undefined && performance.now() - changedAt < 10_000) {
      await sleep(2);
      const delta = difference(await simulatorCounts(kept.env.sim.adminUrl), before);
      if (first === undefined && callsMatching(delta, perVm) + callsMatching(delta, /\/vms$/) > 0) {
        first = performance.now() - changedAt;
      }
      if (callsMatching(delta, action) > 0) acted = performance.now() - changedAt;
    }
    if (acted === undefined) missed++;
    else {
      actions.push(acted);
      firstCalls.push(first ?? acted);
    }
    await sleep(300); // the next change must not overlap this one's settling
  }
  const result: ChangeResult = {
    scenario: "change",
    n: options.n,
    changes: options.changes,
    load: { before: loadBefore, after: loadAverage() },
    firstCallP50Ms: percentile(firstCalls, 50),
    firstCallP99Ms: percentile(firstCalls, 99),
    actionP50Ms: percentile(actions, 50),
    actionP99Ms: percentile(actions, 99),
    missed,
  };
  log(
    `    first call p50 ${result.firstCallP50Ms.toFixed(0)} ms p99 ${result.firstCallP99Ms.toFixed(0)} ms; ` +
      `action p50 ${result.actionP50Ms.toFixed(0)} ms p99 ${result.actionP99Ms.toFixed(0)} ms; missed ${missed}`,
  );
  return result;
}

export interface DriftResult {
  scenario: "drift";
  n: number;
  stops: number;
  pollIntervalSeconds: number;
  load: { before: number; after: number };
  /** STOP answered → the GpuVm's status no longer says RUNNING and Ready (what kubectl shows). */
  reportedP50Seconds: number;
  reportedMaxSeconds: number;
  /** STOP answered → the GpuVm Ready again after a START the operator sent. */
  correctedP50Seconds: number;
  correctedMaxSeconds: number;
  missed: number;
  /** VM lists per poll interval meanwhile, and the bound ceil(N/500). */
  vmListCallsPerInterval: number;
  listCallsBound: number;
  /** Reads of single VMs (GET /vms/:vmId) the operator sent meanwhile. */
  vmReads: number;
}

/**
 * VMs stopped outside the operator (each through the cloud API with the project's key, as another client would),
 * all at once among `n` objects at rest: how long until each GpuVm says so, and until the operator has started
 * it again, and what the operator listed meanwhile.
 */
export async function runDrift(
  kept: KeptRun,
  options: { n: number; stops: number; pollIntervalMs: number; timeoutMs?: number; log?: (line: string) => void },
): Promise<DriftResult> {
  const log = options.log ?? (() => undefined);
  const { sim, http } = kept.env;
  const vms = [...kept.watch.objects.values()].filter(
    (t) => t.kind === "GpuVm" && t.readyAt !== undefined && t.id !== undefined,
  );
  const targets = Array.from({ length: Math.min(options.stops, vms.length) }, (_, i) => {
    return vms[Math.floor((i * vms.length) / options.stops)];
  }).filter((t): t is ObjectTrack => t !== undefined);
  log(`  out-of-band stops: ${targets.length} VMs stopped through the cloud API at once, among ${options.n}`);
  const loadBefore = loadAverage();
  await resetSimulatorCounts(sim.adminUrl);
  const startedAt = performance.now();
  const stoppedAt = new Map<string, number>();
  await Promise.all(
    targets.map(async (target) => {
      const response = await fetch(`${sim.url}/projects/${sim.projectId}/vms/${target.id}`, {
        method: "PATCH",
        headers: { authorization: `Bearer ${sim.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ action: "STOP" }),
      });
      if (!response.ok) throw new Error(`STOP ${target.name}: HTTP ${response.status} ${await response.text()}`);
      stoppedAt.set(target.name, performance.now());
    }),
  );
  const reported = new Map<string, number>();
  const corrected = new Map<string, number>();
  const deadline = performance.now() + (options.timeoutMs ?? 180_000);
  while (corrected.size < targets.length && performance.now() < deadline) {
    await sleep(250);
    for (const target of targets) {
      if (corrected.has(target.name)) continue;
      const object = (await http.json("GET", http.pathOf(pluralOf("GpuVm"), NAMESPACE, target.name))) as {
        status?: {
          state?: string;
          conditions?: { type: string; status: string }[];
          operations?: { name: string; state: string }[];
        };
      };
      const since = performance.now() - (stoppedAt.get(target.name) ?? startedAt);
      const ready = object.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
      if (!reported.has(target.name) && (object.status?.state !== "STATE_RUNNING" || !ready)) {
        reported.set(target.name, since);
      }
      const started = object.status?.operations?.[0];
      if (ready && started?.name === "START" && started.state === "SUCCEEDED") corrected.set(target.name, since);
    }
  }
  const windowMs = performance.now() - startedAt;
  const counts = await simulatorCounts(sim.adminUrl);
  const seconds = (values: Iterable<number>) => [...values].map((ms) => ms / 1000);
  // None seen: no figure (NaN prints as "—"), not 0 s.
  const max = (values: number[]) => (values.length === 0 ? Number.NaN : Math.max(...values));
  const result: DriftResult = {
    scenario: "drift",
    n: options.n,
    stops: targets.length,
    pollIntervalSeconds: options.pollIntervalMs / 1000,
    load: { before: loadBefore, after: loadAverage() },
    reportedP50Seconds: percentile(seconds(reported.values()), 50),
    reportedMaxSeconds: max(seconds(reported.values())),
    correctedP50Seconds: percentile(seconds(corrected.values()), 50),
    correctedMaxSeconds: max(seconds(corrected.values())),
    missed: targets.length - corrected.size,
    vmListCallsPerInterval:
      callsMatching(counts, /^GET \S*\/projects\/:projectId\/vms$/) / Math.max(1, windowMs / options.pollIntervalMs),
    listCallsBound: Math.ceil(options.n / 500),
    vmReads: callsMatching(counts, /^GET \S*\/vms\/:vmId$/),
  };
  log(
    `    reported p50 ${result.reportedP50Seconds.toFixed(1)} s, max ${result.reportedMaxSeconds.toFixed(1)} s; ` +
      `corrected p50 ${result.correctedP50Seconds.toFixed(1)} s, max ${result.correctedMaxSeconds.toFixed(1)} s; ` +
      `missed ${result.missed}; VM lists per interval ${result.vmListCallsPerInterval.toFixed(2)} ` +
      `(bound ${result.listCallsBound}); single VM reads ${result.vmReads}`,
  );
  return result;
}

/** Create `n` VMs in the simulator directly (rate limit lifted meanwhile); their ids by name. */
export async function seedVms(
  sim: SimulatorProcess,
  n: number,
  rate: { ratePerSec: number; burst: number },
): Promise<Map<string, string>> {
  const settings = async (body: unknown): Promise<void> => {
    const response = await fetch(`${sim.adminUrl}/settings`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`simulator settings: HTTP ${response.status} ${await response.text()}`);
  };
  await settings({ rate_limit: false });
  const ids = new Map<string, string>();
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let index = next++; index < n; index = next++) {
      const name = `existing-${String(index).padStart(5, "0")}`;
      const response = await fetch(`${sim.url}/projects/${sim.projectId}/vms`, {
        method: "POST",
        headers: { authorization: `Bearer ${sim.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ name, type: "a40.1x", location: "us-east1-a", ssh_public_key: SSH_KEY }),
      });
      const body = (await response.json()) as { operation?: { metadata?: { id?: string } } };
      const id = body.operation?.metadata?.id;
      if (!response.ok || id === undefined) throw new Error(`seeding ${name}: HTTP ${response.status}`);
      ids.set(name, id);
    }
  };
  await Promise.all(Array.from({ length: 32 }, () => worker()));
  await settings({ rate_limit: { rate_per_sec: rate.ratePerSec, burst: rate.burst } });
  return ids;
}

/** Adopting `n` existing VMs: seeded in the cloud, then one GpuVm with spec.id each. */
export async function runAdoption(
  options: Omit<BurstOptions, "manifests">,
): Promise<{ result: BurstResult; kept?: KeptRun }> {
  let ids: Map<string, string> | undefined;
  const { result, kept } = await runBurst({
    ...options,
    manifests: () => {
      if (ids === undefined) throw new Error("not seeded");
      return [...ids].map(([name, id]) => vmManifest(name, NAMESPACE, SECRET, id));
    },
    onEnvironment: async (env) => {
      ids = await seedVms(env.sim, options.n, options.rate);
      await sleep(options.latencyMs + 1000); // every seeded VM running
    },
  });
  return { result: { ...result, scenario: "adoption" }, ...(kept !== undefined ? { kept } : {}) };
}

/** The newest .cpuprofile in a directory (the operator writes one when it exits). */
export function newestProfile(dir: string): string | undefined {
  const files = readdirSync(dir).filter((f) => f.endsWith(".cpuprofile"));
  return files.length === 0 ? undefined : path.join(dir, files.sort().at(-1) as string);
}
