// The run command's flags: name, type, default, help and environment variable of each (GPUVM_<FLAG_IN_UPPER_SNAKE>),
// and the --help text made from them. Flag names follow controller-runtime's conventions.
import { ConfigError, LOG_LEVELS } from "./config-values.ts";

export type FlagType = "string" | "list" | "bool" | "duration" | "int" | "number";

export interface FlagSpec {
  name: string;
  type: FlagType;
  default: string;
  help: string;
  /** Extra env var consulted after GPUVM_<NAME> (e.g. POD_NAMESPACE). */
  fallbackEnv?: string;
}

export const FLAGS: readonly FlagSpec[] = [
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
    name: "capacity-probe-interval",
    type: "duration",
    default: "60s",
    help: "How often the availability of a VM type in a location is read while objects wait for its capacity (once per interval for the pair, not per object); the head of its queue goes first when capacity returns",
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

/** The flag named `name` (without its dashes); ConfigError for one the run command does not have. */
export function flagSpecOf(name: string): FlagSpec {
  const spec = FLAGS.find((flag) => flag.name === name);
  if (spec === undefined) throw new ConfigError(`unknown flag --${name}`);
  return spec;
}
