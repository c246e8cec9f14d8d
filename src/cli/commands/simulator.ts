// `gpuvm-operator simulator`: run the GPU cloud API simulator until SIGINT/SIGTERM.
import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { z } from "zod";
import { VM_TYPES } from "../../cloud/wire.ts";
import { LOCATIONS } from "../../simulator/catalogue.ts";
import { FaultConfigSchema } from "../../simulator/faults.ts";
import type { SimulatorOptions } from "../../simulator/index.ts";
import { isSimulatorProfile, SIMULATOR_PROFILES } from "../../simulator/profiles.ts";
import { USAGE_PUBLICATIONS } from "../../simulator/usage-publication.ts";
import { serveUntilSignal } from "../serve-until-signal.ts";
import { flagsOrExitCode, parseFlags, UsageError } from "../usage.ts";

const HELP = `Usage: gpuvm-operator simulator [flags]

Runs the GPU cloud API simulator (API under /v0.1, admin API under /_sim).

Flags:
  --profile <name>        contract (default): the spec and every endpoint of contract-decisions.md;
                          seed-only: only the endpoints the spec shows (see docs/simulator.md)
  --operation-retention-ms <n>
                          how long a finished operation stays listed and readable
                          (default: kept with contract, 60000 with seed-only)
  --port <n>              port to listen on (default 8070; 0 picks a free one)
  --host <addr>           address to listen on (default 127.0.0.1)
  --api-key <key>         project API key (default: a fixed key, printed at start)
  --user <email:password> the user that can sign in with a password
  --latency-ms <n>        how long operations stay IN_PROGRESS (default 2000; 0 = next tick)
  --state-file <path>     keep state in this JSON file (written atomically, reloaded at start)
  --config <file.json>    options file (see docs/simulator.md); flags win over it
  --rate-limit <r/b|off>  per-credential rate limit: requests/s and burst, e.g. 20/40 (default), or off
  --max-request-bytes <n> request bodies above this are refused with 413 (default 1048576)
  --help                  show this help
`;

/** The config file: the programmatic options in JSON (no clock, no randomness). */
const ConfigFile = z.strictObject({
  profile: z.enum(SIMULATOR_PROFILES).optional(),
  operationRetentionMs: z.number().int().min(0).optional(),
  port: z.number().int().min(0).max(65535).optional(),
  host: z.string().optional(),
  apiKey: z.string().min(8).optional(),
  projectId: z.string().min(1).optional(),
  user: z.strictObject({ email: z.string().min(3), password: z.string().min(1) }).optional(),
  latencyMs: z.number().int().min(0).optional(),
  tokenTtlSeconds: z.number().int().min(1).optional(),
  usageRefreshDelayMs: z.number().int().min(0).optional(),
  usagePublication: z.enum(USAGE_PUBLICATIONS).optional(),
  rateLimit: z
    .union([z.literal(false), z.strictObject({ ratePerSec: z.number().positive(), burst: z.number().int().min(1) })])
    .optional(),
  faults: FaultConfigSchema.optional(),
  capacity: z.partialRecord(z.enum(LOCATIONS), z.partialRecord(z.enum(VM_TYPES), z.number().int().min(0))).optional(),
  paymentMethodValid: z.boolean().optional(),
  duplicateNames: z.enum(["conflict", "operation"]).optional(),
  stateFile: z.string().optional(),
  logger: z.boolean().optional(),
  maxRequestBytes: z.number().int().min(1024).optional(),
  /** The node-join emulation's workload clusters: each a kubeconfig file (relative to the config file). */
  nodeJoin: z
    .strictObject({
      clusters: z.array(z.strictObject({ name: z.string().min(1), kubeconfigFile: z.string().min(1) })).optional(),
      discoveryTimeoutMs: z.number().int().min(0).optional(),
      retryIntervalMs: z.number().int().min(1).optional(),
    })
    .optional(),
});

function parseInteger(flag: string, value: string, min: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min)
    throw new UsageError(`--${flag}: expected a whole number ≥ ${min}, got '${value}'`);
  return n;
}

export function parseRateLimit(value: string): SimulatorOptions["rateLimit"] {
  if (value === "off" || value === "false" || value === "0") return false;
  const match = /^(\d+(?:\.\d+)?)(?:\/(\d+))?$/.exec(value);
  if (match === null) throw new UsageError(`--rate-limit: expected <rate>/<burst> (e.g. 20/40) or off, got '${value}'`);
  const ratePerSec = Number(match[1]);
  const burst = match[2] === undefined ? Math.max(1, Math.ceil(ratePerSec * 2)) : Number(match[2]);
  if (ratePerSec <= 0 || burst < 1) throw new UsageError("--rate-limit: rate and burst must be positive");
  return { ratePerSec, burst };
}

