// The playground's command line: its flags, their defaults and --help, read into PlaygroundOptions (a UsageError
// for what cannot be read).
import path from "node:path";
import { isSimulatorProfile, SIMULATOR_PROFILES, type SimulatorProfile } from "../../simulator/profiles.ts";
import { parseFlags, UsageError } from "../usage.ts";
import { CREDENTIALS_NAMESPACE, CREDENTIALS_SECRET } from "./conventions.ts";

export const PLAYGROUND_DEFAULTS = {
  port: 8090,
  cloudPort: 8091,
  metricsPort: 8092,
  healthPort: 8093,
  workloadPort: 8094,
  stateDir: ".playground",
  latencyMs: 1500,
} as const;

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
  /** Cluster API and a workload cluster next to the operator (implies the real control plane). */
  capi: boolean;
  /** The workload cluster's kube-apiserver port (with --capi). */
  workloadPort: number;
}

export const PLAYGROUND_HELP = `Usage: gpuvm-operator playground [flags]

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
  --capi                 Cluster API v1.14 (core and kubeadm bootstrap managers) and the operator as its
                         infrastructure provider, on the real control plane (implies --kube real; builds
                         Kubernetes and Cluster API the first time, needs Go), with one workload cluster whose
                         nodes the simulator's VMs join: the Cluster playground, its GpuCluster and the Secret
                         playground-kubeconfig in default. Then: kubectl apply -f examples/cluster-api/
  --workload-port <n>    the workload cluster's kube-apiserver port with --capi (default ${PLAYGROUND_DEFAULTS.workloadPort}; kept
                         across restarts: Cluster API pins it)
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
  const capi = values.capi === true;
  if (capi && values.kube === "double") {
    throw new UsageError("--capi runs Cluster API on the real control plane: leave out --kube double");
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
    kube: capi ? "real" : parseKube(values.kube),
    shards,
    capi,
    workloadPort: parsePort("workload-port", values["workload-port"], PLAYGROUND_DEFAULTS.workloadPort),
  };
}

/**
 * Each profile keeps its own state: a seed-only playground started after a contract one must not serve the
 * contract one's cloud (nor its objects' cluster), and switching back finds each as it was left.
 */
export function defaultStateDir(profile: SimulatorProfile): string {
  return profile === "contract" ? PLAYGROUND_DEFAULTS.stateDir : `${PLAYGROUND_DEFAULTS.stateDir}-${profile}`;
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
      capi: { type: "boolean" },
      "workload-port": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
}
