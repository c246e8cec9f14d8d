// The processes of a bench run, each on its own: the GPU cloud API simulator, the Kubernetes API test double and
// the operator (the real `gpuvm-operator run` command), so that the operator's CPU and memory are its own and a
// busy simulator does not stall its event loop. Nothing here knows about scenarios.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { openSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import { createInterface } from "node:readline";
import { OPERATOR_NODE_FLAGS, operatorEnvironment } from "../../src/cli/node-flags.ts";

export const REPO_ROOT = path.resolve(import.meta.dirname, "../..");

export interface RunningChild {
  child: ChildProcess;
  pid: number;
  stop(): Promise<void>;
}

function spawnMain(
  args: string[],
  options: { nodeArgs?: string[]; logFile?: string; repoRoot?: string } = {},
): ChildProcess {
  const log = options.logFile === undefined ? "ignore" : openSync(options.logFile, "a");
  const root = options.repoRoot ?? REPO_ROOT;
  return spawn(process.execPath, [...(options.nodeArgs ?? []), path.join(root, "src/cli/main.ts"), ...args], {
    cwd: root,
    stdio: ["ignore", "pipe", log],
    // As in the image: modules compiled once, type stripping's parser never loaded (src/cli/node-flags.ts).
    env: { ...operatorEnvironment(), NODE_ENV: "production" },
  });
}

/**
 * Fills the operator processes' compile cache before anything is measured, as building the image does: the first
 * operator would otherwise strip types and compile every module itself (and idle larger than the others).
 */
export function warmCompileCache(repoRoot = REPO_ROOT): void {
  const main = path.join(repoRoot, "src/cli/main.ts");
  spawnSync(process.execPath, [main, "run", "--help"], { cwd: repoRoot, env: operatorEnvironment(), stdio: "ignore" });
}

