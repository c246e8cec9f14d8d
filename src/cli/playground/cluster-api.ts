// `npm start -- --capi`: Cluster API next to the operator on the playground's real control plane (the management
// cluster), with one workload cluster whose nodes the simulator's VMs join: Cluster API's core and kubeadm
// bootstrap managers (built from the module proxy, ADR 0022), a second kube-apiserver as the workload cluster
// (registered with the simulator's node-join emulation), and the Cluster `playground` in `default` declared by
// an externally managed control plane (its Secret `playground-kubeconfig`), on the GpuCluster `playground`.
// Everything keeps its data in the state directory, so a restart finds the same clusters (the workload cluster
// keeps its port: Cluster API pins its endpoint).
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import type { BuiltKube, CapiComponent } from "../../control-plane/binaries.ts";
import type { RunningControlPlane } from "../../control-plane/control-plane.ts";
import { type KubeTarget, kubeExpect } from "../../control-plane/http.ts";
import { CREDENTIALS_NAMESPACE, CREDENTIALS_SECRET, REPO_ROOT } from "./conventions.ts";

/** The playground's Cluster (and GpuCluster, and the prefix of its Secrets), in CREDENTIALS_NAMESPACE. */
export const PLAYGROUND_CLUSTER = "playground";
/** The failure domains the playground's GpuCluster allows. */
export const PLAYGROUND_LOCATIONS = ["us-east1-a", "eu-iceland1-a"];

/**
 * Cluster API's tuning (its book's developer/core/tuning.md) for Machines made a hundred at once: the clients of
 * the workload cluster default to 20 requests/s (burst 30) in each manager, and each Machine costs that cluster
 * a write from each (the kubeadm bootstrap manager's token Secret, the core manager's patch of its Node), so 100
 * Machines would wait ≥ 3.5 s there alone, half the bench's bound. The management cluster's clients
 * (`--kube-api-qps` 100, burst 200 since v1.13) stay as they are: they use 10–40 requests/s in that run
 * (docs/cluster-api.md).
 */
export const PLAYGROUND_MANAGER_ARGS = {
  core: ["--clustercache-client-qps=100", "--clustercache-client-burst=200"],
  "bootstrap-kubeadm": ["--clustercache-client-qps=100", "--clustercache-client-burst=200"],
} as const satisfies Record<CapiComponent, readonly string[]>;

export interface CapiPlayground {
  /** The workload cluster's admin kubeconfig (`<state-dir>/workload.kubeconfig`). */
  workloadKubeconfigPath: string;
  /** The workload cluster's Kubernetes version (what the examples' MachineDeployment asks for). */
  kubernetesVersion: string;
  close(): Promise<void>;
}

export interface CapiPlaygroundOptions {
  management: Pick<RunningControlPlane, "admin" | "kubeconfigYaml" | "serviceAccountToken">;
  built: BuiltKube;
  stateDir: string;
  /** The workload cluster's kube-apiserver port (0: a free one; a fixed one survives restarts). */
  workloadPort: number;
  /** The simulator's admin API (`…/_sim`): the workload cluster is registered for its node-join emulation. */
  simulatorAdminUrl: string;
  log(line: string): void;
}

/** A server-side apply of one object as the playground (created, or brought up to date on a restart). */
async function apply(target: KubeTarget, collection: string, object: { metadata: { name: string } }): Promise<void> {
  await kubeExpect(
    target,
    {
      method: "PATCH",
      path: `${collection}/${object.metadata.name}?fieldManager=gpuvm-playground&force=true`,
      body: JSON.stringify(object),
      contentType: "application/apply-patch+yaml",
    },
    [200, 201],
  );
}

/** The playground's GpuCluster: two failure domains, and a network with one firewall rule made for the cluster. */
export function playgroundGpuCluster() {
  return {
    apiVersion: "infrastructure.cluster.x-k8s.io/v1alpha1",
    kind: "GpuCluster",
    metadata: { name: PLAYGROUND_CLUSTER, namespace: CREDENTIALS_NAMESPACE },
    spec: {
      locations: PLAYGROUND_LOCATIONS,
      credentialsRef: { name: CREDENTIALS_SECRET },
      network: { cidr: "10.64.0.0/16" },
      firewallRules: [
        {
          name: "kubelet",
          direction: "ingress",
          action: "allow",
          protocols: ["tcp"],
          sources: [{ cidr: "10.64.0.0/16" }],
          destinationPorts: ["10250"],
        },
      ],
    },
  };
}

