// Helpers for the end-to-end journeys: run the playground (and the operator) as real child processes on free
// ports and a temporary state directory, drive it with kubectl from PATH and with client-node, and read the
// cloud through the simulator's own HTTP API.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import { READY_LINE } from "../../src/cli/playground/next-steps.ts";
import { operatorArgs } from "../../src/cli/playground/operator-process.ts";
import { eventually } from "../../src/util/eventually.ts";

const run = promisify(execFile);
export const REPO_ROOT = path.resolve(import.meta.dirname, "../..");
const MAIN_SCRIPT = path.join(REPO_ROOT, "src/cli/main.ts");

export interface CloudInfo {
  url: string;
  apiKey: string;
  projectId: string;
}

/** A child process whose output is kept (for assertions and for failure messages). */
export class RunningProcess {
  readonly child: ChildProcess;
  #output = "";
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(args: string[], env: Record<string, string> = {}) {
    this.child = spawn(process.execPath, [MAIN_SCRIPT, ...args], {
      cwd: REPO_ROOT,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...env },
    });
    this.child.stdout?.on("data", (chunk: Buffer) => this.#append(chunk));
    this.child.stderr?.on("data", (chunk: Buffer) => this.#append(chunk));
    this.exited = new Promise((resolve) => this.child.once("exit", (code, signal) => resolve({ code, signal })));
    // A test that throws before its cleanup must not leave servers running after the worker exits.
    const killOnExit = (): void => {
      this.child.kill("SIGKILL");
    };
    process.once("exit", killOnExit);
    void this.exited.then(() => process.off("exit", killOnExit));
  }

  #append(chunk: Buffer): void {
    this.#output += chunk.toString("utf8");
    // Bounded: a long journey must not keep megabytes of logs.
    if (this.#output.length > 2_000_000) this.#output = this.#output.slice(-1_000_000);
  }

  get output(): string {
    return this.#output;
  }

  /** Resolves when `text` has been printed; rejects if the process exits first or the time runs out. */
  async waitForOutput(text: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.#output.includes(text)) {
      if (this.child.exitCode !== null || this.child.signalCode !== null) {
        throw new Error(`process exited before printing "${text}":\n${this.#output.slice(-4000)}`);
      }
      if (Date.now() > deadline)
        throw new Error(`"${text}" not printed within ${timeoutMs} ms:\n${this.#output.slice(-4000)}`);
      await sleep(50);
    }
  }

  async stop(signal: NodeJS.Signals = "SIGTERM"): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    return this.exited;
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export { eventually };

export interface Playground {
  process: RunningProcess;
  stateDir: string;
  kubeconfigPath: string;
  /** Base URL of the Kubernetes API (the test double's, or the real kube-apiserver's). */
  kubeUrl: string;
  cloud: CloudInfo;
  kubectl(...args: string[]): Promise<string>;
  customObjects: CustomObjectsApi;
  cloudGet(route: string): Promise<unknown>;
  /** The operator command, as the playground would run it, with free ports (of one shard when given). */
  operatorArgs(shard?: { index: number; count: number }): string[];
  /** Stops the playground (SIGTERM unless told) and removes its state directory unless kept. */
  close(options?: { signal?: NodeJS.Signals; keepState?: boolean }): Promise<{ code: number | null }>;
}

export async function startPlayground(options: {
  latencyMs: number;
  withoutOperator?: boolean;
  /** Reuse the state of an earlier playground; a fresh temporary directory otherwise. */
  stateDir?: string;
  /** The test double (default) or a real control plane (`--kube real`, needs `npm run kube:build`). */
  kube?: "double" | "real";
  /** The kubectl binary to drive it with; the one on PATH by default. */
  kubectl?: string;
  /** `--shards`: operators sharing the objects by hash, one Lease each. */
  shards?: number;
  /** The simulator's profile (`--profile`); the playground's default (contract) otherwise. */
  profile?: "contract" | "seed-only";
  /** `--capi`: Cluster API and a workload cluster too (the real control plane; its start takes longer). */
  capi?: boolean;
  /** Environment of the playground and the operators it starts (GPUVM_<FLAG> sets an operator flag). */
  env?: Record<string, string>;
}): Promise<Playground> {
  const stateDir = options.stateDir ?? (await mkdtemp(path.join(tmpdir(), "gpuvm-e2e-")));
  const args = ["playground", "--port", "0", "--cloud-port", "0", "--metrics-port", "0", "--health-port", "0"];
  args.push("--state-dir", stateDir, "--latency-ms", String(options.latencyMs));
  if (options.withoutOperator === true) args.push("--without-operator");
  if (options.kube === "real") args.push("--kube", "real");
  if (options.shards !== undefined) args.push("--shards", String(options.shards));
  if (options.profile !== undefined) args.push("--profile", options.profile);
  if (options.capi === true) args.push("--capi", "--workload-port", "0");
  const playground = new RunningProcess(args, options.env);
  try {
    await playground.waitForOutput(READY_LINE, options.capi === true ? 300_000 : 120_000);
  } catch (error) {
    await playground.stop("SIGKILL");
    await rm(stateDir, { recursive: true, force: true });
    throw error;
  }
  const kubeconfigPath = path.join(stateDir, "kubeconfig");
  const cloud = JSON.parse(await readFile(path.join(stateDir, "cloud.json"), "utf8")) as CloudInfo;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath);
  const kubeUrl = kubeConfig.getCurrentCluster()?.server;
  if (kubeUrl === undefined) throw new Error(`no cluster in ${kubeconfigPath}`);
  return {
    process: playground,
    stateDir,
    kubeconfigPath,
    kubeUrl,
    cloud,
    customObjects: kubeConfig.makeApiClient(CustomObjectsApi),
    async kubectl(...kubectlArgs: string[]): Promise<string> {
      try {
        const { stdout } = await run(options.kubectl ?? "kubectl", kubectlArgs, {
          cwd: REPO_ROOT,
          env: { ...process.env, KUBECONFIG: kubeconfigPath },
          timeout: 150_000,
        });
        return stdout;
      } catch (error) {
        const stderr = (error as { stderr?: string }).stderr ?? "";
        throw new Error(`kubectl ${kubectlArgs.join(" ")} failed: ${stderr}`, { cause: error });
      }
    },
    async cloudGet(route: string): Promise<unknown> {
      const response = await fetch(`${cloud.url}${route}`, { headers: { authorization: `Bearer ${cloud.apiKey}` } });
      if (!response.ok) throw new Error(`GET ${route}: HTTP ${response.status} ${await response.text()}`);
      return response.json();
    },
    operatorArgs(shard?: { index: number; count: number }): string[] {
      // On the real control plane the operator runs as deploy/ installs it: its ServiceAccount's kubeconfig and
      // its Lease(s) in deploy/'s namespace, as the playground itself starts it.
      const real = options.kube === "real" || options.capi === true;
      return operatorArgs({
        kubeconfigPath: real ? path.join(stateDir, "operator.kubeconfig") : kubeconfigPath,
        apiUrl: cloud.url,
        metricsPort: 0,
        healthPort: 0,
        latencyMs: options.latencyMs,
        ...(real ? { leaderElectionNamespace: "gpuvm-system" } : {}),
        ...(shard ? { shard } : {}),
      });
    },
    async close(closeOptions = {}): Promise<{ code: number | null }> {
      const exit = await playground.stop(closeOptions.signal ?? "SIGTERM");
      if (closeOptions.keepState !== true) await rm(stateDir, { recursive: true, force: true });
      return exit;
    },
  };
}

