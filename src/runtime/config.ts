// Operator configuration from flags and environment. Flag names follow controller-runtime's conventions; every
// flag has an environment variable `GPUVM_<FLAG_IN_UPPER_SNAKE>`. Precedence: flag > env > default. A flag given
// twice takes its last value; only list flags (--watch-namespace, --allowed-api-urls) accumulate.
// Parsing never throws: it returns a result the run command turns into a message and exit code 2.
import { normalizeApiUrl } from "../util/api-url.ts";
import { DurationError, formatDuration, parseDuration } from "./time.ts";

export type LogLevel = "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";
const LOG_LEVELS: readonly LogLevel[] = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];
/** `json`: one JSON object per line (pino); `text`: `time LEVEL message key=value …` for people. */
export type LogFormat = "json" | "text";
const LOG_FORMATS: readonly LogFormat[] = ["json", "text"];
export type OperationPolling = "batched" | "per-operation";
const OPERATION_POLLINGS: readonly OperationPolling[] = ["batched", "per-operation"];
/** `epoch`: milliseconds since 1970 (pino's default); `iso8601`: `2025-01-31T12:00:00.000Z`. */
export type LogTimeFormat = "epoch" | "iso8601";
const LOG_TIME_FORMATS: readonly LogTimeFormat[] = ["epoch", "iso8601"];

export interface BindAddress {
  host: string;
  port: number;
}

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

type FlagType = "string" | "list" | "bool" | "duration" | "int" | "number";

interface FlagSpec {
  name: string;
  type: FlagType;
  default: string;
  help: string;
  /** Extra env var consulted after GPUVM_<NAME> (e.g. POD_NAMESPACE). */
  fallbackEnv?: string;
}

