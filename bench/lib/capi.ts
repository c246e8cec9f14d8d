// The Cluster API scenario: `playground --capi` (real management and workload control planes, Cluster API's
// managers, the operator, the simulator with node-join) and examples/cluster-api/'s MachineDeployment at N replicas
// applied at once; measured until every Machine is Running (its Node joined, nodeRef set), against the issue's
// bound 1.25 × (L + N/R): L the simulator's operation latency, R its rate limit. With `providerPaused` the
// template's GpuMachines carry `cluster.x-k8s.io/paused` (the provider writes only their Paused condition and calls
// no cloud): measured until Cluster API has made the N Machines, what Cluster API alone needs of the bound.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { parse } from "yaml";
import { PLAYGROUND_CLUSTER } from "../../src/cli/playground/cluster-api.ts";
import { READY_LINE } from "../../src/cli/playground/next-steps.ts";
import { type KubeTarget, kubeExpect, kubeRequest, kubeTargetOf } from "../../src/control-plane/http.ts";
import { loadAverage, REPO_ROOT, sleep } from "./processes.ts";

export interface CapiResult {
  scenario: "capi";
  n: number;
  latencyMs: number;
  ratePerSec: number;
  /** The GpuMachines were paused: Cluster API alone, measured until it made the Machines (no VM, none Running). */
  providerPaused: boolean;
  /** From the apply to the first Machine made (the MachineDeployment and its MachineSet reconciled first). */
  timeToFirstMachineSeconds: number;
  /**
   * From the apply to N Machines made by Cluster API's MachineSet controller (one reconcile making them one after
   * another, three writes each); Cluster API alone when `providerPaused`, else sharing the API server with the
   * provider.
   */
  timeToAllMachinesSeconds: number;
  /** From the apply to the first tenth of the Machines made: the MachineSet's pace before the rest is busy. */
  timeToFirstTenthMachinesSeconds: number;
  /** The provider's share: from the last Machine made to every Machine Running. */
  providerShareSeconds: number;
  /** From the apply to every Machine Running with a nodeRef. */
  timeToAllRunningSeconds: number;
  /** From the apply to N VMs booted and their Nodes joined (the simulator's node-join emulation). */
  timeToAllVmsRunningSeconds: number;
  /** The bound: 1.25 × (L + N/R). */
  boundSeconds: number;
  running: number;
  timedOut: boolean;
  /** The 1-minute load average before the apply and at the end. */
  load: { before: number; after: number };
}

const NS = "/namespaces/default";
const CAPI = `/apis/cluster.x-k8s.io/v1beta2${NS}`;
const EXAMPLES = path.join(REPO_ROOT, "examples/cluster-api");
const ROUTES: Record<string, string> = {
  GpuMachineTemplate: `/apis/infrastructure.cluster.x-k8s.io/v1alpha1${NS}/gpumachinetemplates`,
  KubeadmConfigTemplate: `/apis/bootstrap.cluster.x-k8s.io/v1beta2${NS}/kubeadmconfigtemplates`,
  MachineDeployment: `${CAPI}/machinedeployments`,
};

/** The playground with --capi, until it prints its ready line (its first start builds nothing: kube:build did). */
async function startCapiPlayground(stateDir: string, latencyMs: number, log: (line: string) => void) {
  const args = ["playground", "--capi", "--state-dir", stateDir, "--latency-ms", String(latencyMs)];
  for (const flag of ["--port", "--cloud-port", "--metrics-port", "--health-port", "--workload-port"]) {
    args.push(flag, "0");
  }
  const child = spawn(process.execPath, [path.join(REPO_ROOT, "src/cli/main.ts"), ...args], {
    cwd: REPO_ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: string[] = [];
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`playground --capi not ready in 300 s: ${lines.slice(-5)}`)),
      300_000,
    );
    const reader = createInterface({ input: child.stdout });
    reader.on("line", (line) => {
      lines.push(line);
      if (line.includes(READY_LINE)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`playground --capi exited with ${code}: ${lines.slice(-5).join(" | ")}`));
    });
  });
  child.stderr.resume();
  log(`  playground --capi ready (${stateDir})`);
  return child;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  await exited;
  clearTimeout(timer);
}

async function items(target: KubeTarget, route: string): Promise<Record<string, unknown>[]> {
  const response = await kubeExpect(target, { path: route }, [200]);
  return ((response.json as { items?: Record<string, unknown>[] }).items ?? []) as Record<string, unknown>[];
}

function fixed(value: number): string {
  return Number.isFinite(value) ? value.toFixed(1) : "—";
}

