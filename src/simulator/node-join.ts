// The node-join emulation: what a VM whose startup script is a cloud-config with a `kubeadm join` would do to a
// workload cluster this simulator may reach. When such a VM boots, its join is checked as kubeadm checks it
// (control-plane/kubeadm-join.ts: token discovery and the bootstrap token's authentication, against the real
// API server; retried while the token's signature may still come, as kubeadm's discovery does), then a Ready Node
// is registered as the kubelet would, with providerID gpucloud://<vm id> (what this cloud's cloud controller
// manager would set), addresses, capacity and labels. A VM that halts makes its Node NotReady (Ready=Unknown, as
// the node lifecycle controller marks a silent kubelet); a VM that is gone takes its Node with it (as the cloud
// controller manager deletes it). Each join's outcome is kept for the admin API: the cloud API has no console.
import { setTimeout as sleep } from "node:timers/promises";
import { vmTypeInfoOf } from "../cloud/wire.ts";
import { type KubeTarget, kubeExpect, kubeTargetOf } from "../control-plane/http.ts";
import {
  type JoinRefusal,
  type KubeadmJoin,
  KubeadmJoinError,
  parseKubeadmJoin,
  verifyKubeadmJoin,
} from "../control-plane/kubeadm-join.ts";
import { deleteNode, nodeProviderId, registerNode, setNodeReady } from "../control-plane/node-registration.ts";
import { isRecord } from "../util/is-record.ts";
import { providerIdOf } from "../util/provider-id.ts";
import type { Clock } from "./clock.ts";
import type { VmRecord } from "./state.ts";
import type { VmObserver } from "./vms.ts";

/** A workload cluster the simulator may reach: its name, and a kubeconfig whose user may register Nodes. */
export interface WorkloadClusterAccess {
  name: string;
  /** A kubeconfig (YAML) with its credentials inline; its server's host:port is the endpoint joins name. */
  kubeconfig: string;
}

export interface NodeJoinOptions {
  clusters?: WorkloadClusterAccess[];
  /** How long a join waits for its token to be usable (kubeadm's discovery timeout). Default 5 minutes. */
  discoveryTimeoutMs?: number;
  /** Between two discovery attempts. Default 2 seconds. */
  retryIntervalMs?: number;
  /** Each request to a workload cluster. Default 10 seconds. */
  requestTimeoutMs?: number;
}

/** Why a node did not join: kubeadm's refusals, and what can go wrong once the join passed. */
export type NodeJoinRefusal =
  | JoinRefusal
  /** A Node of that name with another providerID exists already (the kubelet could not register). */
  | "NodeNameTaken"
  /** The Node could not be written (the credentials given for the cluster lack the rights, a server error). */
  | "RegistrationFailed"
  /** The VM halted or went while it was joining (cloud-init runs its commands once). */
  | "Interrupted";

export interface NodeJoinRecord {
  vmId: string;
  vmName: string;
  /** joining: discovery is being retried; joined: the Node is registered; refused: it never will be. */
  state: "joining" | "joined" | "refused";
  /** The workload cluster's name, once its endpoint is known. */
  cluster?: string;
  /** The join's API server endpoint (host:port). */
  endpoint?: string;
  node?: string;
  providerID: string;
  /** Whether the Node is Ready (false while the VM is halted). */
  nodeReady?: boolean;
  reason?: NodeJoinRefusal;
  message?: string;
  attempts: number;
  /** The simulator's clock, RFC 3339. */
  updatedAt: string;
}

export class NodeJoinConfigError extends Error {
  override name = "NodeJoinConfigError";
}

interface Cluster {
  name: string;
  endpoint: string;
  target: KubeTarget;
  /** kube-apiserver's version, read once: what the emulated kubelet reports. */
  version?: string;
}

/** What is read of a VM when it boots: the record may change or go meanwhile. */
type VmFacts = Pick<VmRecord, "id" | "name" | "type" | "location" | "privateIp" | "publicIp" | "startupScript">;

