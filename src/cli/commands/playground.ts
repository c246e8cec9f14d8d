// `gpuvm-operator playground` (`npm start`): the GPU cloud API simulator, a Kubernetes API (the test double, or
// with `--kube real` a real control plane built by `npm run kube:build`) and the operator on one machine, so that
// `kubectl apply -f examples/` works without a cluster or a cloud account. The operator runs as a child process so
// that it can be stopped and restarted on its own; on the real control plane it runs as deploy/ installs it: its
// own ServiceAccount token, deploy/'s RBAC, leader election in its namespace.
import { type ChildProcess, spawn } from "node:child_process";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { createInterface } from "node:readline";
import { SECRET_WATCH_LABEL } from "../../api/common.ts";
import { type KubeTarget, kubeRequest as sendKubeRequest } from "../../control-plane/http.ts";
import { formatLogLine } from "../../runtime/logging.ts";
import { isSimulatorProfile, SIMULATOR_PROFILES, type SimulatorProfile } from "../../simulator/profiles.ts";
import { shellQuote } from "../../util/shell-quote.ts";
import { OPERATOR_NODE_FLAGS, operatorEnvironment } from "../node-flags.ts";
import { flagsOrExitCode, parseFlags, UsageError } from "../usage.ts";

const REPO_ROOT = path.resolve(import.meta.dirname, "../../..");
const MAIN_SCRIPT = path.join(REPO_ROOT, "src/cli/main.ts");
const CREDENTIALS_NAMESPACE = "default";
const CREDENTIALS_SECRET = "gpucloud-credentials";
const OPERATOR_STOP_TIMEOUT_MS = 15_000;

export const PLAYGROUND_DEFAULTS = {
  port: 8090,
  cloudPort: 8091,
  metricsPort: 8092,
  healthPort: 8093,
  stateDir: ".playground",
  latencyMs: 1500,
} as const;

/** Printed once everything is up; the e2e suite waits for it. */
export const READY_LINE = "Playground ready.";

export interface PlaygroundOptions {
  port: number;
  cloudPort: number;
  metricsPort: number;
  healthPort: number;
  stateDir: string;
  latencyMs: number;
  profile: SimulatorProfile;
  withoutOperator: boolean;
  /** Which Kubernetes API: the test double (default, needs nothing) or a real control plane (needs the build). */
  kube: "double" | "real";
  /** Operator replicas sharing the objects by hash (--shard-count), each with its own Lease. */
  shards: number;
}

const HELP = `Usage: gpuvm-operator playground [flags]

Starts the GPU cloud API simulator, a Kubernetes API and the operator, creates the Secret
${CREDENTIALS_NAMESPACE}/${CREDENTIALS_SECRET}, and writes <state-dir>/kubeconfig and <state-dir>/cloud.json.
Ctrl-C stops everything. State is kept in <state-dir>, so a restart finds the same objects.

Flags:
  --kube <double|real>   the Kubernetes API test double (default; plain HTTP), or a real control plane: etcd,
                         kube-apiserver (TLS, RBAC) and kube-controller-manager built by \`npm run kube:build\`
                         (needs Go); its data lives in <state-dir>/kube and the operator runs with deploy/'s RBAC
  --port <n>             Kubernetes API port on 127.0.0.1 (default ${PLAYGROUND_DEFAULTS.port}; 0 picks a free one)
  --cloud-port <n>       GPU cloud API simulator port (default ${PLAYGROUND_DEFAULTS.cloudPort})
  --metrics-port <n>     operator /metrics port (default ${PLAYGROUND_DEFAULTS.metricsPort})
  --health-port <n>      operator /healthz and /readyz port (default ${PLAYGROUND_DEFAULTS.healthPort})
  --state-dir <dir>      where the kubeconfig, cloud.json and both state files live (default ${PLAYGROUND_DEFAULTS.stateDir};
                         ${PLAYGROUND_DEFAULTS.stateDir}-<profile> for another --profile: one cloud per profile)
  --latency-ms <n>       how long each simulated cloud operation takes (default ${PLAYGROUND_DEFAULTS.latencyMs})
  --profile <name>       the simulated cloud's API: contract (default; the spec and contract-decisions.md) or
                         seed-only (only the spec's endpoints, see docs/simulator.md)
  --without-operator     start only the two servers and print the command that runs the operator against them
  --shards <n>           run n operators, each reconciling its shard of the objects (--shard-count n, one Lease
                         per shard, in gpuvm-system with --kube real; shard i serves /metrics and probes on the
                         ports above + 2i) (default 1)
  -h, --help             show this help
`;

