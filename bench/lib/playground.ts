// The playground as a user starts it (`npm start -- --latency-ms 200`: the simulator with its own defaults, the
// Kubernetes API test double, the operator with the playground's flags and its defaults otherwise), run as one
// process for the defaults scenario. Only the ports (free ones) and the state directory (a fresh one) differ from
// what a user gets. The simulator and the test double live in the playground's process, the operator in its child:
// the bench reads the operator's CPU and memory from its own pid, and everything else over HTTP.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, openSync, readdirSync, readFileSync, writeSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";
import { READY_LINE } from "../../src/cli/playground/next-steps.ts";
import {
  freePort,
  type KubeProcess,
  type OperatorProcess,
  REPO_ROOT,
  type SimulatorProcess,
  sleep,
  stopper,
} from "./processes.ts";

export interface PlaygroundProcess {
  child: ChildProcess;
  /** The simulator's side (the same process as the Kubernetes side). */
  sim: SimulatorProcess;
  kube: KubeProcess;
  operator: OperatorProcess;
  stop(): Promise<void>;
}

/** The pid of the operator the playground started: its one child process. */
function childPidOf(parentPid: number): number | undefined {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[1]) === parentPid) return Number(entry);
    } catch {
      // the process ended while /proc was read
    }
  }
  return undefined;
}

async function waitForLine(child: ChildProcess, line: string, timeoutMs: number): Promise<void> {
  const stdout = child.stdout;
  if (stdout === null) throw new Error("playground: no stdout");
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`playground did not print "${line}" within ${timeoutMs} ms`)),
      timeoutMs,
    );
    createInterface({ input: stdout }).on("line", (text) => {
      if (!text.includes(line)) return;
      clearTimeout(timer);
      resolve();
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`playground exited with ${code} during startup`));
    });
  });
}

/** `npm start -- --latency-ms <latencyMs>` with free ports and a fresh state directory under `workDir`. */
export async function startPlayground(options: { workDir: string; latencyMs: number }): Promise<PlaygroundProcess> {
  mkdirSync(options.workDir, { recursive: true });
  const stateDir = path.join(options.workDir, ".playground");
  const metricsPort = await freePort();
  const logFile = path.join(options.workDir, "playground.log");
  const log = openSync(logFile, "a");
  const child = spawn(
    process.execPath,
    [
      path.join(REPO_ROOT, "src/cli/main.ts"),
      "playground",
      "--latency-ms",
      String(options.latencyMs),
      "--port",
      "0",
      "--cloud-port",
      "0",
      "--metrics-port",
      String(metricsPort),
      "--health-port",
      "0",
      "--state-dir",
      stateDir,
    ],
    { cwd: REPO_ROOT, stdio: ["ignore", "pipe", log] },
  );
  const ready = waitForLine(child, READY_LINE, 120_000);
  // Every line after the banner goes to the log: the operator's lines come through the playground's stdout.
  child.stdout?.on("data", (chunk: Buffer) => writeSync(log, chunk));
  await ready;
  const cloud = JSON.parse(readFileSync(path.join(stateDir, "cloud.json"), "utf8")) as {
    url: string;
    apiKey: string;
    projectId: string;
  };
  const kubeconfig = path.join(stateDir, "kubeconfig");
  const server = /server:\s*(\S+)/.exec(readFileSync(kubeconfig, "utf8"))?.[1];
  if (server === undefined) throw new Error(`no server in ${kubeconfig}`);
  const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
  let operatorPid: number | undefined;
  for (let waited = 0; waited < 60_000; waited += 200) {
    operatorPid ??= childPidOf(child.pid ?? -1);
    const up =
      operatorPid !== undefined &&
      (await fetch(metricsUrl)
        .then((r) => r.ok)
        .catch(() => false));
    if (up) break;
    await sleep(200);
  }
  if (operatorPid === undefined) throw new Error("the playground's operator did not start");
  const stop = stopper(child);
  const pid = child.pid ?? 0;
  const origin = new URL(cloud.url).origin;
  return {
    child,
    sim: {
      child,
      pid,
      stop,
      url: cloud.url,
      adminUrl: `${origin}/_sim`,
      apiKey: cloud.apiKey,
      projectId: cloud.projectId,
    },
    kube: { child, pid, stop, url: server, kubeconfig },
    operator: { child, pid: operatorPid, stop, metricsUrl, logFile },
    stop,
  };
}