function playgroundCluster(controlPlaneRef: { apiGroup: string; kind: string; name: string }) {
  return {
    apiVersion: "cluster.x-k8s.io/v1beta2",
    kind: "Cluster",
    metadata: { name: PLAYGROUND_CLUSTER, namespace: CREDENTIALS_NAMESPACE },
    spec: {
      controlPlaneRef,
      infrastructureRef: { apiGroup: "infrastructure.cluster.x-k8s.io", kind: "GpuCluster", name: PLAYGROUND_CLUSTER },
    },
  };
}

/** Cluster API, the workload cluster and the playground's Cluster, on a running management cluster. */
export async function startCapiPlayground(options: CapiPlaygroundOptions): Promise<CapiPlayground> {
  const { ensureCapiBinaries } = await import("../../control-plane/binaries.ts");
  const { startClusterApi } = await import("../../control-plane/cluster-api.ts");
  const { declareWorkloadCluster, startWorkloadCluster } = await import("../../control-plane/workload-cluster.ts");
  const { applyManifests, readManifests } = await import("../../control-plane/operator-identity.ts");
  const { log, stateDir, built } = options;
  const capi = await ensureCapiBinaries({ kube: built, log });
  // Cluster API pins the workload cluster's endpoint: a port picked freely once is kept for the next start.
  const portFile = path.join(stateDir, "workload.port");
  const keptPort = Number((await readFile(portFile, "utf8").catch(() => "")).trim());
  const port = options.workloadPort !== 0 ? options.workloadPort : Number.isInteger(keptPort) ? keptPort : 0;
  const workload = await startWorkloadCluster({
    bin: built.bin,
    dataDir: path.join(stateDir, "workload"),
    keepData: true,
    port,
    log,
  });
  await writeFile(portFile, `${workload.endpoint.port}\n`);
  const closers: (() => Promise<void>)[] = [() => workload.close()];
  const close = async (): Promise<void> => {
    for (const closer of closers.reverse()) await closer();
  };
  try {
    const workloadKubeconfigPath = path.join(stateDir, "workload.kubeconfig");
    await writeFile(workloadKubeconfigPath, workload.kubeconfigYaml(), { mode: 0o600 });
    const registered = await fetch(`${options.simulatorAdminUrl}/node-joins/clusters/${PLAYGROUND_CLUSTER}`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ kubeconfig: workload.kubeconfigYaml() }),
    });
    if (!registered.ok) throw new Error(`the simulator refused the workload cluster: ${await registered.text()}`);
    const clusterApi = await startClusterApi({
      managementCluster: options.management,
      capi,
      bin: built.bin,
      dataDir: path.join(stateDir, "cluster-api"),
      keepData: true,
      extraArgs: {
        core: [...PLAYGROUND_MANAGER_ARGS.core],
        "bootstrap-kubeadm": [...PLAYGROUND_MANAGER_ARGS["bootstrap-kubeadm"]],
      },
      log,
    });
    closers.push(() => clusterApi.close());
    const admin = options.management.admin;
    // The provider's role for Cluster API's manager (its aggregated role takes it in), as deploy/ installs it.
    await applyManifests(admin, await readManifests(path.join(REPO_ROOT, "deploy/cluster-api-manager-role.yaml")));
    const cluster = { namespace: CREDENTIALS_NAMESPACE, name: PLAYGROUND_CLUSTER };
    const controlPlaneRef = await declareWorkloadCluster(admin, workload, cluster);
    const infra = `/apis/infrastructure.cluster.x-k8s.io/v1alpha1/namespaces/${CREDENTIALS_NAMESPACE}/gpuclusters`;
    await apply(admin, infra, playgroundGpuCluster());
    const clusters = `/apis/cluster.x-k8s.io/v1beta2/namespaces/${CREDENTIALS_NAMESPACE}/clusters`;
    await apply(admin, clusters, playgroundCluster(controlPlaneRef));
    log(
      `cluster-api: Cluster ${CREDENTIALS_NAMESPACE}/${PLAYGROUND_CLUSTER} declared (workload cluster ${workload.url})`,
    );
    return { workloadKubeconfigPath, kubernetesVersion: workload.version, close };
  } catch (error) {
    await close();
    throw error;
  }
}
