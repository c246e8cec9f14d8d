// Operator configuration from flags and environment (config-flags.ts lists the flags, config-values.ts reads their
// values). Precedence: flag > env > default. A flag given twice takes its last value; only list flags
// (--watch-namespace, --allowed-api-urls) accumulate. Parsing never throws: it returns a result the run command
// turns into a message and exit code 2.
import { envNameOf, flagSpecOf } from "./config-flags.ts";
import {
  apiUrlList,
  type BindAddress,
  bindAddress,
  bool,
  byteSize,
  ConfigError,
  dnsLabel,
  duration,
  durationOrOff,
  type FlagValue,
  LOG_FORMATS,
  LOG_LEVELS,
  LOG_TIME_FORMATS,
  type LogFormat,
  type LogLevel,
  type LogTimeFormat,
  namespaces,
  nonNegativeInt,
  OPERATION_POLLINGS,
  type OperationPolling,
  oneOf,
  positiveInt,
  secretRef,
} from "./config-values.ts";
import { formatDuration } from "./time.ts";

export interface OperatorConfig {
  /** Explicit kubeconfig path; undefined → $KUBECONFIG, then ~/.kube/config, then in-cluster. */
  kubeconfig: string | undefined;
  /** Namespaces to watch; empty → all namespaces. */
  watchNamespaces: string[];
  leaderElect: boolean;
  leaderElectionNamespace: string;
  leaderElectionId: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  /** undefined when disabled ("0"). */
  metricsBindAddress: BindAddress | undefined;
  healthProbeBindAddress: BindAddress | undefined;
  maxConcurrentReconciles: number;
  syncPeriodMs: number;
  /**
   * How often each cloud account lists every family it manages, to see changes made outside the operator (a VM
   * stopped with another client, a disk resized, a resource deleted): one list per family, account and interval,
   * never longer than the sync period. What changed wakes its object.
   */
  pollIntervalMs: number;
  /** How often a (VM type, location) with objects waiting for its capacity is probed (docs/budgets.md). */
  capacityProbeIntervalMs: number;
  gracefulShutdownTimeoutMs: number;
  /** GPU cloud API base URL (…/v0.1); undefined → the credentials Secret's `apiUrl` key decides. */
  apiUrl: string | undefined;
  /**
   * The API URLs a credentials Secret may name (each allows the paths below it): --allowed-api-urls plus
   * --api-url. Empty: a Secret's apiUrl is never used.
   */
  allowedApiUrls: string[];
  /** The request timeout: the deadline of one cloud call, its retries and waits included. */
  apiTimeoutMs: number;
  /** Cloud answers longer than this are cut off while they stream in. */
  apiMaxResponseBytes: number;
  /** Reconciles per controller that may talk to one cloud account at once while it is healthy. */
  apiAccountConcurrency: number;
  /** Requests per second per credential: the ceiling of the adaptive rate. */
  apiRateLimit: number;
  /** Requests per credential sent at once before pacing. */
  apiBurst: number;
  /** Reconciles per second over all managed controllers; 0: no limit. */
  maxReconcileRate: number;
  /** `batched`: one list per family per interval; `per-operation`: one read per operation per interval. */
  operationPolling: OperationPolling;
  /** This replica reconciles the objects whose hash of namespace/name falls in its shard. */
  shard: { index: number; count: number };
  /** Default credentials Secret for objects that name none. */
  credentialsSecret: { namespace: string; name: string } | undefined;
  /**
   * A label selector of the namespaces whose objects may use the default credentials Secret; undefined: every
   * watched namespace (that has no credentials Secret of its own).
   */
  defaultCredentialsNamespaces: string | undefined;
  /** Where the GpuCloudClaims live (the operator's own namespace, which tenants cannot write). */
  claimsNamespace: string;
  /** Whether an Observe object may mirror a cloud resource that an object of another namespace manages. */
  allowCrossNamespaceObserve: boolean;
  logLevel: LogLevel;
  logFormat: LogFormat;
  logTimeFormat: LogTimeFormat;
  operationPollIntervalMs: number;
  /** How long `Manager.start()` waits for the informer caches before it fails; 0 → forever. */
  cacheSyncTimeoutMs: number;
}

export type ConfigResult =
  | { kind: "config"; config: OperatorConfig }
  | { kind: "help" }
  | { kind: "error"; message: string };

/** Reads flags (argv without the command name) and environment into a typed configuration. */
export function parseConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): ConfigResult {
  try {
    const raw = collectRaw(argv);
    if (raw === "help") return { kind: "help" };
    const value = (name: string): string => {
      const spec = flagSpecOf(name);
      const fromFlags = raw.get(name);
      // A list flag accumulates; a scalar given twice takes the last value (as Go's flag package does).
      if (fromFlags !== undefined && fromFlags.length > 0)
        return spec.type === "list" ? fromFlags.join(",") : (fromFlags.at(-1) ?? "");
      const fromEnv = env[envNameOf(name)] ?? (spec.fallbackEnv ? env[spec.fallbackEnv] : undefined);
      return fromEnv !== undefined && fromEnv !== "" ? fromEnv : spec.default;
    };
    return { kind: "config", config: buildConfig(value) };
  } catch (error) {
    if (error instanceof ConfigError) return { kind: "error", message: error.message };
    throw error;
  }
}

