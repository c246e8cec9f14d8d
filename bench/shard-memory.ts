// `npm run bench:shards`: the memory of sharded replicas at rest (issue #33), a measurement, not an assertion.
// N GpuVms on the real kube-apiserver (`npm run kube:build`), adopted from the simulator (seeded there first,
// then one GpuVm with spec.id each: no burst of creates needed), split over K operator replicas (`--shard-count K
// --shard-index i`, leader election on each shard's own Lease, the operator's defaults otherwise). Once every VM is
// Ready, each replica's RSS is sampled every period; the load average goes beside each sample.
//
//   npm run bench:shards                                  # 30,000 VMs over 3 shards, 10 periods of 30 s
//   npm run bench:shards -- --n 3000 --periods 2          # a small run
//   npm run bench:shards -- --operator-root /tmp/main     # the operator of another checkout (the previous code)
//
// Raw results go to bench/results/runs/shards-<time>.json (git-ignored).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { GROUP, VERSION } from "../src/api/common.ts";
import { builtKubeBinaries } from "../src/control-plane/binaries.ts";
import { startControlPlane } from "../src/control-plane/control-plane.ts";
import { type KubeTarget, kubeExpect } from "../src/control-plane/http.ts";
import { vmManifest } from "./lib/cluster.ts";
import { apiCalls, difference, scrape, simulatorCounts, sumOf, totalCalls } from "./lib/metrics.ts";
import {
  loadAverage,
  type OperatorProcess,
  REPO_ROOT,
  sampleProcess,
  sleep,
  startOperatorProcess,
  startSimulatorProcess,
  warmCompileCache,
} from "./lib/processes.ts";
import { NAMESPACE, SECRET, seedVms } from "./lib/scenarios.ts";

const { values } = parseArgs({
  options: {
    n: { type: "string", default: "30000" },
    shards: { type: "string", default: "3" },
    periods: { type: "string", default: "10" },
    "period-s": { type: "string", default: "30" },
    /** After the last VM is Ready, before the first sample (the last passes and their writes). */
    "settle-s": { type: "string", default: "60" },
    "timeout-min": { type: "string", default: "120" },
    "operator-root": { type: "string" },
    label: { type: "string", default: "this checkout" },
  },
});
const n = Number(values.n);
const shards = Number(values.shards);
const periods = Number(values.periods);
const periodMs = Number(values["period-s"]) * 1000;
const operatorRoot = values["operator-root"] ?? REPO_ROOT;
const RATE = { ratePerSec: 20, burst: 40 };
const LATENCY_MS = 200;
const WRITERS = 16;
const MIB = 1024 * 1024;

const started = Date.now();
const log = (line: string): void => {
  const seconds = ((Date.now() - started) / 1000).toFixed(0).padStart(5);
  process.stdout.write(`[${seconds} s, load ${loadAverage().toFixed(2)}] ${line}\n`);
};

const vmsPath = `/apis/${GROUP}/${VERSION}/namespaces/${NAMESPACE}/gpuvms`;

/** GpuVms whose Ready condition is True, read in pages (the bench's own reads, not the operators'). */
async function readyCount(admin: KubeTarget): Promise<{ total: number; ready: number }> {
  let total = 0;
  let ready = 0;
  let token: string | undefined;
  do {
    const query = `?limit=2000${token === undefined ? "" : `&continue=${encodeURIComponent(token)}`}`;
    const page = (await kubeExpect(admin, { path: `${vmsPath}${query}`, timeoutMs: 120_000 }, [200])).json as {
      items: { status?: { conditions?: { type: string; status: string }[] } }[];
      metadata?: { continue?: string };
    };
    total += page.items.length;
    ready += page.items.filter((vm) =>
      vm.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
    ).length;
    token = page.metadata?.continue || undefined;
  } while (token !== undefined);
  return { total, ready };
}

