// `gpuvm-operator playground` (`npm start`): the GPU cloud API simulator, a Kubernetes API (the test double, or
// with `--kube real` a real control plane built by `npm run kube:build`) and the operator on one machine, so that
// `kubectl apply -f examples/` works without a cluster or a cloud account. The operator runs as a child process so
// that it can be stopped and restarted on its own (../playground/operator-process.ts); on the real control plane it
// runs as deploy/ installs it (../playground/kube.ts).
import type { ChildProcess } from "node:child_process";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { type CapiPlayground, startCapiPlayground } from "../playground/cluster-api.ts";
import { PLAYGROUND_HELP, type PlaygroundOptions, parsePlaygroundArgs } from "../playground/flags.ts";
import { ensureCredentials, startDoubleKube, startRealKube } from "../playground/kube.ts";
import { nextSteps } from "../playground/next-steps.ts";
import {
  operatorArgs,
  operatorCommandLine,
  shardPort,
  startOperator,
  stopOperator,
} from "../playground/operator-process.ts";
import { flagsOrExitCode } from "../usage.ts";

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

export async function main(argv: string[]): Promise<number> {
  const options = await flagsOrExitCode("playground", PLAYGROUND_HELP, () => parsePlaygroundArgs(argv));
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
    let capi: CapiPlayground | undefined;
    await writeFile(kubeconfigPath, kube.kubeconfigYaml, { mode: 0o600 });
    await chmod(kubeconfigPath, 0o600);
    const cloud = { url: simulator.url, apiKey: simulator.apiKey, projectId: simulator.projectId };
    await ensureCredentials(kube.target, cloud);
    const cloudFile = path.join(options.stateDir, "cloud.json");
    await writeFile(cloudFile, `${JSON.stringify(cloud, null, 2)}\n`, { mode: 0o600 });
    await chmod(cloudFile, 0o600); // the file may predate this run with looser permissions
    if (options.capi) {
      // Before the operator: it registers the provider's controllers only where Cluster API is served.
      const real = kube.real;
      if (real === undefined) throw new Error("--capi without the real control plane");
      capi = await startCapiPlayground({
        management: real.plane,
        built: real.built,
        stateDir: options.stateDir,
        workloadPort: options.workloadPort,
        simulatorAdminUrl: simulator.adminUrl,
        log: (line) => process.stdout.write(`[playground] ${line}\n`),
      });
      closers.push(capi.close);
    }
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
        ...(capi !== undefined ? { capi: { workloadKubeconfigPath: capi.workloadKubeconfigPath } } : {}),
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