function parsePort(flag: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const port = Number(text);
  if (!/^\d+$/.test(text) || port > 65_535) {
    throw new UsageError(`--${flag}: expected a port number 0-65535, got "${text}"`);
  }
  return port;
}

/** Parses the playground's flags; "help" for --help; throws UsageError on bad input. */
export function parsePlaygroundArgs(argv: string[]): PlaygroundOptions | "help" {
  const { values } = playgroundFlags(argv);
  if (values.help === true) return "help";
  const latencyText = values["latency-ms"];
  const latencyMs = latencyText === undefined ? PLAYGROUND_DEFAULTS.latencyMs : Number(latencyText);
  if (latencyText !== undefined && !/^\d+$/.test(latencyText)) {
    throw new UsageError(`--latency-ms: expected a whole number of milliseconds, got "${latencyText}"`);
  }
  const shardsText = values.shards;
  const shards = shardsText === undefined ? 1 : Number(shardsText);
  if (shardsText !== undefined && (!/^\d+$/.test(shardsText) || shards < 1 || shards > 16)) {
    throw new UsageError(`--shards: expected a whole number from 1 to 16, got "${shardsText}"`);
  }
  const profile = values.profile ?? "contract";
  if (!isSimulatorProfile(profile)) {
    throw new UsageError(`--profile: expected one of ${SIMULATOR_PROFILES.join(", ")}, got "${profile}"`);
  }
  return {
    port: parsePort("port", values.port, PLAYGROUND_DEFAULTS.port),
    cloudPort: parsePort("cloud-port", values["cloud-port"], PLAYGROUND_DEFAULTS.cloudPort),
    metricsPort: parsePort("metrics-port", values["metrics-port"], PLAYGROUND_DEFAULTS.metricsPort),
    healthPort: parsePort("health-port", values["health-port"], PLAYGROUND_DEFAULTS.healthPort),
    stateDir: path.resolve(values["state-dir"] ?? defaultStateDir(profile)),
    latencyMs,
    profile,
    withoutOperator: values["without-operator"] === true,
    kube: parseKube(values.kube),
    shards,
  };
}

/**
 * Each profile keeps its own state: a seed-only playground started after a contract one must not serve the
 * contract one's cloud (nor its objects' cluster), and switching back finds each as it was left.
 */
export function defaultStateDir(profile: SimulatorProfile): string {
  return profile === "contract" ? PLAYGROUND_DEFAULTS.stateDir : `${PLAYGROUND_DEFAULTS.stateDir}-${profile}`;
}

/**
 * The operator's command as printed for a shell: through `npm run operator` (run from the checkout), so that it
 * runs on the Node 24 that `npm ci` installed and not on whatever `node` the shell finds first.
 */
export function operatorCommandLine(args: readonly string[]): string {
  return ["npm", "run", "operator", "--", ...args.slice(args[0] === "run" ? 1 : 0)].map(shellQuote).join(" ");
}

function parseKube(text: string | undefined): "double" | "real" {
  if (text === undefined || text === "double") return "double";
  if (text === "real") return "real";
  throw new UsageError(`--kube: expected double or real, got "${text}"`);
}

