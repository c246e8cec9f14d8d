// What a chaos run stands on: the cloud API simulator and the Kubernetes API test double (in-process), the hostile
// endpoints, the namespaces and credentials Secrets of every tenant, the two operator replicas (real processes,
// leader election), and the clients the run drives and checks them with.
import { randomUUID } from "node:crypto";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { pino } from "pino";
import { GROUP, SECRET_WATCH_LABEL, VERSION } from "../../api/common.ts";
import { type CloudClient, createCloudClient } from "../../cloud/client.ts";
import type { RunningKubeDouble } from "../../kube-double/index.ts";
import type { RunningSimulator } from "../../simulator/index.ts";
import type { WriteLogEntry } from "../../simulator/request-log.ts";
import { type ReplicaWrite, replicaWritesOf } from "./checks.ts";
import { type HostileEndpoint, startHostileEndpoints } from "./hostile.ts";
import type { ChaosProfile } from "./profiles.ts";
import type { Random } from "./random.ts";
import { Replicas } from "./replicas.ts";
import {
  HEALTHY_NAMESPACES,
  HOSTILE_NAMESPACES,
  type LiveObject,
  type ObjectSpec,
  objectBody,
  PLURALS,
} from "./workload.ts";

const REPO_ROOT = path.resolve(import.meta.dirname, "../../..");
const MAIN_SCRIPT = path.join(REPO_ROOT, "src/cli/main.ts");
export const LEASE = { namespace: "gpuvm-system", name: "gpuvm-operator.gpucloud.dev" };
/** The replicas' Lease duration (short, so that a takeover is quick). */
export const LEASE_DURATION_MS = 6000;
export const REPLICA_NAMES = ["replica-a", "replica-b"] as const;
/** How often a chaos run looks again while it waits for the cluster to reach a state. */
export const POLL_MS = 250;

/** What the seeded parts of a run (its disruptions, its resets) share with it. */
export interface PlannedRun {
  rig: Rig;
  profile: ChaosProfile;
  /** The run's one seeded sequence: drawn in the order the phases ask, so the same seed makes the same run. */
  random: Random;
  /** The healthy objects the run applies. */
  healthy: readonly ObjectSpec[];
  say(line: string): void;
}

export class Rig {
  readonly sim: RunningSimulator;
  readonly double: RunningKubeDouble;
  readonly hostile: HostileEndpoint[];
  readonly core: CoreV1Api;
  readonly custom: CustomObjectsApi;
  readonly cloud: CloudClient;
  readonly replicas: Replicas;
  /** Every secret value of the run, by what it is (searched for in the logs). */
  readonly secrets: Map<string, string>;
  readonly #coordination: CoordinationV1Api;

  private constructor(parts: {
    sim: RunningSimulator;
    double: RunningKubeDouble;
    hostile: HostileEndpoint[];
    kubeConfig: KubeConfig;
    replicas: Replicas;
  }) {
    this.sim = parts.sim;
    this.double = parts.double;
    this.hostile = parts.hostile;
    this.replicas = parts.replicas;
    this.core = parts.kubeConfig.makeApiClient(CoreV1Api);
    this.custom = parts.kubeConfig.makeApiClient(CustomObjectsApi);
    this.#coordination = parts.kubeConfig.makeApiClient(CoordinationV1Api);
    this.cloud = createCloudClient({
      baseUrl: parts.sim.url,
      credentials: { apiKey: parts.sim.apiKey },
      bulkhead: false,
      rateLimiter: false,
      logger: pino({ level: "silent" }),
    });
    this.secrets = new Map([
      ["the API key", parts.sim.apiKey],
      ["the password", parts.sim.user.password],
    ]);
  }