/** The run in one line, against the bound 1.25 × (L + N/R) (the run's log and the bench's summary). */
export function capiSummary(c: CapiResult): string {
  const bound = `bound 1.25 × (L + N/R) = 1.25 × (${c.latencyMs / 1000} + ${c.n}/${c.ratePerSec}) = ${fixed(c.boundSeconds)} s`;
  const pace = `the first in ${fixed(c.timeToFirstMachineSeconds)} s, the first tenth in ${fixed(c.timeToFirstTenthMachinesSeconds)} s`;
  const allMade = Number.isFinite(c.timeToAllMachinesSeconds);
  const load = `load ${fixed(c.load.before)} → ${fixed(c.load.after)}`;
  if (c.providerPaused) {
    const made = allMade ? `made in ${fixed(c.timeToAllMachinesSeconds)} s` : "not all made in time";
    const within = allMade && c.timeToAllMachinesSeconds <= c.boundSeconds ? "within" : "over";
    return `Cluster API alone (the provider paused): ${c.n} Machines ${made} (${pace}), before any VM: ${within} the ${bound}; ${load}`;
  }
  const met = !c.timedOut && c.timeToAllRunningSeconds <= c.boundSeconds ? "✓" : "✗";
  const made = allMade ? `made the Machines in ${fixed(c.timeToAllMachinesSeconds)} s` : "had not made them all";
  return `Cluster API: ${c.n} Machines at once: ${c.running} Running in ${fixed(c.timeToAllRunningSeconds)} s; ${bound} ${met}; Cluster API ${made} (${pace}); the provider's share after the last Machine ${fixed(c.providerShareSeconds)} s (their VMs booted and joined at ${fixed(c.timeToAllVmsRunningSeconds)} s); ${load}`;
}

function isRunning(machine: Record<string, unknown>): boolean {
  const status = machine.status as { phase?: string; nodeRef?: { name?: string } } | undefined;
  return status?.phase === "Running" && status.nodeRef?.name !== undefined;
}

/**
 * The playground's ready line comes once Cluster API's managers serve their webhooks, before their controllers
 * and the operator have reconciled anything (4–6 s more on a busy machine): the clock starts once Cluster API
 * says the Cluster's infrastructure is provisioned and its control plane initialized.
 */
async function clusterUp(management: KubeTarget): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const answer = await kubeRequest(management, { path: `${CAPI}/clusters/${PLAYGROUND_CLUSTER}` });
    const status = (answer.json as { status?: { initialization?: Record<string, boolean> } } | undefined)?.status;
    const initialization = status?.initialization ?? {};
    if (initialization.infrastructureProvisioned === true && initialization.controlPlaneInitialized === true) return;
    if (Date.now() > deadline)
      throw new Error(`Cluster ${PLAYGROUND_CLUSTER} not provisioned in 120 s: ${answer.text}`);
    await sleep(250);
  }
}

/**
 * Polls until N Machines are Running (or, `untilMade`, made): when the first, the first tenth and all N were made,
 * when N Nodes had joined.
 */
async function untilRunning(
  watch: { management: KubeTarget; n: number; started: number; timeoutMs: number; untilMade: boolean },
  nodesJoined: () => Promise<number>,
) {
  const { management, n, started } = watch;
  const since = () => Date.now() - started;
  const marks: { vmsAt?: number; machinesAt?: number; firstTenthAt?: number; firstAt?: number } = {};
  for (;;) {
    const elapsed = since();
    if (!watch.untilMade && marks.vmsAt === undefined && (await nodesJoined()) >= n) marks.vmsAt = since();
    const machines = await items(management, `${CAPI}/machines`);
    if (marks.firstAt === undefined && machines.length >= 1) marks.firstAt = since();
    if (marks.firstTenthAt === undefined && machines.length >= Math.ceil(n / 10)) marks.firstTenthAt = since();
    if (marks.machinesAt === undefined && machines.length >= n) marks.machinesAt = since();
    const running = machines.filter(isRunning).length;
    if (running >= n || (watch.untilMade && marks.machinesAt !== undefined)) {
      return { ...marks, running, timedOut: false };
    }
    if (elapsed > watch.timeoutMs) return { ...marks, running, timedOut: true };
    await sleep(250);
  }
}