function playgroundFlags(argv: string[]) {
  return parseFlags({
    args: argv,
    options: {
      port: { type: "string" },
      "cloud-port": { type: "string" },
      "metrics-port": { type: "string" },
      "health-port": { type: "string" },
      "state-dir": { type: "string" },
      "latency-ms": { type: "string" },
      profile: { type: "string" },
      "without-operator": { type: "boolean" },
      kube: { type: "string" },
      shards: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
}

export interface OperatorArgsInput {
  kubeconfigPath: string;
  apiUrl: string;
  metricsPort: number;
  healthPort: number;
  latencyMs: number;
  /** Run with leader election in this namespace, as deploy/ runs the operator (shards too: one Lease each). */
  leaderElectionNamespace?: string;
  /** One of several shards: --shard-count/--shard-index and leader election on the shard's own Lease. */
  shard?: { index: number; count: number };
}

/** Arguments after `node src/cli/main.ts` that run the operator against a playground. */
export function operatorArgs(input: OperatorArgsInput): string[] {
  // Poll operations about twice per simulated operation so progress shows quickly, within 100 ms..2 s.
  const pollMs = Math.min(2000, Math.max(100, Math.round(input.latencyMs / 2)));
  return [
    "run",
    "--kubeconfig",
    input.kubeconfigPath,
    "--api-url",
    input.apiUrl,
    "--credentials-secret",
    `${CREDENTIALS_NAMESPACE}/${CREDENTIALS_SECRET}`,
    "--metrics-bind-address",
    `127.0.0.1:${input.metricsPort}`,
    "--health-probe-bind-address",
    `127.0.0.1:${input.healthPort}`,
    "--operation-poll-interval",
    `${pollMs}ms`,
    ...(input.shard === undefined || input.shard.count <= 1
      ? []
      : ["--shard-count", String(input.shard.count), "--shard-index", String(input.shard.index)]),
    ...(input.leaderElectionNamespace === undefined && (input.shard === undefined || input.shard.count <= 1)
      ? []
      : ["--leader-elect", "--leader-election-namespace", input.leaderElectionNamespace ?? CREDENTIALS_NAMESPACE]),
  ];
}

/** The ports of shard `index`: the base ports + 2·index (0 stays 0: a free port). */
export function shardPort(base: number, index: number): number {
  return base === 0 ? 0 : base + 2 * index;
}

class PlaygroundSetupError extends Error {
  override name = "PlaygroundSetupError";
}

async function kubeRequest(target: KubeTarget, method: string, route: string, body?: unknown) {
  return sendKubeRequest(target, {
    method,
    path: route,
    body,
    contentType: method === "PATCH" ? "application/merge-patch+json" : "application/json",
  });
}

async function expectStatus(
  response: { status: number; text: string },
  allowed: number[],
  what: string,
): Promise<void> {
  if (allowed.includes(response.status)) return;
  throw new PlaygroundSetupError(`${what}: HTTP ${response.status} ${response.text.slice(0, 300)}`);
}

/** Namespace `default` and the credentials Secret the examples rely on (created or brought up to date). */
async function ensureCredentials(
  target: KubeTarget,
  cloud: { url: string; apiKey: string; projectId: string },
): Promise<void> {
  const namespace = await kubeRequest(target, "POST", "/api/v1/namespaces", {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: CREDENTIALS_NAMESPACE },
  });
  await expectStatus(namespace, [200, 201, 409], `creating namespace ${CREDENTIALS_NAMESPACE}`);
  const stringData = { apiKey: cloud.apiKey, projectId: cloud.projectId, apiUrl: cloud.url };
  const data = Object.fromEntries(
    Object.entries(stringData).map(([key, value]) => [key, Buffer.from(value).toString("base64")]),
  );
  const secretPath = `/api/v1/namespaces/${CREDENTIALS_NAMESPACE}/secrets`;
  const created = await kubeRequest(target, "POST", secretPath, {
    apiVersion: "v1",
    kind: "Secret",
    type: "Opaque",
    metadata: { name: CREDENTIALS_SECRET, namespace: CREDENTIALS_NAMESPACE, labels: { [SECRET_WATCH_LABEL]: "true" } },
    data,
  });
  if (created.status === 409) {
    // Kept from an earlier run (state dir): the simulator may have new keys, so bring the data up to date.
    const patched = await kubeRequest(target, "PATCH", `${secretPath}/${CREDENTIALS_SECRET}`, {
      metadata: { labels: { [SECRET_WATCH_LABEL]: "true" } },
      data,
    });
    await expectStatus(patched, [200], `updating Secret ${CREDENTIALS_NAMESPACE}/${CREDENTIALS_SECRET}`);
    return;
  }
  await expectStatus(created, [200, 201], `creating Secret ${CREDENTIALS_NAMESPACE}/${CREDENTIALS_SECRET}`);
}

/** One pino JSON line as `HH:MM:SS LEVEL message key=value …`; other lines unchanged. */
export function formatOperatorLogLine(line: string): string {
  return formatLogLine(line, { clock: true });
}

function forwardLines(stream: NodeJS.ReadableStream, write: (line: string) => void): void {
  createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY }).on("line", write);
}