  /** Servers, namespaces, Secrets; the replicas are made but not started. */
  static async start(profile: ChaosProfile, faultRandom: Random, stateDir: string): Promise<Rig> {
    await mkdir(path.join(stateDir, "logs"), { recursive: true, mode: 0o700 });
    const { startSimulator } = await import("../../simulator/index.ts");
    const { startKubeDouble } = await import("../../kube-double/index.ts");
    const sim = await startSimulator({
      port: 0,
      latencyMs: profile.operationLatencyMs,
      rateLimit: false,
      random: () => faultRandom.next(),
      capacity: { "us-east1-a": { "a40.1x": 5000, "a40.2x": 5000 } },
    });
    const double = await startKubeDouble({ port: 0, crdDir: path.join(REPO_ROOT, "crds") });
    const hostile = await startHostileEndpoints();
    const kubeconfigPath = path.join(stateDir, "kubeconfig");
    await double.writeKubeconfig(kubeconfigPath);
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfigPath);
    const replicas = new Replicas({
      mainScript: MAIN_SCRIPT,
      logDir: path.join(stateDir, "logs"),
      args: operatorArgs(kubeconfigPath, sim.url, hostile),
    });
    const rig = new Rig({ sim, double, hostile, kubeConfig, replicas });
    await rig.#tenants();
    return rig;
  }

  async #tenants(): Promise<void> {
    for (const namespace of [LEASE.namespace, ...HEALTHY_NAMESPACES, ...Object.values(HOSTILE_NAMESPACES)]) {
      await this.core.createNamespace({ body: { metadata: { name: namespace } } });
    }
    const { sim } = this;
    await this.#credentials(HEALTHY_NAMESPACES[0], { apiKey: sim.apiKey, projectId: sim.projectId, apiUrl: sim.url });
    await this.#credentials(HEALTHY_NAMESPACES[1], {
      email: sim.user.email,
      password: sim.user.password,
      projectId: sim.projectId,
      apiUrl: sim.url,
    });
    for (const endpoint of this.hostile) {
      const apiKey = `hostile-${endpoint.kind}-${randomUUID()}`;
      this.secrets.set(`the ${endpoint.kind} tenant's key`, apiKey);
      await this.#credentials(HOSTILE_NAMESPACES[endpoint.kind], {
        apiKey,
        projectId: randomUUID(),
        apiUrl: endpoint.url,
      });
    }
  }

  #credentials(namespace: string, stringData: Record<string, string>) {
    return this.core.createNamespacedSecret({
      namespace,
      body: { metadata: { name: "gpucloud-credentials", labels: { [SECRET_WATCH_LABEL]: "true" } }, stringData },
    });
  }

  /** The replica holding the Lease (its name and this process's identity), if it is one of ours. */
  async leader(): Promise<{ name: string; identity: string } | undefined> {
    const lease = await this.#coordination.readNamespacedLease(LEASE);
    const identity = lease.spec?.holderIdentity ?? "";
    const name = REPLICA_NAMES.find((candidate) => identity.startsWith(`${candidate}_`));
    return name === undefined ? undefined : { name, identity };
  }

  async apply(object: ObjectSpec): Promise<void> {
    // A create the API answered with an error may still have been stored: a 409 then means "done".
    for (let attempt = 1; ; attempt++) {
      try {
        await this.custom.createNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          plural: PLURALS[object.kind],
          namespace: object.namespace,
          body: objectBody(object),
        });
        return;
      } catch (error) {
        if ((error as { code?: number }).code === 409) return;
        if (attempt >= 5) throw error;
        await sleep(500 * attempt);
      }
    }
  }

  async read(object: Pick<ObjectSpec, "kind" | "namespace" | "name">): Promise<LiveObject> {
    const live = (await this.custom.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      plural: PLURALS[object.kind],
      namespace: object.namespace,
      name: object.name,
    })) as Omit<LiveObject, "kind">;
    return { ...live, kind: object.kind };
  }

  async patchSpec(object: ObjectSpec, spec: Record<string, unknown>): Promise<void> {
    await this.#mergePatch(object, { spec });
  }

  async annotate(object: ObjectSpec, annotations: Record<string, string>): Promise<void> {
    await this.#mergePatch(object, { metadata: { annotations } });
  }

  async #mergePatch(object: ObjectSpec, body: Record<string, unknown>): Promise<void> {
    await this.custom.patchNamespacedCustomObject(
      {
        group: GROUP,
        version: VERSION,
        plural: PLURALS[object.kind],
        namespace: object.namespace,
        name: object.name,
        body,
      },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
  }

  /** Every write that left a replica, as the Kubernetes API test double and the cloud simulator logged it. */
  async replicaWrites(): Promise<ReplicaWrite[]> {
    const leases = `/apis/coordination.k8s.io/v1/namespaces/${LEASE.namespace}/leases`;
    return replicaWritesOf(this.double.writes(), await this.cloudWrites(), (write) => write.path.startsWith(leases));
  }

  /** The cloud simulator's write log. */
  async cloudWrites(): Promise<readonly WriteLogEntry[]> {
    return ((await this.admin("GET", "/requests/log")) as { writes: WriteLogEntry[] }).writes;
  }

  async admin(method: string, route: string, body?: unknown): Promise<unknown> {
    const response = await fetch(`${this.sim.adminUrl}${route}`, {
      method,
      ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
    });
    if (!response.ok) throw new Error(`simulator admin ${method} ${route}: HTTP ${response.status}`);
    return response.json();
  }

  async close(): Promise<void> {
    await this.replicas.stopAll();
    await this.sim.close();
    await this.double.close();
    for (const endpoint of this.hostile) await endpoint.close();
  }
}

/** The operator as deployed (leader election), with short Lease timings so that a takeover is quick. */
function operatorArgs(kubeconfigPath: string, apiUrl: string, hostile: readonly HostileEndpoint[]): string[] {
  return [
    ...["--kubeconfig", kubeconfigPath, "--leader-elect", "--leader-election-namespace", LEASE.namespace],
    ...["--leader-election-lease-duration", `${LEASE_DURATION_MS}ms`, "--leader-election-renew-deadline", "4s"],
    ...["--leader-election-retry-period", "1s", "--metrics-bind-address", "0", "--health-probe-bind-address", "0"],
    ...["--api-url", apiUrl, "--allowed-api-urls", hostile.map((endpoint) => endpoint.url).join(",")],
    // The platform's default credentials: the trespasser's namespace with an unlabelled Secret must not get them.
    ...["--credentials-secret", `${HEALTHY_NAMESPACES[0]}/gpucloud-credentials`],
    ...["--api-rate-limit", "50", "--operation-poll-interval", "500ms", "--sync-period", "2m"],
    ...["--graceful-shutdown-timeout", "10s"],
  ];
}