const FLAGS: readonly FlagSpec[] = [
  {
    name: "kubeconfig",
    type: "string",
    default: "",
    help: "Path to a kubeconfig (else $KUBECONFIG, ~/.kube/config, in-cluster)",
  },
  {
    name: "watch-namespace",
    type: "list",
    default: "",
    help: "Namespace to watch; repeatable or comma-separated (default: all)",
  },
  {
    name: "leader-elect",
    type: "bool",
    default: "false",
    help: "Elect a leader through a coordination.k8s.io Lease; standbys keep caches warm",
  },
  {
    name: "leader-election-namespace",
    type: "string",
    default: "default",
    fallbackEnv: "POD_NAMESPACE",
    help: "Namespace of the Lease; $POD_NAMESPACE when neither flag nor env var is set",
  },
  { name: "leader-election-id", type: "string", default: "gpuvm-operator.gpucloud.dev", help: "Name of the Lease" },
  {
    name: "leader-election-lease-duration",
    type: "duration",
    default: "15s",
    help: "How long a Lease is valid without renewal",
  },
  {
    name: "leader-election-renew-deadline",
    type: "duration",
    default: "10s",
    help: "How long the leader keeps trying to renew before giving up",
  },
  {
    name: "leader-election-retry-period",
    type: "duration",
    default: "2s",
    help: "Interval between Lease acquire/renew attempts",
  },
  { name: "metrics-bind-address", type: "string", default: ":8080", help: "Address of /metrics ('0' disables)" },
  {
    name: "health-probe-bind-address",
    type: "string",
    default: ":8081",
    help: "Address of /healthz and /readyz ('0' disables)",
  },
  {
    name: "max-concurrent-reconciles",
    type: "int",
    default: "32",
    help: "Workers per controller (reconciles wait on the cloud's rate limit and on I/O, not on CPU)",
  },
  {
    name: "sync-period",
    type: "duration",
    default: "10m",
    help: "Periodic resync of every object (jittered; per object: annotation gpucloud.dev/sync-period)",
  },
  {
    name: "poll-interval",
    type: "duration",
    default: "30s",
    help: "How often each cloud account's resources are listed (one list per family: ceil(N/500) calls) to see changes made outside the operator, such as a VM stopped with another client; what changed is corrected or reported at once. At most --sync-period",
  },
  {
    name: "graceful-shutdown-timeout",
    type: "duration",
    default: "30s",
    help: "How long running reconciles may finish after SIGTERM",
  },
  {
    name: "cache-sync-timeout",
    type: "duration",
    default: "2m",
    help: "How long startup waits for the informer caches (e.g. CRDs missing) before exiting non-zero; 0 waits forever",
  },
  { name: "api-url", type: "string", default: "", help: "GPU cloud API base URL, e.g. https://api.example.com/v0.1" },
  {
    name: "allowed-api-urls",
    type: "list",
    default: "",
    help: "API URLs a credentials Secret's apiUrl may name (and paths below them); repeatable or comma-separated; --api-url is always allowed, nothing else by default",
  },
  {
    name: "api-timeout",
    type: "duration",
    default: "10s",
    help: "Request timeout: how long one cloud call may take, retries and waits included",
  },
  {
    name: "api-max-response-size",
    type: "string",
    default: "4Mi",
    help: "Largest cloud answer read (bytes, or with Ki/Mi/Gi); longer ones are cut off while they stream in",
  },
  {
    name: "api-account-concurrency",
    type: "int",
    default: "0",
    help: "Reconciles per controller that may talk to one cloud account at once while it answers well (0: --max-concurrent-reconciles minus one, at least 1); a new, slow or failing account gets one",
  },
  {
    name: "api-rate-limit",
    type: "number",
    default: "20",
    help: "Cloud API requests per second per credential (the server's documented limit); lowered on 429 and regained gradually",
  },
  {
    name: "api-burst",
    type: "int",
    default: "40",
    help: "Cloud API requests per credential sent at once before pacing",
  },
  {
    name: "max-reconcile-rate",
    type: "number",
    default: "0",
    help: "Reconciles per second over all managed controllers together; 0: no limit (Crossplane's --max-reconcile-rate)",
  },
  {
    name: "operation-polling",
    type: "string",
    default: "batched",
    help: "How cloud operations are followed: batched (one list per family per interval) or per-operation (one read of each per interval, as the Terraform provider does; for comparison)",
  },
  {
    name: "shard-count",
    type: "int",
    default: "1",
    help: "Operator replicas sharing the objects: each object belongs to one shard by a stable hash of namespace/name",
  },
  {
    name: "shard-index",
    type: "string",
    default: "0",
    help: "This replica's shard, 0 to shard-count - 1 (with --leader-elect: one Lease per shard)",
  },
  { name: "credentials-secret", type: "string", default: "", help: "Default credentials Secret as <namespace>/<name>" },
  {
    name: "default-credentials-namespaces",
    type: "string",
    default: "",
    help: "Label selector of the namespaces that may use --credentials-secret (default: every watched namespace without a credentials Secret of its own)",
  },
  {
    name: "claims-namespace",
    type: "string",
    default: "",
    fallbackEnv: "POD_NAMESPACE",
    help: "Namespace of the GpuCloudClaims, the record of which object manages which cloud resource: the operator's own, which tenants cannot write ($POD_NAMESPACE, else --leader-election-namespace)",
  },
  {
    name: "allow-cross-namespace-observe",
    type: "bool",
    default: "false",
    help: "Let a managementPolicy: Observe object mirror a cloud resource that an object of another namespace manages",
  },
  { name: "log-level", type: "string", default: "info", help: `Log level: ${LOG_LEVELS.join(", ")}` },
  {
    name: "log-format",
    type: "string",
    default: "json",
    help: "Log format: json (one object per line) or text (time LEVEL message key=value)",
  },
  {
    name: "log-time-format",
    type: "string",
    default: "epoch",
    help: "Log timestamps: epoch (milliseconds) or iso8601 (2025-01-31T12:00:00.000Z)",
  },
  {
    name: "operation-poll-interval",
    type: "duration",
    default: "2s",
    help: "How often in-flight cloud operations are polled",
  },
];

/** `watch-namespace` → `GPUVM_WATCH_NAMESPACE`. */
export function envNameOf(flag: string): string {
  return `GPUVM_${flag.toUpperCase().replaceAll("-", "_")}`;
}