function startOperator(args: string[], label: string): ChildProcess {
  const child = spawn(process.execPath, [...OPERATOR_NODE_FLAGS, MAIN_SCRIPT, ...args], {
    cwd: REPO_ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    // POD_NAME names the replica in its Lease and in the Events it writes (reportingInstance).
    env: { ...operatorEnvironment(), POD_NAME: `playground-${label}` },
    // Its own process group: Ctrl-C reaches only the playground, which then stops the operator first.
    detached: true,
  });
  const killOnExit = (): void => {
    child.kill("SIGKILL");
  };
  process.once("exit", killOnExit);
  child.once("exit", () => process.off("exit", killOnExit));
  if (child.stdout !== null) {
    forwardLines(child.stdout, (line) => process.stdout.write(`[${label}] ${formatOperatorLogLine(line)}\n`));
  }
  if (child.stderr !== null) {
    forwardLines(child.stderr, (line) => process.stderr.write(`[${label}] ${formatOperatorLogLine(line)}\n`));
  }
  return child;
}

/** SIGTERM, then SIGKILL if it has not exited in time. Resolves once the child is gone. */
async function stopOperator(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), OPERATOR_STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

const PARENT_CHECK_INTERVAL_MS = 1000;

/**
 * Resolves on SIGINT or SIGTERM, or when the process that started the playground is gone (it was re-parented):
 * a test runner killed abruptly must not leave servers behind.
 */
function waitForStop(): Promise<NodeJS.Signals | "parent exited"> {
  return new Promise((resolve) => {
    const initialParent = process.ppid;
    const finish = (reason: NodeJS.Signals | "parent exited"): void => {
      process.off("SIGINT", finish);
      process.off("SIGTERM", finish);
      clearInterval(parentCheck);
      resolve(reason);
    };
    const parentCheck = setInterval(() => {
      if (process.ppid !== initialParent) finish("parent exited");
    }, PARENT_CHECK_INTERVAL_MS);
    parentCheck.unref(); // the servers keep the process alive, not this check
    process.on("SIGINT", finish);
    process.on("SIGTERM", finish);
  });
}

function describeListenError(error: unknown, options: PlaygroundOptions): string {
  const code = typeof error === "object" && error !== null && "code" in error ? error.code : undefined;
  if (code === "EADDRINUSE") {
    return `a port is already in use (kube API ${options.port}, cloud ${options.cloudPort}): is another playground running? Pick others with --port and --cloud-port, or 0 for free ones`;
  }
  return error instanceof Error ? error.message : String(error);
}

/** A path as people type it: relative below the working directory, absolute elsewhere. */
function displayPath(target: string): string {
  const relative = path.relative(process.cwd(), target);
  return relative === "" || relative.startsWith("..") || path.isAbsolute(relative) ? target : relative;
}

function nextSteps(options: {
  stateDir: string;
  kubeUrl: string;
  /** "Kubernetes API test double" or the real control plane's description. */
  kubeLabel: string;
  /** kubectl of the control plane's release, when there is one. */
  kubectl: string | undefined;
  cloud: { url: string; projectId: string };
  /** The simulator's user, who signs in with gpuvmctl. */
  user: { email: string; password: string };
  profile: SimulatorProfile;
  operatorCommand: string | undefined;
}): string {
  const kubeconfig = displayPath(path.join(options.stateDir, "kubeconfig"));
  const cloudFile = displayPath(path.join(options.stateDir, "cloud.json"));
  const lines = [
    "",
    `${options.kubeLabel}: ${options.kubeUrl}   (kubeconfig: ${kubeconfig})`,
    `GPU cloud API simulator:    ${options.cloud.url}   (API key and project: ${cloudFile})`,
    ...(options.profile === "contract"
      ? []
      : [`Simulator profile:          ${options.profile} (only the spec's endpoints; see docs/simulator.md)`]),
    `Credentials Secret:         ${CREDENTIALS_NAMESPACE}/${CREDENTIALS_SECRET} (apiKey, projectId, apiUrl)`,
    "",
  ];
  if (options.kubectl !== undefined) {
    lines.push(`kubectl of the same release: ${options.kubectl} (any kubectl within one minor version works too)`, "");
  }
  if (options.operatorCommand !== undefined) {
    lines.push("The operator is not running. Start it (and stop/restart it at will) in another shell:", "");
    lines.push(`  ${options.operatorCommand}`, "");
  }
  const requirePath = path.isAbsolute(cloudFile) ? cloudFile : `./${cloudFile}`;
  const apiKey = `"$(node -p 'require(${JSON.stringify(requirePath)}).apiKey')"`;
  const { email, password } = options.user;
  lines.push(
    "Next, in another shell:",
    "",
    `  export KUBECONFIG=${path.isAbsolute(kubeconfig) ? kubeconfig : `$PWD/${kubeconfig}`}`,
    "  kubectl apply -f examples/",
    "  kubectl get gpucloud                 # every kind with READY, SYNCED and REASON",
    "  kubectl get gvm -w                   # kubectl watches one resource type at a time",
    "  kubectl wait --for=condition=Ready gvm/trainer --timeout=2m",
    "  kubectl scale gpool/workers --replicas 4 && kubectl get gpool -w",
    `  curl -H "Authorization: Bearer $(node -p 'require(${JSON.stringify(requirePath)}).apiKey')" ${options.cloud.url}/projects/${options.cloud.projectId}/vms`,
    "  kubectl delete -f examples/",
    "",
    "gpuvmctl against the simulated cloud: sign in as its user (the password is asked for) ...",
    "",
    `  npx gpuvmctl login --api-url ${options.cloud.url} --email ${shellQuote(email)}   # password: ${password}`,
    "",
    "... or use the project's API key, without a sign-in:",
    "",
    `  export GPUCLOUD_API_URL=${options.cloud.url} GPUCLOUD_API_KEY=${apiKey}`,
    "",
    "  npx gpuvmctl vms list                # the cloud's VMs",
    "  npx gpuvmctl usage --group-by type   # GPU-hours so far (the playground publishes usage as it accrues)",
    "",
    "Ctrl-C stops everything; the state stays in the state directory for the next start.",
    READY_LINE,
    "",
  );
  return lines.join("\n");
}