/** Refusals that the next discovery attempt may not meet: the token's signature can still appear. */
const RETRIED: ReadonlySet<JoinRefusal> = new Set([
  "TokenInvalidOrExpired",
  "Unreachable",
  "NotSetUpForTokenBootstrap",
]);

/** host:port of a server URL (the port of its scheme when it names none). */
function endpointOf(url: string): string {
  const parsed = new URL(url);
  return `${parsed.hostname}:${parsed.port || (parsed.protocol === "https:" ? "443" : "80")}`;
}

/** A DNS-1123 name from the VM's name, as its hostname would be. */
function hostnameOf(vmName: string): string {
  return (
    vmName
      .toLowerCase()
      .replace(/[^a-z0-9.-]+/g, "-")
      .replace(/^[-.]+|[-.]+$/g, "")
      .slice(0, 253) || "node"
  );
}

/** The Node's name: the join's nodeRegistration.name when it is literal, else the VM's hostname. */
function nodeNameOf(join: KubeadmJoin, vm: VmFacts): string {
  const written = join.nodeName?.trim();
  return written !== undefined && written !== "" && !written.includes("{{") ? written : hostnameOf(vm.name);
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export class NodeJoins implements VmObserver {
  readonly #clock: Clock;
  readonly #discoveryTimeoutMs: number;
  readonly #retryIntervalMs: number;
  readonly #requestTimeoutMs: number;
  readonly #clusters = new Map<string, Cluster>();
  readonly #records = new Map<string, NodeJoinRecord>();
  /** One queue per VM: its boot, halt and removal are handled in order. */
  readonly #queues = new Map<string, Promise<void>>();
  /** VMs whose OS is down or that are gone: a join in progress for them stops. */
  readonly #down = new Set<string>();
  #closed = false;

  constructor(clock: Clock, options: NodeJoinOptions = {}) {
    this.#clock = clock;
    this.#discoveryTimeoutMs = options.discoveryTimeoutMs ?? 5 * 60_000;
    this.#retryIntervalMs = options.retryIntervalMs ?? 2000;
    this.#requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
    for (const cluster of options.clusters ?? []) this.setCluster(cluster);
  }

  /** Adds or replaces a workload cluster; throws NodeJoinConfigError when its kubeconfig is unusable. */
  setCluster(access: WorkloadClusterAccess): { name: string; endpoint: string } {
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(access.name)) {
      throw new NodeJoinConfigError(`cluster name "${access.name.slice(0, 64)}": lowercase letters, digits and '-'`);
    }
    let target: KubeTarget;
    try {
      target = kubeTargetOf(access.kubeconfig);
    } catch (error) {
      throw new NodeJoinConfigError(`cluster ${access.name}: ${errorText(error)}`, { cause: error });
    }
    const endpoint = endpointOf(target.url);
    this.#clusters.set(access.name, { name: access.name, endpoint, target });
    return { name: access.name, endpoint };
  }

  removeCluster(name: string): boolean {
    return this.#clusters.delete(name);
  }

  /** The workload clusters, without their credentials. */
  clusters(): { name: string; endpoint: string }[] {
    return [...this.#clusters.values()].map(({ name, endpoint }) => ({ name, endpoint }));
  }

  joins(): NodeJoinRecord[] {
    return [...this.#records.values()].map((record) => ({ ...record }));
  }

  joinOf(vmId: string): NodeJoinRecord | undefined {
    const record = this.#records.get(vmId);
    return record === undefined ? undefined : { ...record };
  }

  /** Resolves once every queued boot, halt and removal has been handled. */
  async idle(): Promise<void> {
    while (this.#queues.size > 0) await Promise.all(this.#queues.values());
  }

  /** Forgets the joins (the admin reset); the clusters stay. */
  reset(): void {
    this.#records.clear();
    this.#down.clear();
  }

  close(): void {
    this.#closed = true;
  }

  booted(vm: Readonly<VmRecord>): void {
    const facts: VmFacts = { ...vm };
    this.#down.delete(vm.id);
    this.#enqueue(vm.id, () => this.#boot(facts));
  }

  halted(vm: Readonly<VmRecord>): void {
    this.#down.add(vm.id);
    this.#enqueue(vm.id, () => this.#setReady(vm.id, false));
  }

  removed(vm: Readonly<VmRecord>): void {
    this.#down.add(vm.id);
    this.#enqueue(vm.id, async () => {
      await this.#deleteNode(vm.id);
      this.#records.delete(vm.id);
      this.#down.delete(vm.id);
    });
  }

  #enqueue(vmId: string, task: () => Promise<void>): void {
    const previous = this.#queues.get(vmId) ?? Promise.resolve();
    const next = previous.then(task).catch(() => {
      // Every task records its own failures; nothing may reject the queue.
    });
    this.#queues.set(vmId, next);
    void next.then(() => {
      if (this.#queues.get(vmId) === next) this.#queues.delete(vmId);
    });
  }

  #record(vm: Pick<VmFacts, "id" | "name">, fields: Partial<NodeJoinRecord> & Pick<NodeJoinRecord, "state">): void {
    const previous = this.#records.get(vm.id);
    this.#records.set(vm.id, {
      vmId: vm.id,
      vmName: vm.name,
      providerID: providerIdOf(vm.id),
      attempts: 0,
      ...previous,
      ...fields,
      updatedAt: new Date(this.#clock.now()).toISOString(),
    });
  }

  async #boot(vm: VmFacts): Promise<void> {
    const previous = this.#records.get(vm.id);
    // A VM that joined before reboots: its kubelet has its credentials and posts Ready again.
    if (previous?.state === "joined") return this.#setReady(vm.id, true);
    // cloud-init runs its commands on the first boot only: a refused join is not tried again.
    if (previous !== undefined || this.#clusters.size === 0 || vm.startupScript === undefined) return;
    let join: KubeadmJoin;
    try {
      join = parseKubeadmJoin(vm.startupScript);
    } catch (error) {
      if (!(error instanceof KubeadmJoinError)) throw error;
      // A script without a kubeadm join is no node: nothing to emulate.
      if (error.reason === "NotCloudConfig" || error.reason === "NoKubeadmJoin") return;
      return this.#record(vm, { state: "refused", reason: error.reason, message: error.message });
    }
    const cluster = [...this.#clusters.values()].find((candidate) => candidate.endpoint === join.apiServerEndpoint);
    this.#record(vm, { state: "joining", endpoint: join.apiServerEndpoint, cluster: cluster?.name });
    await this.#discover(vm, join, cluster);
  }

  /** kubeadm's discovery, retried while it may still succeed, then the Node's registration. */
  async #discover(vm: VmFacts, join: KubeadmJoin, cluster: Cluster | undefined): Promise<void> {
    const knownEndpoints = [...this.#clusters.values()].map((candidate) => candidate.endpoint);
    const deadline = performance.now() + this.#discoveryTimeoutMs;
    for (let attempts = 1; ; attempts += 1) {
      if (this.#closed) return;
      if (this.#down.has(vm.id)) {
        const message = "the VM halted before its kubeadm join finished; cloud-init does not run it again";
        return this.#record(vm, { state: "refused", reason: "Interrupted", message, attempts });
      }
      try {
        await verifyKubeadmJoin(join, { knownEndpoints, timeoutMs: this.#requestTimeoutMs });
      } catch (error) {
        if (!(error instanceof KubeadmJoinError)) throw error;
        const retry = RETRIED.has(error.reason) && performance.now() + this.#retryIntervalMs < deadline;
        const state = retry ? "joining" : "refused";
        this.#record(vm, { state, reason: error.reason, message: error.message, attempts });
        if (!retry) return;
        await sleep(this.#retryIntervalMs);
        continue;
      }
      // The endpoint was a cluster's when the join was checked; a cluster removed meanwhile takes no Node.
      const current = cluster === undefined ? undefined : this.#clusters.get(cluster.name);
      if (current === undefined) {
        const message = `the workload cluster of ${join.apiServerEndpoint} was removed during the join`;
        return this.#record(vm, { state: "refused", reason: "UnknownEndpoint", message, attempts });
      }
      return this.#register(vm, join, current, attempts);
    }
  }

  async #register(vm: VmFacts, join: KubeadmJoin, cluster: Cluster, attempts: number): Promise<void> {
    const name = nodeNameOf(join, vm);
    const providerID = providerIdOf(vm.id);
    try {
      const existing = await nodeProviderId(cluster.target, name);
      if (existing !== undefined && existing !== providerID) {
        const message = `a Node ${name} exists with providerID "${existing}"`;
        return this.#record(vm, { state: "refused", reason: "NodeNameTaken", message, node: name, attempts });
      }
      if (existing === undefined) {
        const info = vmTypeInfoOf(vm.type);
        await registerNode(cluster.target, {
          name,
          providerID,
          addresses: [
            { type: "InternalIP", address: vm.privateIp },
            { type: "ExternalIP", address: vm.publicIp },
            { type: "Hostname", address: name },
          ],
          capacity: {
            ...(info === undefined ? {} : { cpu: String(info.vcpu), memory: `${info.memoryGb}Gi` }),
            "nvidia.com/gpu": String(info?.gpus ?? 0),
          },
          labels: {
            "node.kubernetes.io/instance-type": vm.type,
            "topology.kubernetes.io/zone": vm.location,
            "topology.kubernetes.io/region": vm.location.replace(/-[a-z]$/, ""),
          },
          kubeletVersion: await this.#versionOf(cluster),
        });
      } else {
        await setNodeReady(cluster.target, name, true);
      }
    } catch (error) {
      const message = `registering Node ${name} in ${cluster.name}: ${errorText(error)}`;
      return this.#record(vm, { state: "refused", reason: "RegistrationFailed", message, node: name, attempts });
    }
    this.#record(vm, {
      state: "joined",
      reason: undefined,
      message: `Node ${name} registered in ${cluster.name}`,
      node: name,
      nodeReady: true,
      attempts,
    });
  }

  async #versionOf(cluster: Cluster): Promise<string> {
    if (cluster.version === undefined) {
      const response = await kubeExpect(cluster.target, { path: "/version", timeoutMs: this.#requestTimeoutMs }, [200]);
      const version = isRecord(response.json) ? response.json.gitVersion : undefined;
      cluster.version = typeof version === "string" ? version : "";
    }
    return cluster.version;
  }

  /** The joined Node's Ready condition, when the VM's OS comes up or goes down. */
  async #setReady(vmId: string, ready: boolean): Promise<void> {
    const record = this.#records.get(vmId);
    const cluster = record?.cluster === undefined ? undefined : this.#clusters.get(record.cluster);
    if (record?.state !== "joined" || record.node === undefined || cluster === undefined) return;
    try {
      const found = await setNodeReady(cluster.target, record.node, ready);
      this.#record(
        { id: vmId, name: record.vmName },
        {
          state: "joined",
          nodeReady: found && ready,
          message: found
            ? `Node ${record.node} ${ready ? "Ready" : "NotReady (the VM is down)"}`
            : `Node ${record.node} is gone`,
        },
      );
    } catch (error) {
      this.#record({ id: vmId, name: record.vmName }, { state: "joined", message: errorText(error) });
    }
  }

  async #deleteNode(vmId: string): Promise<void> {
    const record = this.#records.get(vmId);
    const cluster = record?.cluster === undefined ? undefined : this.#clusters.get(record.cluster);
    if (record?.state !== "joined" || record.node === undefined || cluster === undefined) return;
    await deleteNode(cluster.target, record.node).catch(() => undefined);
  }
}
