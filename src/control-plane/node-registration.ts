// A Node registered in a workload cluster as a kubelet that joined would register it (the object, then a Ready
// status with addresses, capacity and version), its Ready condition as the kubelet (or, once it stops posting,
// the node lifecycle controller) sets it, and its deletion as a cloud controller manager deletes the Node of a
// VM that is gone: what the simulator's node-join emulation does (kubeadm-join.ts checks the join first).
// HTTPS only, no Kubernetes client library.
import { isRecord } from "../util/is-record.ts";
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
  const now = timestamp();
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
    conditions: kubeletConditions(true, now),
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

/** Now, as the API server writes times (seconds). */
function timestamp(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, "Z");
}

function nodePath(name: string): string {
  return `/api/v1/nodes/${encodeURIComponent(name)}`;
}

/** The Node's spec.providerID, "" when it has none, undefined when there is no such Node. */
export async function nodeProviderId(workload: KubeTarget, name: string): Promise<string | undefined> {
  const response = await kubeExpect(workload, { path: nodePath(name) }, [200, 404]);
  if (response.status === 404) return undefined;
  const spec = isRecord(response.json) && isRecord(response.json.spec) ? response.json.spec : {};
  return typeof spec.providerID === "string" ? spec.providerID : "";
}

/**
 * Sets the Node's Ready condition: True as a kubelet posting its status does, Unknown as the node lifecycle
 * controller does once the kubelet stopped posting (a stopped VM). False when there is no such Node.
 */
export async function setNodeReady(workload: KubeTarget, name: string, ready: boolean): Promise<boolean> {
  const response = await kubeExpect(
    workload,
    {
      method: "PATCH",
      path: `${nodePath(name)}/status`,
      body: { status: { conditions: kubeletConditions(ready, timestamp()) } },
      contentType: "application/merge-patch+json",
    },
    [200, 404],
  );
  return response.status === 200;
}

/** The pressure conditions a kubelet reports (Cluster API's NodeHealthy reads them with Ready). */
const PRESSURE_CONDITIONS = [
  ["MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"],
  ["DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"],
  ["PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"],
] as const;

/**
 * A Node's conditions as a kubelet posts them (Ready, no pressure), or as the node lifecycle controller marks
 * them all once the kubelet stopped posting (Unknown).
 */
export function kubeletConditions(ready: boolean, now: string) {
  const times = { lastHeartbeatTime: now, lastTransitionTime: now };
  const silent = { status: "Unknown", reason: "NodeStatusUnknown", message: "Kubelet stopped posting node status." };
  return [
    {
      type: "Ready",
      ...(ready ? { status: "True", reason: "KubeletReady", message: "kubelet is posting ready status" } : silent),
      ...times,
    },
    ...PRESSURE_CONDITIONS.map(([type, reason, message]) => ({
      type,
      ...(ready ? { status: "False", reason, message } : silent),
      ...times,
    })),
  ];
}

/** Deletes the Node (gone already is fine), as a cloud controller manager does when its VM no longer exists. */
export async function deleteNode(workload: KubeTarget, name: string): Promise<void> {
  await kubeExpect(workload, { method: "DELETE", path: nodePath(name) }, [200, 202, 404]);
}