export async function main(argv: string[]): Promise<number> {
  const options = await flagsOrExitCode("playground", HELP, () => parsePlaygroundArgs(argv));
  if (typeof options === "number") return options;
  return runPlayground(options);
}

async function runPlayground(options: PlaygroundOptions): Promise<number> {
  // Imported here so that `--help` and flag errors answer at once.
  const { startSimulator } = await import("../../simulator/index.ts");
  // Owner only: the directory holds the kubeconfig, cloud.json and state files with the API key and a password.
  await mkdir(options.stateDir, { recursive: true, mode: 0o700 });
  const kubeconfigPath = path.join(options.stateDir, "kubeconfig");
  const closers: (() => Promise<void>)[] = [];
  const closeAll = async (): Promise<void> => {
    for (const close of closers.reverse()) await close();
  };
  const operators: ChildProcess[] = [];
  let stopping = false;
  const stopRequested = waitForStop();
  try {
    const simulator = await startSimulator({
      port: options.cloudPort,
      latencyMs: options.latencyMs,
      profile: options.profile,
      stateFile: path.join(options.stateDir, "cloud-state.json"),
      // A day is long to wait for in a playground: GPU-hours show as they accrue (`gpuvmctl usage`).
      usagePublication: "live",
    });
    closers.push(() => simulator.close());
    const kube = options.kube === "real" ? await startRealKube(options) : await startDoubleKube(options);
    closers.push(kube.close);
    await writeFile(kubeconfigPath, kube.kubeconfigYaml, { mode: 0o600 });
    await chmod(kubeconfigPath, 0o600);
    const cloud = { url: simulator.url, apiKey: simulator.apiKey, projectId: simulator.projectId };
    await ensureCredentials(kube.target, cloud);
    const cloudFile = path.join(options.stateDir, "cloud.json");
    await writeFile(cloudFile, `${JSON.stringify(cloud, null, 2)}\n`, { mode: 0o600 });
    await chmod(cloudFile, 0o600); // the file may predate this run with looser permissions
    const operatorKubeconfigPath =
      kube.operatorKubeconfigYaml === undefined ? kubeconfigPath : path.join(options.stateDir, "operator.kubeconfig");
    if (kube.operatorKubeconfigYaml !== undefined) {
      await writeFile(operatorKubeconfigPath, kube.operatorKubeconfigYaml, { mode: 0o600 });
      await chmod(operatorKubeconfigPath, 0o600);
    }
    const shardCount = options.shards;
    const argsOf = (index: number): string[] =>
      operatorArgs({
        kubeconfigPath: operatorKubeconfigPath,
        apiUrl: simulator.url,
        metricsPort: shardPort(options.metricsPort, index),
        healthPort: shardPort(options.healthPort, index),
        latencyMs: options.latencyMs,
        leaderElectionNamespace: kube.leaderElectionNamespace,
        ...(shardCount > 1 ? { shard: { index, count: shardCount } } : {}),
      });
    const commandOf = (index: number): string => operatorCommandLine(argsOf(index));
    const commandLine = Array.from({ length: shardCount }, (_, index) => commandOf(index)).join("\n  ");
    if (!options.withoutOperator) {
      for (let index = 0; index < shardCount; index++) {
        const label = shardCount > 1 ? `shard-${index}` : "operator";
        const operator = startOperator(argsOf(index), label);
        operators.push(operator);
        operator.on("exit", (code, exitSignal) => {
          if (stopping) return;
          process.stderr.write(
            `[playground] ${label} exited (${exitSignal ?? `code ${code}`}); the servers keep running. Run it again with:\n  ${commandOf(index)}\n`,
          );
        });
      }
    }
    process.stdout.write(
      nextSteps({
        stateDir: options.stateDir,
        kubeUrl: kube.target.url,
        kubeLabel: kube.label,
        kubectl: kube.kubectl,
        cloud,
        user: simulator.user,
        profile: options.profile,
        operatorCommand: options.withoutOperator ? commandLine : undefined,
      }),
    );
  } catch (error) {
    process.stderr.write(`gpuvm-operator playground: ${describeListenError(error, options)}\n`);
    await closeAll();
    return 1;
  }
  const received = await stopRequested;
  stopping = true;
  process.stdout.write(`\n[playground] ${received}: stopping the operator, then the servers…\n`);
  await Promise.all(operators.map((operator) => stopOperator(operator)));
  await closeAll();
  process.stdout.write("[playground] stopped.\n");
  return 0;
}