function collectRaw(argv: readonly string[]): Map<string, string[]> | "help" {
  const raw = new Map<string, string[]>();
  for (let index = 0; index < argv.length; index++) {
    const argument = argv[index] ?? "";
    if (argument === "--help" || argument === "-h") return "help";
    if (!argument.startsWith("--")) throw new ConfigError(`unexpected argument "${argument}" (flags start with --)`);
    const equals = argument.indexOf("=");
    const name = argument.slice(2, equals === -1 ? undefined : equals);
    const spec = flagSpecOf(name);
    let flagValue: string;
    if (equals !== -1) flagValue = argument.slice(equals + 1);
    else if (spec.type === "bool") flagValue = "true";
    else {
      const next = argv[index + 1];
      if (next === undefined || next.startsWith("--")) throw new ConfigError(`flag --${name} needs a value`);
      flagValue = next;
      index++;
    }
    raw.set(name, [...(raw.get(name) ?? []), flagValue]);
  }
  return raw;
}

function buildConfig(value: FlagValue): OperatorConfig {
  const leaseDurationMs = duration("leader-election-lease-duration", value);
  const renewDeadlineMs = duration("leader-election-renew-deadline", value);
  const retryPeriodMs = duration("leader-election-retry-period", value);
  if (!(leaseDurationMs > renewDeadlineMs && renewDeadlineMs > retryPeriodMs)) {
    throw new ConfigError(
      `leader election needs lease duration (${formatDuration(leaseDurationMs)}) > renew deadline (${formatDuration(renewDeadlineMs)}) > retry period (${formatDuration(retryPeriodMs)})`,
    );
  }
  const logLevel = value("log-level");
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new ConfigError(`--log-level: "${logLevel}" is not one of ${LOG_LEVELS.join(", ")}`);
  }
  const logFormat = oneOf("log-format", value("log-format"), LOG_FORMATS);
  const logTimeFormat = oneOf("log-time-format", value("log-time-format"), LOG_TIME_FORMATS);
  const apiUrl = value("api-url");
  if (apiUrl !== "" && !URL.canParse(apiUrl)) throw new ConfigError(`--api-url: "${apiUrl}" is not a URL`);
  const allowedApiUrls = apiUrlList("allowed-api-urls", value("allowed-api-urls"));
  if (apiUrl !== "") allowedApiUrls.push(...apiUrlList("api-url", apiUrl));
  const maxConcurrentReconciles = positiveInt("max-concurrent-reconciles", value);
  const accountConcurrency = nonNegativeInt("api-account-concurrency", value);
  const apiRateLimit = Number(value("api-rate-limit"));
  if (!Number.isFinite(apiRateLimit) || apiRateLimit <= 0) {
    throw new ConfigError(`--api-rate-limit: expected a positive number, got "${value("api-rate-limit")}"`);
  }
  const maxReconcileRate = Number(value("max-reconcile-rate"));
  if (!Number.isFinite(maxReconcileRate) || maxReconcileRate < 0) {
    throw new ConfigError(
      `--max-reconcile-rate: expected 0 or a positive number, got "${value("max-reconcile-rate")}"`,
    );
  }
  return {
    kubeconfig: value("kubeconfig") || undefined,
    watchNamespaces: namespaces(value("watch-namespace")),
    leaderElect: bool("leader-elect", value),
    leaderElectionNamespace: dnsLabel("leader-election-namespace", value("leader-election-namespace")),
    leaderElectionId: value("leader-election-id"),
    leaseDurationMs,
    renewDeadlineMs,
    retryPeriodMs,
    metricsBindAddress: bindAddress("metrics-bind-address", value("metrics-bind-address")),
    healthProbeBindAddress: bindAddress("health-probe-bind-address", value("health-probe-bind-address")),
    maxConcurrentReconciles,
    syncPeriodMs: duration("sync-period", value),
    pollIntervalMs: duration("poll-interval", value),
    capacityProbeIntervalMs: duration("capacity-probe-interval", value),
    gracefulShutdownTimeoutMs: duration("graceful-shutdown-timeout", value),
    apiUrl: apiUrl || undefined,
    allowedApiUrls: [...new Set(allowedApiUrls)],
    apiRateLimit,
    apiBurst: positiveInt("api-burst", value),
    maxReconcileRate,
    operationPolling: oneOf("operation-polling", value("operation-polling"), OPERATION_POLLINGS),
    shard: shardOf(value),
    apiTimeoutMs: duration("api-timeout", value),
    apiMaxResponseBytes: byteSize("api-max-response-size", value("api-max-response-size")),
    apiAccountConcurrency: accountConcurrency === 0 ? Math.max(1, maxConcurrentReconciles - 1) : accountConcurrency,
    credentialsSecret: secretRef(value("credentials-secret")),
    defaultCredentialsNamespaces: value("default-credentials-namespaces") || undefined,
    claimsNamespace: dnsLabel("claims-namespace", value("claims-namespace") || value("leader-election-namespace")),
    allowCrossNamespaceObserve: bool("allow-cross-namespace-observe", value),
    logLevel: logLevel as LogLevel,
    logFormat,
    logTimeFormat,
    operationPollIntervalMs: duration("operation-poll-interval", value),
    cacheSyncTimeoutMs: durationOrOff("cache-sync-timeout", value),
  };
}

function shardOf(value: FlagValue): { index: number; count: number } {
  const count = positiveInt("shard-count", value);
  const text = value("shard-index");
  const index = Number(text);
  if (!Number.isInteger(index) || index < 0 || index >= count) {
    throw new ConfigError(
      `--shard-index: expected a whole number from 0 to ${count - 1} (--shard-count ${count}), got "${text}"`,
    );
  }
  return { index, count };
}
