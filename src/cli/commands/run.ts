// `gpuvm-operator run`: parse flags and environment, build the Manager, register the four controllers, start,
// and resolve with 0 after SIGTERM/SIGINT once the graceful drain has finished.
import { KubeConfig } from "@kubernetes/client-node/dist/config.js";
import { clusterApiServed, registerControllers } from "../../controllers/index.ts";
import { createLogger, helpText, Manager, parseConfig } from "../../runtime/index.ts";
import { keepEmbedderAllocationRateAboveZero } from "../memory-reducer.ts";
import { applyRuntimeV8Flags } from "../node-flags.ts";

export async function main(argv: string[]): Promise<number> {
  const parsed = parseConfig(argv, process.env);
  if (parsed.kind === "help") {
    process.stdout.write(helpText());
    return 0;
  }
  if (parsed.kind === "error") {
    process.stderr.write(`gpuvm-operator run: ${parsed.message}\n\nRun 'gpuvm-operator run --help' for the flags.\n`);
    return 2;
  }
  const config = parsed.config;
  applyRuntimeV8Flags();
  const logger = createLogger({ level: config.logLevel, format: config.logFormat, timeFormat: config.logTimeFormat });
  const kubeConfig = new KubeConfig();
  try {
    if (config.kubeconfig !== undefined) kubeConfig.loadFromFile(config.kubeconfig);
    else kubeConfig.loadFromDefault();
  } catch (error) {
    process.stderr.write(`gpuvm-operator run: cannot load the kubeconfig: ${(error as Error).message}\n`);
    return 2;
  }
  let exitCode = 0;
  const manager = new Manager({
    kubeConfig,
    config,
    logger,
    handleSignals: true,
    // The first signal drains and resolves main(); a second one means "now".
    exit: (code) => {
      exitCode = code;
      if (code !== 0) process.exit(code);
    },
  });
  // The Cluster API provider's controllers run where Cluster API is installed (checked once: installed later, restart).
  const clusterApi = await clusterApiServed(manager);
  const controllers = registerControllers(manager, { clusterApi });
  logger.info(
    {
      watchNamespaces: config.watchNamespaces,
      apiUrl: config.apiUrl,
      credentialsSecret: config.credentialsSecret,
      clusterApi,
    },
    clusterApi
      ? "starting gpuvm-operator (with the Cluster API provider's controllers)"
      : "starting gpuvm-operator (Cluster API not installed: no GpuCluster, GpuMachine or GpuMachineTemplate controller)",
  );
  // Lets V8 give the pooled heap pages of a quiet operator back (ADR 0034).
  const stopEmbedderAllocations = keepEmbedderAllocationRateAboveZero();
  try {
    await manager.start();
  } catch (error) {
    logger.error({ err: error }, "operator failed to start");
    await manager.stop();
    controllers.stop();
    stopEmbedderAllocations();
    return 1;
  }
  // Informer restarts and leader-election retries wait on unref'd timers: with both servers disabled, a moment
  // when every watch is down would leave nothing to keep the process alive, and it would exit 0 without a word.
  // The process lives until the manager has stopped.
  const keepAlive = setInterval(() => undefined, 60 * 60_000);
  try {
    await manager.wait();
  } finally {
    clearInterval(keepAlive);
  }
  controllers.stop();
  stopEmbedderAllocations();
  return exitCode;
}
