// The operator as the playground runs it: its arguments against the playground's servers (one replica, or one per
// shard), the same command as printed for a shell, and the child process itself (started in its own process
// group, its log lines formatted for people, stopped with SIGTERM and then SIGKILL).
import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { createInterface } from "node:readline";
import { formatLogLine } from "../../runtime/logging.ts";
import { shellQuote } from "../../util/shell-quote.ts";
import { OPERATOR_NODE_FLAGS, operatorEnvironment } from "../node-flags.ts";
import { CREDENTIALS_NAMESPACE, CREDENTIALS_SECRET, OPERATOR_NAMESPACE, REPO_ROOT } from "./conventions.ts";

const MAIN_SCRIPT = path.join(REPO_ROOT, "src/cli/main.ts");
const OPERATOR_STOP_TIMEOUT_MS = 15_000;

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
    "--claims-namespace",
    OPERATOR_NAMESPACE,
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

/**
 * The operator's command as printed for a shell: through `npm run operator` (run from the checkout), so that it
 * runs on the Node 24 that `npm ci` installed and not on whatever `node` the shell finds first.
 */
export function operatorCommandLine(args: readonly string[]): string {
  return ["npm", "run", "operator", "--", ...args.slice(args[0] === "run" ? 1 : 0)].map(shellQuote).join(" ");
}

/** One pino JSON line as `HH:MM:SS LEVEL message key=value …`; other lines unchanged. */
export function formatOperatorLogLine(line: string): string {
  return formatLogLine(line, { clock: true });
}

function forwardLines(stream: NodeJS.ReadableStream, write: (line: string) => void): void {
  createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY }).on("line", write);
}

export function startOperator(args: string[], label: string): ChildProcess {
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
export async function stopOperator(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), OPERATOR_STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}