export async function runCapi(options: {
  n: number;
  latencyMs: number;
  providerPaused: boolean;
  timeoutMs: number;
  log: (line: string) => void;
}): Promise<CapiResult> {
  const { n, latencyMs, log } = options;
  const stateDir = await mkdtemp(path.join(tmpdir(), "gpuvm-bench-capi-"));
  const playground = await startCapiPlayground(stateDir, latencyMs, log);
  try {
    const management = kubeTargetOf(await readFile(path.join(stateDir, "kubeconfig"), "utf8"));
    const cloud = JSON.parse(await readFile(path.join(stateDir, "cloud.json"), "utf8")) as { url: string };
    const admin = `${new URL(cloud.url).origin}/_sim`;
    // L and R as the simulator itself says them.
    const settings = (await (await fetch(`${admin}/settings`)).json()) as {
      latency_ms: number;
      rate_limit: { rate_per_sec: number } | false;
    };
    if (settings.latency_ms !== latencyMs) throw new Error(`the simulator's latency is ${settings.latency_ms} ms`);
    const ratePerSec = settings.rate_limit === false ? Number.POSITIVE_INFINITY : settings.rate_limit.rate_per_sec;
    const boundSeconds = 1.25 * (latencyMs / 1000 + n / ratePerSec);
    const objects: Record<string, unknown>[] = [];
    for (const file of [
      "01-gpu-machine-template.yaml",
      "02-kubeadm-config-template.yaml",
      "03-machine-deployment.yaml",
    ]) {
      objects.push(parse(await readFile(path.join(EXAMPLES, file), "utf8")) as Record<string, unknown>);
    }
    const deployment = objects[2] as { spec: { replicas: number } };
    deployment.spec.replicas = n;
    if (options.providerPaused) {
      const template = objects[0] as { spec: { template: { metadata?: { annotations?: Record<string, string> } } } };
      template.spec.template.metadata = { annotations: { "cluster.x-k8s.io/paused": "" } };
    }
    // Room for N VMs of the template's type in every location (the simulator's default is a few per location).
    const vmType = String((objects[0] as { spec: { template: { spec: { type: string } } } }).spec.template.spec.type);
    const capacity = (await (await fetch(`${admin}/capacity`)).json()) as Record<string, Record<string, unknown>>;
    const room = Object.fromEntries(Object.keys(capacity).map((location) => [location, { [vmType]: { capacity: n } }]));
    const put = await fetch(`${admin}/capacity`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(room),
    });
    if (!put.ok) throw new Error(`setting the simulator's capacity: ${put.status} ${await put.text()}`);
    // Through the admin API: the cloud API's rate limit is the operator's to spend.
    const nodesJoined = async () => {
      const answer = (await (await fetch(`${admin}/node-joins`)).json()) as { joins?: { state: string }[] };
      return (answer.joins ?? []).filter((join) => join.state === "joined").length;
    };
    await clusterUp(management);
    const load = { before: loadAverage(), after: 0 };
    const started = Date.now();
    for (const object of objects) {
      const route = ROUTES[String(object.kind)];
      if (route === undefined) throw new Error(`no route for ${String(object.kind)}`);
      const answer = await kubeRequest(management, { method: "POST", path: route, body: object });
      if (answer.status !== 201) throw new Error(`creating ${String(object.kind)}: ${answer.status} ${answer.text}`);
    }
    const { running, vmsAt, machinesAt, firstTenthAt, firstAt, timedOut } = await untilRunning(
      { management, n, started, timeoutMs: options.timeoutMs, untilMade: options.providerPaused },
      nodesJoined,
    );
    const totalSeconds = (Date.now() - started) / 1000;
    const machinesSeconds = machinesAt === undefined ? Number.NaN : machinesAt / 1000;
    load.after = loadAverage();
    const result: CapiResult = {
      scenario: "capi",
      n,
      latencyMs,
      ratePerSec,
      providerPaused: options.providerPaused,
      timeToFirstMachineSeconds: firstAt === undefined ? Number.NaN : firstAt / 1000,
      timeToAllRunningSeconds: options.providerPaused ? Number.NaN : totalSeconds,
      timeToAllMachinesSeconds: machinesSeconds,
      timeToFirstTenthMachinesSeconds: firstTenthAt === undefined ? Number.NaN : firstTenthAt / 1000,
      providerShareSeconds: options.providerPaused ? Number.NaN : totalSeconds - machinesSeconds,
      timeToAllVmsRunningSeconds: vmsAt === undefined ? Number.NaN : vmsAt / 1000,
      boundSeconds,
      running,
      timedOut,
      load,
    };
    log(`  ${capiSummary(result)}`);
    return result;
  } finally {
    await stop(playground);
    await rm(stateDir, { recursive: true, force: true });
  }
}