export function startOperator(playground: Playground): RunningProcess {
  return new RunningProcess(playground.operatorArgs());
}

export const KINDS = [
  { plural: "gpuvms", kind: "GpuVm", cloudRoute: "vms" },
  { plural: "gpudisks", kind: "GpuDisk", cloudRoute: "disks" },
  { plural: "gpunetworks", kind: "GpuNetwork", cloudRoute: "vpc/networks" },
  { plural: "gpufirewallrules", kind: "GpuFirewallRule", cloudRoute: "vpc/firewall-rules" },
] as const;

export interface CustomObject {
  metadata: { name: string; namespace: string; generation?: number; finalizers?: string[] };
  spec: Record<string, unknown>;
  status?: {
    id?: string;
    observedGeneration?: number;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
    [field: string]: unknown;
  };
}

export async function listObjects(playground: Playground, plural: string): Promise<CustomObject[]> {
  const list = (await playground.customObjects.listNamespacedCustomObject({
    group: "gpucloud.dev",
    version: "v1alpha1",
    namespace: "default",
    plural,
  })) as { items: CustomObject[] };
  return list.items;
}

export function isReady(object: CustomObject): boolean {
  const ready = object.status?.conditions?.find((condition) => condition.type === "Ready");
  return ready?.status === "True" && object.status?.observedGeneration === object.metadata.generation;
}

/**
 * Every cloud item of one kind that a user's objects can own (the VM list is paged; the other lists are not).
 * The cloud creates a network named `default` by itself with a project's first VM; nothing owns that one.
 */
export async function listCloud(playground: Playground, route: string): Promise<Record<string, unknown>[]> {
  const body = (await playground.cloudGet(
    `/projects/${playground.cloud.projectId}/${route}${route === "vms" ? "?limit=500" : ""}`,
  )) as { items?: Record<string, unknown>[] };
  const items = body.items ?? [];
  return route === "vpc/networks" ? items.filter((item) => item.name !== "default") : items;
}

export function conditionSummary(objects: CustomObject[]): string {
  return objects
    .map((object) => {
      const conditions = (object.status?.conditions ?? []).map((c) => `${c.type}=${c.status}(${c.reason ?? ""})`);
      return `${object.metadata.name}: ${conditions.join(" ")}`;
    })
    .join("; ");
}

/** Waits until every object of the four kinds and every pool is Ready for its current generation. */
export async function waitAllReady(playground: Playground, timeoutMs = 120_000): Promise<void> {
  let summary = "";
  // The pools too: until a pool is Ready its members (GpuVms and GpuDisks) may not exist yet, and every object
  // that does exist can be Ready without them (on a busy machine the pool's first pass comes late).
  const plurals = [...KINDS.map((kind) => kind.plural), "gpuvmpools"];
  await eventually(
    "every object Ready",
    async () => {
      const all = (await Promise.all(plurals.map((plural) => listObjects(playground, plural)))).flat();
      summary = conditionSummary(all);
      return all.length > 0 && all.every(isReady) ? true : undefined;
    },
    timeoutMs,
  ).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}; last seen: ${summary}`, { cause: error });
  });
}