/** What each informer held in full and noted when it first synced (the operator's "informer synced" lines). */
function informerSizes(logFile: string): string[] {
  const lines: string[] = [];
  for (const line of readFileSync(logFile, "utf8").split("\n")) {
    if (!line.includes('"informer synced"')) continue;
    try {
      const entry = JSON.parse(line) as Record<string, unknown>;
      const what = String(entry.resource ?? entry.kind ?? entry.informer ?? entry.component ?? "?");
      if (Number(entry.objects) < 100) continue;
      lines.push(`${what}: ${String(entry.objects)} listed, held ${String(entry.held)}, noted ${String(entry.noted)}`);
    } catch {
      // not a JSON line
    }
  }
  return lines;
}

const built = await builtKubeBinaries();
if (built === undefined) throw new Error("the real kube-apiserver is not built: npm run kube:build");
const workDir = path.join(tmpdir(), `gpuvm-shards-${process.pid}`);
mkdirSync(workDir, { recursive: true });
log(`${n} GpuVms over ${shards} shards, the operator of ${operatorRoot} (${values.label}); work dir ${workDir}`);
warmCompileCache(operatorRoot);
const plane = await startControlPlane({
  bin: built.bin,
  dataDir: path.join(workDir, "kube"),
  crdDirs: [path.join(REPO_ROOT, "crds")],
  controllerManager: false,
  log,
});
const operators: OperatorProcess[] = [];
const sim = await startSimulatorProcess({ workDir, latencyMs: LATENCY_MS, rateLimit: RATE, vmCapacity: n + 100 });
try {
  const admin = plane.admin;
  await kubeExpect(
    admin,
    {
      method: "POST",
      path: "/api/v1/namespaces",
      body: { apiVersion: "v1", kind: "Namespace", metadata: { name: NAMESPACE } },
    },
    [201],
  );
  await kubeExpect(
    admin,
    {
      method: "POST",
      path: `/api/v1/namespaces/${NAMESPACE}/secrets`,
      body: {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: SECRET, namespace: NAMESPACE },
        stringData: { apiKey: sim.apiKey, projectId: sim.projectId, apiUrl: sim.url },
      },
    },
    [201],
  );
  const ids = await seedVms(sim, n, RATE);
  log(`${ids.size} VMs seeded in the simulator`);
  await sleep(LATENCY_MS + 1000);
  const manifests = [...ids].map(([name, id]) => vmManifest(name, NAMESPACE, SECRET, id));
  let next = 0;
  const writer = async (): Promise<void> => {
    for (let index = next++; index < manifests.length; index = next++) {
      await kubeExpect(admin, { method: "POST", path: vmsPath, body: manifests[index] }, [201]);
      if ((index + 1) % 5000 === 0) log(`${index + 1} GpuVms created`);
    }
  };
  await Promise.all(Array.from({ length: WRITERS }, () => writer()));
  log(`${manifests.length} GpuVms created through kube-apiserver`);

  const kubeconfig = path.join(workDir, "kubeconfig");
  writeFileSync(kubeconfig, plane.kubeconfigYaml());
  for (let index = 0; index < shards; index++) {
    operators.push(
      await startOperatorProcess({
        workDir,
        name: `shard-${index}`,
        kubeconfig,
        apiUrl: sim.url,
        credentialsSecret: `${NAMESPACE}/${SECRET}`,
        flags: [
          ...(shards > 1 ? ["--shard-count", String(shards), "--shard-index", String(index)] : []),
          ...["--leader-elect", "--leader-election-namespace", NAMESPACE],
        ],
        repoRoot: operatorRoot,
      }),
    );
  }
  log(`${shards} operators started`);
  const deadline = Date.now() + Number(values["timeout-min"]) * 60_000;
  const peaks = operators.map(() => 0);
  for (;;) {
    const { total, ready } = await readyCount(admin);
    operators.forEach((operator, index) => {
      peaks[index] = Math.max(peaks[index] ?? 0, sampleProcess(operator.pid).rssBytes);
    });
    const rss = operators.map((operator) => (sampleProcess(operator.pid).rssBytes / MIB).toFixed(0)).join(" / ");
    log(`${ready} of ${total} Ready; RSS ${rss} MiB`);
    if (ready === n) break;
    if (Date.now() > deadline) throw new Error(`only ${ready} of ${n} Ready within ${values["timeout-min"]} min`);
    await sleep(15_000);
  }
  const readyAfter = (Date.now() - started) / 1000;
  await sleep(Number(values["settle-s"]) * 1000);
  const samples: { atS: number; load: number; rssMiB: number[] }[] = [];
  const countsAtRest = await simulatorCounts(sim.adminUrl);
  for (let period = 0; period < periods; period++) {
    if (period > 0) await sleep(periodMs);
    const rssMiB = operators.map((operator) => sampleProcess(operator.pid).rssBytes / MIB);
    samples.push({ atS: (Date.now() - started) / 1000, load: loadAverage(), rssMiB });
    log(`at rest, period ${period + 1}: RSS ${rssMiB.map((m) => m.toFixed(0)).join(" / ")} MiB`);
  }
  // The cloud calls of every replica at rest (background lists of the project's VMs, resyncs' reads).
  const callsAtRest = difference(await simulatorCounts(sim.adminUrl), countsAtRest);
  const restSeconds = (samples.at(-1)?.atS ?? 0) - (samples[0]?.atS ?? 0) || 1;
  const calls = apiCalls(callsAtRest).sort(([, a], [, b]) => b - a);
  const heaps = await Promise.all(
    operators.map(async (operator) => {
      const metrics = await scrape(operator.metricsUrl, [
        "nodejs_heap_size_used_bytes",
        "nodejs_heap_size_total_bytes",
      ]);
      return {
        usedMiB: sumOf(metrics, "nodejs_heap_size_used_bytes") / MIB,
        totalMiB: sumOf(metrics, "nodejs_heap_size_total_bytes") / MIB,
      };
    }),
  );
  const summary = operators.map((operator, index) => {
    const rss = samples.map((sample) => sample.rssMiB[index] ?? 0);
    return {
      shard: index,
      restMinMiB: Math.min(...rss),
      restMaxMiB: Math.max(...rss),
      restLastMiB: rss.at(-1) ?? 0,
      peakMiB: Math.max(peaks[index] ?? 0, sampleProcess(operator.pid).peakRssBytes) / MIB,
      heap: heaps[index],
      informers: informerSizes(operator.logFile),
    };
  });
  const loads = samples.map((sample) => sample.load);
  log(`all ${n} Ready ${readyAfter.toFixed(0)} s after the start (seeding and creating included)`);
  for (const shard of summary) {
    log(
      `shard ${shard.shard}: at rest ${shard.restMinMiB.toFixed(0)}–${shard.restMaxMiB.toFixed(0)} MiB ` +
        `(last ${shard.restLastMiB.toFixed(0)}), peak ${shard.peakMiB.toFixed(0)} MiB, heap used ` +
        `${shard.heap?.usedMiB.toFixed(0)} of ${shard.heap?.totalMiB.toFixed(0)} MiB`,
    );
    for (const line of shard.informers) log(`  ${line}`);
  }
  log(
    `cloud calls at rest: ${totalCalls(callsAtRest)} in ${restSeconds.toFixed(0)} s ` +
      `(${(totalCalls(callsAtRest) / restSeconds).toFixed(2)}/s): ${calls.map(([route, count]) => `${route} ${count}`).join(", ")}`,
  );
  log(`load average at the samples: ${Math.min(...loads).toFixed(2)}–${Math.max(...loads).toFixed(2)}`);
  const runs = path.join(REPO_ROOT, "bench/results/runs");
  mkdirSync(runs, { recursive: true });
  const file = path.join(runs, `shards-${new Date(started).toISOString().replace(/[:.]/g, "-")}.json`);
  writeFileSync(
    file,
    JSON.stringify(
      { n, shards, operatorRoot, label: values.label, readyAfter, samples, summary, callsAtRest },
      null,
      2,
    ),
  );
  log(`written to ${file}`);
} finally {
  for (const operator of operators) await operator.stop();
  await sim.stop();
  await plane.close();
}
