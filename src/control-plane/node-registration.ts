// A Node registered in a workload cluster as a kubelet that joined would register it (the object, then a Ready
// status with addresses, capacity and version): what the simulator's node-join emulation does once a join
// passes kubeadm's checks (kubeadm-join.ts). HTTPS only, no Kubernetes client library.
import { type KubeTarget, kubeExpect } from "./http.ts";

export interface NodeRegistration {
  name: string;
  /** Matched by Cluster API against the infrastructure machine's spec.providerID. */
  providerID: string;
  addresses?: { type: string; address: string }[];
  /** Quantities by resource name (cpu, memory, nvidia.com/gpu …). */
  capacity?: Record<string, string>;
  labels?: Record<string, string>;
  kubeletVersion?: string;
}

/** Registers a Ready Node as a kubelet that joined would: the object, then its status. */
export async function registerNode(workload: KubeTarget, node: NodeRegistration): Promise<void> {
  const now = new Date().toISOString();
  await kubeExpect(
    workload,
    {
      method: "POST",
      path: "/api/v1/nodes",
      body: {
        apiVersion: "v1",
        kind: "Node",
        metadata: {
          name: node.name,
          labels: {
            "kubernetes.io/hostname": node.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            ...node.labels,
          },
        },
        spec: { providerID: node.providerID },
      },
    },
    [201],
  );
  const capacity = { cpu: "8", memory: "32Gi", pods: "110", ...node.capacity };
  const status = {
    capacity,
    allocatable: capacity,
    addresses: node.addresses ?? [{ type: "Hostname", address: node.name }],
    conditions: [
      {
        type: "Ready",
        status: "True",
        reason: "KubeletReady",
        message: "kubelet is posting ready status",
        lastHeartbeatTime: now,
        lastTransitionTime: now,
      },
    ],
    nodeInfo: {
      kubeletVersion: node.kubeletVersion ?? "",
      operatingSystem: "linux",
      architecture: "amd64",
      machineID: "",
      systemUUID: "",
      bootID: "",
      kernelVersion: "",
      osImage: "",
      containerRuntimeVersion: "",
      kubeProxyVersion: "",
    },
  };
  await kubeExpect(
    workload,
    {
      method: "PATCH",
      path: `/api/v1/nodes/${node.name}/status`,
      body: { status },
      contentType: "application/merge-patch+json",
    },
    [200],
  );
}