interface PlaygroundKube {
  target: KubeTarget;
  label: string;
  kubeconfigYaml: string;
  /** A kubeconfig with the operator's own credentials (the real control plane); the user's kubeconfig otherwise. */
  operatorKubeconfigYaml?: string;
  leaderElectionNamespace?: string;
  kubectl?: string;
  close: () => Promise<void>;
}

async function startDoubleKube(options: PlaygroundOptions): Promise<PlaygroundKube> {
  const { startKubeDouble } = await import("../../kube-double/index.ts");
  const kube = await startKubeDouble({
    port: options.port,
    crdDir: path.join(REPO_ROOT, "crds"),
    stateFile: path.join(options.stateDir, "cluster-state.json"),
  });
  return {
    target: { url: kube.url, token: "playground" },
    label: "Kubernetes API test double",
    kubeconfigYaml: kube.kubeconfigYaml(),
    close: () => kube.close(),
  };
}

/** Thirty days: the playground may run for long; a restart asks for a new token. */
const OPERATOR_TOKEN_SECONDS = 30 * 24 * 3600;

async function startRealKube(options: PlaygroundOptions): Promise<PlaygroundKube> {
  const { builtKubeBinaries } = await import("../../control-plane/binaries.ts");
  const { startControlPlane } = await import("../../control-plane/control-plane.ts");
  const { installOperatorIdentity } = await import("../../control-plane/operator-identity.ts");
  const built = await builtKubeBinaries();
  if (built === undefined) {
    throw new PlaygroundSetupError(
      "--kube real needs the control plane binaries: run `npm run kube:build` first (needs Go 1.26+ on PATH)",
    );
  }
  const plane = await startControlPlane({
    bin: built.bin,
    dataDir: path.join(options.stateDir, "kube"),
    keepData: true,
    port: options.port,
    crdDirs: [path.join(REPO_ROOT, "crds")],
    log: (line) => process.stdout.write(`[playground] ${line}\n`),
  });
  try {
    const account = await installOperatorIdentity(plane.admin);
    const token = await plane.serviceAccountToken(account.namespace, account.name, OPERATOR_TOKEN_SECONDS);
    return {
      target: plane.admin,
      label: `Kubernetes ${built.versions.kubernetes} (kube-apiserver, real)`,
      kubeconfigYaml: plane.kubeconfigYaml(),
      operatorKubeconfigYaml: plane.kubeconfigYaml({ token, user: `${account.namespace}:${account.name}` }),
      leaderElectionNamespace: account.namespace,
      kubectl: built.bin("kubectl"),
      close: () => plane.close(),
    };
  } catch (error) {
    await plane.close();
    throw error;
  }
}
