// The defaults scenario (issue #33): the playground exactly as a user starts it (`npm start -- --latency-ms 200`:
// the simulator's own rate limit of 20/s with a burst of 40, the operator with the playground's flags and its own
// defaults otherwise), N GpuVms of one type in one location created at once through the Kubernetes API by 8
// parallel writers, in a namespace with a `-` (hashed cloud names) or without; optionally on a busy machine (two
// CPU-bound processes beside the operator). Only the ports, the state directory and the simulator's capacity
// (room for N VMs of the type in the location) differ from a user's playground.
import { GROUP, VERSION } from "../../src/api/common.ts";
import { KubeHttp, type Manifest, SSH_KEY } from "./cluster.ts";
import type { RequestCounts } from "./metrics.ts";
import { startPlayground } from "./playground.ts";
import { type BurstResult, measureBurst } from "./scenarios.ts";

export const DEFAULTS_TYPE = "a40.1x";
export const DEFAULTS_LOCATION = "us-east1-a";
/** The playground's simulator: its default rate limit per credential (src/simulator/index.ts). */
export const DEFAULTS_RATE = { ratePerSec: 20, burst: 40 };
const WRITERS = 8;
/** Two CPU-bound processes: with the operator and the playground, more runnable work than the 2 cores. */
const BUSY_PROCESSES = 2;

/** The issue's goals: time to all Ready within this factor of L + N/R (quiet / busy), cloud calls per VM. */
export const DEFAULTS_GOALS = { quietRatio: 1.1, busyRatio: 1.25, callsPerVm: 1.05 } as const;

export function defaultsVmManifest(name: string, namespace: string): Manifest {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: "GpuVm",
    metadata: { name, namespace },
    // No credentialsRef: the namespace has no Secret of its own, so the operator's default one serves it.
    spec: { type: DEFAULTS_TYPE, location: DEFAULTS_LOCATION, sshPublicKey: SSH_KEY },
  };
}

export interface DefaultsOptions {
  workDir: string;
  n: number;
  namespace: string;
  busy: boolean;
  latencyMs: number;
  timeoutMs: number;
  log?: (line: string) => void;
}

/** One run of the defaults scenario in a fresh playground. */
export async function runDefaults(options: DefaultsOptions): Promise<BurstResult> {
  const playground = await startPlayground({ workDir: options.workDir, latencyMs: options.latencyMs });
  try {
    const response = await fetch(`${playground.sim.adminUrl}/capacity`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ [DEFAULTS_LOCATION]: { [DEFAULTS_TYPE]: { capacity: options.n + 100 } } }),
    });
    if (!response.ok) throw new Error(`simulator capacity: HTTP ${response.status} ${await response.text()}`);
    const http = new KubeHttp(playground.kube.url);
    await http.ensureNamespace(options.namespace);
    const pad = (i: number): string => String(i).padStart(5, "0");
    const manifests = Array.from({ length: options.n }, (_, i) =>
      defaultsVmManifest(`vm-${pad(i)}`, options.namespace),
    );
    const { result } = await measureBurst({
      workDir: options.workDir,
      n: options.n,
      variant: `defaults ${options.namespace}${options.busy ? " busy" : ""}`,
      operatorFlags: [],
      latencyMs: options.latencyMs,
      rate: DEFAULTS_RATE,
      timeoutMs: options.timeoutMs,
      ...(options.log !== undefined ? { log: options.log } : {}),
      env: { sim: playground.sim, kube: playground.kube, http, stop: playground.stop },
      operator: playground.operator,
      manifests,
      namespace: options.namespace,
      writers: WRITERS,
      busy: options.busy ? BUSY_PROCESSES : 0,
      stop: playground.stop,
    });
    return { ...result, scenario: "defaults" };
  } finally {
    await playground.stop();
  }
}

/** Cloud calls per VM by endpoint, in the order the issue names them; the rest summed as "other". */
const ENDPOINTS: [label: string, route: RegExp][] = [
  ["creates", /^POST \S*\/projects\/:projectId\/vms$/],
  ["VM lists", /^GET \S*\/projects\/:projectId\/vms$/],
  ["operation lists", /^GET \S*\/vms\/operations$/],
  ["availability reads", /^GET \S*\/availabilities$/],
  ["VM reads", /^GET \S*\/vms\/:vmId$/],
  ["operation reads", /^GET \S*\/vms\/operations\/:operationId$/],
];

export function callsByEndpoint(counts: RequestCounts): [label: string, calls: number][] {
  const rows: [string, number][] = ENDPOINTS.map(([label, route]) => [
    label,
    Object.entries(counts)
      .filter(([key]) => route.test(key))
      .reduce((sum, [, n]) => sum + n, 0),
  ]);
  const counted = rows.reduce((sum, [, n]) => sum + n, 0);
  const all = Object.entries(counts)
    .filter(([key]) => !key.includes("/_sim"))
    .reduce((sum, [, n]) => sum + n, 0);
  rows.push(["other", all - counted]);
  return rows;
}

function fixed(value: number, digits = 1): string {
  return Number.isFinite(value) ? value.toFixed(digits) : "—";
}

/** The defaults scenario's table: each row says its N, namespace and machine, the goals beside the figures. */
export function defaultsTable(runs: readonly BurstResult[]): string[] {
  if (runs.length === 0) return [];
  const lines = [
    "Defaults scenario (issue #33): the playground as `npm start -- --latency-ms 200` starts it (simulator 20/s burst 40, operator defaults), N GpuVms of one type and location created at once by 8 writers",
    "",
    "| N | namespace | machine | time to all Ready | limit L+N/R | ratio (goal) | calls/VM (goal ≤ 1.05) | by endpoint per VM | first Ready | settle→Ready p99 | CPU ms/VM | peak RSS | 429s | load before / at end |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const r of runs) {
    const busy = (r.busy ?? 0) > 0;
    const goal = busy ? DEFAULTS_GOALS.busyRatio : DEFAULTS_GOALS.quietRatio;
    const ratioMet = !r.timedOut && r.ratioToLimit <= goal ? "✓" : "✗";
    const callsMet = r.cloudCallsPerObject <= DEFAULTS_GOALS.callsPerVm ? "✓" : "✗";
    const ready = r.timedOut
      ? `${r.ready} of ${r.n} after ${fixed(r.timeToAllReadySeconds)} s`
      : `${fixed(r.timeToAllReadySeconds)} s`;
    const endpoints = callsByEndpoint(r.callsByRoute)
      .filter(([, n]) => n > 0)
      .map(([label, n]) => `${label} ${fixed(n / r.n, 3)} (${n})`)
      .join(", ");
    lines.push(
      `| ${r.n} | ${r.namespace ?? "?"} | ${busy ? `busy (${r.busy} CPU-bound)` : "quiet"} | ${ready} | ${fixed(r.physicalLimitSeconds)} s | ${fixed(r.ratioToLimit, 2)} (≤ ${goal.toFixed(2)}) ${ratioMet} | ${fixed(r.cloudCallsPerObject, 3)} ${callsMet} | ${endpoints} | ${fixed(r.firstReadySeconds)} s | ${fixed(r.settleToReadyP99Seconds)} s | ${fixed(r.cpuMsPerObject, 2)} | ${fixed(r.peakRssMiB, 0)} MiB | ${r.calls429} | ${fixed(r.load.before)} / ${fixed(r.load.after)} |`,
    );
  }
  return lines;
}