async function readConfig(path: string): Promise<SimulatorOptions> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(path, "utf8"));
  } catch (error) {
    throw new UsageError(`--config: cannot read ${path} as JSON`, { cause: error });
  }
  const result = ConfigFile.safeParse(parsed);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new UsageError(`--config ${path}: ${issue?.path.join(".") || "file"}: ${issue?.message ?? "invalid"}`);
  }
  const { nodeJoin, ...options } = result.data;
  if (nodeJoin === undefined) return options as SimulatorOptions;
  const clusters = [];
  for (const cluster of nodeJoin.clusters ?? []) {
    const file = resolve(dirname(path), cluster.kubeconfigFile);
    const kubeconfig = await readFile(file, "utf8").catch((error: unknown) => {
      throw new UsageError(`--config ${path}: nodeJoin cluster ${cluster.name}: cannot read ${file}`, { cause: error });
    });
    clusters.push({ name: cluster.name, kubeconfig });
  }
  return { ...(options as SimulatorOptions), nodeJoin: { ...nodeJoin, clusters } };
}

/** Flags (and the config file they name) → simulator options. */
export async function parseSimulatorArgs(argv: string[]): Promise<SimulatorOptions | "help"> {
  const { values } = parseFlags({
    args: argv,
    options: {
      profile: { type: "string" },
      "operation-retention-ms": { type: "string" },
      port: { type: "string" },
      host: { type: "string" },
      "api-key": { type: "string" },
      user: { type: "string" },
      "latency-ms": { type: "string" },
      "state-file": { type: "string" },
      config: { type: "string" },
      "rate-limit": { type: "string" },
      "max-request-bytes": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help === true) return "help";
  const options: SimulatorOptions = values.config === undefined ? {} : await readConfig(values.config);
  if (values.profile !== undefined) {
    if (!isSimulatorProfile(values.profile)) {
      throw new UsageError(`--profile: expected one of ${SIMULATOR_PROFILES.join(", ")}, got '${values.profile}'`);
    }
    options.profile = values.profile;
  }
  if (values["operation-retention-ms"] !== undefined) {
    options.operationRetentionMs = parseInteger("operation-retention-ms", values["operation-retention-ms"], 0);
  }
  if (values.port !== undefined) options.port = parseInteger("port", values.port, 0);
  if (options.port !== undefined && options.port > 65535) throw new UsageError("--port: at most 65535");
  if (values.host !== undefined) options.host = values.host;
  if (values["api-key"] !== undefined) {
    if (values["api-key"].length < 8) throw new UsageError("--api-key: at least 8 characters");
    options.apiKey = values["api-key"];
  }
  if (values.user !== undefined) {
    const colon = values.user.indexOf(":");
    if (colon <= 0 || colon === values.user.length - 1) throw new UsageError("--user: expected email:password");
    options.user = { email: values.user.slice(0, colon), password: values.user.slice(colon + 1) };
  }
  if (values["latency-ms"] !== undefined) options.latencyMs = parseInteger("latency-ms", values["latency-ms"], 0);
  if (values["state-file"] !== undefined) options.stateFile = values["state-file"];
  if (values["rate-limit"] !== undefined) options.rateLimit = parseRateLimit(values["rate-limit"]);
  if (values["max-request-bytes"] !== undefined) {
    options.maxRequestBytes = parseInteger("max-request-bytes", values["max-request-bytes"], 1024);
  }
  return options;
}

export async function main(argv: string[]): Promise<number> {
  const options = await flagsOrExitCode("simulator", HELP, () => parseSimulatorArgs(argv));
  if (typeof options === "number") return options;
  const { startSimulator } = await import("../../simulator/index.ts");
  let simulator: Awaited<ReturnType<typeof startSimulator>>;
  try {
    simulator = await startSimulator(options);
  } catch (error) {
    const { code, address, port } = error as NodeJS.ErrnoException & { address?: string; port?: number };
    if (code !== "EADDRINUSE" && code !== "EACCES" && code !== "EADDRNOTAVAIL") throw error;
    process.stderr.write(
      `gpuvm-operator simulator: cannot listen on ${address}:${port} (${code}): choose another port with --port (0 picks a free one) or another address with --host\n`,
    );
    return 1;
  }
  process.stdout.write(
    [
      `GPU cloud API simulator listening (profile ${simulator.profile})`,
      `  base URL:   ${simulator.url}`,
      `  admin API:  ${simulator.adminUrl}`,
      `  API key:    ${simulator.apiKey}`,
      `  project id: ${simulator.projectId}`,
      `  user:       ${simulator.user.email} (password: ${simulator.user.password})`,
      "",
    ].join("\n"),
  );
  await serveUntilSignal(simulator);
  process.stdout.write("simulator stopped\n");
  return 0;
}