/** The `--help` text of the run command: every flag, its env var and default. */
export function helpText(): string {
  const lines = FLAGS.map((flag) => {
    const valueHint = flag.type === "bool" ? "" : ` <${flag.type === "list" ? "string" : flag.type}>`;
    const defaultHint = flag.default === "" ? "" : ` (default ${flag.default})`;
    return `  --${flag.name}${valueHint}\n      ${flag.help}${defaultHint}. Env: ${envNameOf(flag.name)}`;
  });
  return `Usage: gpuvm-operator run [flags]\n\nFlags:\n${lines.join("\n")}\n  -h, --help\n      Show this help.\n`;
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

/** Reads flags (argv without the command name) and environment into a typed configuration. */
export function parseConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): ConfigResult {
  try {
    const raw = collectRaw(argv);
    if (raw === "help") return { kind: "help" };
    const value = (name: string): string => {
      const spec = specOf(name);
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

function specOf(name: string): FlagSpec {
  const spec = FLAGS.find((flag) => flag.name === name);
  if (spec === undefined) throw new ConfigError(`unknown flag --${name}`);
  return spec;
}

function collectRaw(argv: readonly string[]): Map<string, string[]> | "help" {
  const raw = new Map<string, string[]>();
  for (let index = 0; index < argv.length; index++) {
    const argument = argv[index] ?? "";
    if (argument === "--help" || argument === "-h") return "help";
    if (!argument.startsWith("--")) throw new ConfigError(`unexpected argument "${argument}" (flags start with --)`);
    const equals = argument.indexOf("=");
    const name = argument.slice(2, equals === -1 ? undefined : equals);
    const spec = specOf(name);
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

function buildConfig(value: (name: string) => string): OperatorConfig {
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

function shardOf(value: (name: string) => string): { index: number; count: number } {
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

function oneOf<T extends string>(name: string, text: string, allowed: readonly T[]): T {
  const found = allowed.find((entry) => entry === text);
  if (found === undefined) throw new ConfigError(`--${name}: "${text}" is not one of ${allowed.join(", ")}`);
  return found;
}

/** A duration where `0` means off (or for ever). */
function durationOrOff(name: string, value: (name: string) => string): number {
  return value(name).trim() === "0" ? 0 : duration(name, value);
}

function duration(name: string, value: (name: string) => string): number {
  try {
    const ms = parseDuration(value(name));
    if (ms <= 0) throw new DurationError(`duration must be positive`);
    return ms;
  } catch (error) {
    if (error instanceof DurationError) throw new ConfigError(`--${name}: ${error.message}`, { cause: error });
    throw error;
  }
}

/** Comma-separated API URLs, each normalised (an unusable one is an error naming why). */
function apiUrlList(name: string, text: string): string[] {
  const entries = text
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
  return entries.map((entry) => {
    const parsed = normalizeApiUrl(entry);
    if (!parsed.ok) throw new ConfigError(`--${name}: "${entry}" ${parsed.problem}`);
    return parsed.url.href;
  });
}

const BYTE_UNITS: Readonly<Record<string, number>> = { "": 1, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 };

/** `8Mi` → 8388608, `65536` → 65536 (Kubernetes quantity spelling, binary units only). */
function byteSize(name: string, text: string): number {
  const match = /^\s*(\d+)\s*(Ki|Mi|Gi)?\s*$/.exec(text);
  const bytes = match ? Number(match[1]) * (BYTE_UNITS[match[2] ?? ""] ?? 1) : Number.NaN;
  if (!Number.isSafeInteger(bytes) || bytes < 1024) {
    throw new ConfigError(`--${name}: expected a size of at least 1Ki such as 8Mi or 65536, got "${text}"`);
  }
  return bytes;
}

function nonNegativeInt(name: string, value: (name: string) => string): number {
  const text = value(name);
  const parsed = Number(text);
  if (!Number.isInteger(parsed) || parsed < 0)
    throw new ConfigError(`--${name}: expected a whole number (0 or more), got "${text}"`);
  return parsed;
}

function bool(name: string, value: (name: string) => string): boolean {
  const text = value(name).toLowerCase();
  if (["true", "1", "yes"].includes(text)) return true;
  if (["false", "0", "no"].includes(text)) return false;
  throw new ConfigError(`--${name}: expected true or false, got "${text}"`);
}

function positiveInt(name: string, value: (name: string) => string): number {
  const text = value(name);
  const parsed = Number(text);
  if (!Number.isInteger(parsed) || parsed < 1)
    throw new ConfigError(`--${name}: expected a positive integer, got "${text}"`);
  return parsed;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

function dnsLabel(name: string, text: string): string {
  if (!DNS_LABEL.test(text)) throw new ConfigError(`--${name}: "${text}" is not a valid namespace name`);
  return text;
}

function namespaces(text: string): string[] {
  const list = text
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
  for (const namespace of list) dnsLabel("watch-namespace", namespace);
  return [...new Set(list)];
}

function secretRef(text: string): { namespace: string; name: string } | undefined {
  if (text === "") return undefined;
  const [namespace, name, ...rest] = text.split("/");
  if (!namespace || !name || rest.length > 0) {
    throw new ConfigError(`--credentials-secret: expected <namespace>/<name>, got "${text}"`);
  }
  return { namespace: dnsLabel("credentials-secret", namespace), name };
}

/** ":8080" → all interfaces, "127.0.0.1:9090", "[::1]:8080"; "0" (or empty) disables the server. */
export function parseBindAddress(text: string): BindAddress | undefined {
  if (text === "0" || text === "") return undefined;
  const match = /^(\[[^\]]+\]|[^:]*):(\d{1,5})$/.exec(text);
  const port = Number(match?.[2]);
  if (match === null || port > 65_535) throw new ConfigError(`"${text}" is not host:port, :port or 0`);
  const host = (match[1] ?? "").replace(/^\[|\]$/g, "");
  return { host: host === "" ? "0.0.0.0" : host, port };
}

function bindAddress(name: string, text: string): BindAddress | undefined {
  try {
    return parseBindAddress(text);
  } catch (error) {
    if (error instanceof ConfigError) throw new ConfigError(`--${name}: ${error.message}`, { cause: error });
    throw error;
  }
}