/** The first stdout lines of a child until `done` says enough (or it exits / times out). */
function readStartup(child: ChildProcess, done: (lines: string[]) => boolean, what: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const lines: string[] = [];
    const timer = setTimeout(() => reject(new Error(`${what} did not start within 60 s`)), 60_000);
    const stdout = child.stdout;
    if (stdout === null) throw new Error(`${what}: no stdout`);
    const reader = createInterface({ input: stdout });
    reader.on("line", (line) => {
      lines.push(line);
      if (done(lines)) {
        clearTimeout(timer);
        resolve(lines);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited with ${code} during startup: ${lines.join(" | ")}`));
    });
  });
}

/** SIGTERM, then SIGKILL after 20 s; resolves once the child has exited. */
export function stopper(child: ChildProcess): () => Promise<void> {
  return async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    await exited;
    clearTimeout(timer);
  };
}

/** A free TCP port on 127.0.0.1 (released before use: a small race, fine on one machine). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

export interface SimulatorProcess extends RunningChild {
  url: string;
  adminUrl: string;
  apiKey: string;
  projectId: string;
}

export async function startSimulatorProcess(options: {
  workDir: string;
  latencyMs: number;
  /** Requests per second and burst per credential, as the server enforces them. */
  rateLimit: { ratePerSec: number; burst: number };
  vmCapacity: number;
}): Promise<SimulatorProcess> {
  const config = path.join(options.workDir, "simulator.json");
  const capacity: Record<string, Record<string, number>> = {};
  for (const location of ["us-east1-a", "us-southcentral1-a", "eu-iceland1-a"]) {
    capacity[location] = { "a40.1x": options.vmCapacity };
  }
  writeFileSync(config, JSON.stringify({ capacity }));
  const child = spawnMain(
    [
      "simulator",
      "--port",
      "0",
      "--latency-ms",
      String(options.latencyMs),
      "--rate-limit",
      `${options.rateLimit.ratePerSec}/${options.rateLimit.burst}`,
      "--config",
      config,
    ],
    { logFile: path.join(options.workDir, "simulator.log") },
  );
  const lines = await readStartup(child, (seen) => seen.some((l) => l.includes("project id:")), "simulator");
  const field = (label: string): string => {
    const line = lines.find((l) => l.trim().startsWith(label));
    if (line === undefined) throw new Error(`simulator did not print ${label}`);
    return line.slice(line.indexOf(label) + label.length).trim();
  };
  return {
    child,
    pid: child.pid ?? 0,
    stop: stopper(child),
    url: field("base URL:"),
    adminUrl: field("admin API:"),
    apiKey: field("API key:"),
    projectId: field("project id:"),
  };
}

export interface KubeProcess extends RunningChild {
  url: string;
  kubeconfig: string;
}

export async function startKubeProcess(options: { workDir: string }): Promise<KubeProcess> {
  const kubeconfig = path.join(options.workDir, "kubeconfig");
  const child = spawnMain(
    ["kube-double", "--port", "0", "--crd-dir", path.join(REPO_ROOT, "crds"), "--kubeconfig-out", kubeconfig],
    { logFile: path.join(options.workDir, "kube-double.log") },
  );
  const lines = await readStartup(child, (seen) => seen.some((l) => l.startsWith("http")), "kube-double");
  const url = lines.find((l) => l.startsWith("http")) ?? "";
  return { child, pid: child.pid ?? 0, stop: stopper(child), url, kubeconfig };
}

export interface OperatorProcess extends RunningChild {
  metricsUrl: string;
  logFile: string;
}

export async function startOperatorProcess(options: {
  workDir: string;
  name: string;
  kubeconfig: string;
  apiUrl: string;
  credentialsSecret: string;
  flags: string[];
  /** Write a V8 CPU profile (.cpuprofile) into this directory when the operator exits. */
  cpuProfileDir?: string;
  /** More flags for node (e.g. --heapsnapshot-signal=SIGUSR2). */
  nodeArgs?: string[];
  /** Run the operator of another checkout (the previous code beside this one); default this one. */
  repoRoot?: string;
}): Promise<OperatorProcess> {
  const metricsPort = await freePort();
  const logFile = path.join(options.workDir, `operator-${options.name}.log`);
  const nodeArgs = [
    ...OPERATOR_NODE_FLAGS,
    ...(options.cpuProfileDir === undefined ? [] : ["--cpu-prof", "--cpu-prof-dir", options.cpuProfileDir]),
    ...(options.nodeArgs ?? []),
  ];
  const child = spawnMain(
    [
      "run",
      "--kubeconfig",
      options.kubeconfig,
      "--api-url",
      options.apiUrl,
      "--credentials-secret",
      options.credentialsSecret,
      "--metrics-bind-address",
      `127.0.0.1:${metricsPort}`,
      "--health-probe-bind-address",
      "0",
      ...options.flags,
    ],
    { nodeArgs, logFile, ...(options.repoRoot !== undefined ? { repoRoot: options.repoRoot } : {}) },
  );
  // Logs go to stdout as JSON lines: into the log file, read by nobody during the run.
  const out = child.stdout;
  if (out !== null) {
    const fd = openSync(logFile, "a");
    out.on("data", (chunk: Buffer) => writeFileSync(fd, chunk));
  }
  const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
  const started = Date.now();
  for (;;) {
    if (child.exitCode !== null) throw new Error(`operator exited with ${child.exitCode}; see ${logFile}`);
    try {
      const response = await fetch(metricsUrl);
      if (response.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() - started > 60_000) throw new Error(`operator /metrics not up within 60 s; see ${logFile}`);
    await sleep(100);
  }
  return { child, pid: child.pid ?? 0, stop: stopper(child), metricsUrl, logFile };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const CLOCK_TICKS_PER_SECOND = 100;

export interface ProcessSample {
  at: number;
  /** User + system CPU seconds since the process started. */
  cpuSeconds: number;
  rssBytes: number;
  peakRssBytes: number;
}

/** CPU and memory of a process from /proc (Linux). */
export function sampleProcess(pid: number): ProcessSample {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The command name may hold spaces: fields are counted after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (key: string): number => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? 0);
  return {
    at: Date.now(),
    cpuSeconds: ticks / CLOCK_TICKS_PER_SECOND,
    rssBytes: kib("VmRSS") * 1024,
    peakRssBytes: kib("VmHWM") * 1024,
  };
}

/** The 1-minute load average: figures taken under load are flagged with it. */
export function loadAverage(): number {
  return Number(readFileSync("/proc/loadavg", "utf8").split(" ")[0]);
}

/**
 * `count` CPU-bound processes (a busy machine: other pods on the node, a CI job beside the operator), each spinning
 * on its own; `stop` ends them (idempotent).
 */
export function startBusyProcesses(count: number): { stop(): void } {
  const children = Array.from({ length: count }, () =>
    spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" }),
  );
  return {
    stop: () => {
      for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    },
  };
}
