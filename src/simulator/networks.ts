// VPC networks: create, read, list, and (contract-decisions.md) delete once no firewall rule or VM uses them.
import type { CreateNetworkRequest } from "../cloud/wire.ts";
import { conflict, notFound, SimError } from "./errors.ts";
import type { NetworkRecord, OperationRecord } from "./state.ts";
import { StoreArea } from "./store-area.ts";

export class Networks extends StoreArea {
  json(network: NetworkRecord) {
    return {
      id: network.id,
      name: network.name,
      subnets: [...network.subnets],
      gateway: network.gateway,
      cidr: network.cidr,
    };
  }

  /** Make sure the project has its default network (VMs' interfaces live there). */
  ensureDefault(projectId: string): void {
    this.records.defaultNetwork(projectId);
  }

  create(projectId: string, body: CreateNetworkRequest): OperationRecord {
    this.records.requirePaymentMethod(projectId);
    this.records.defaultNetwork(projectId);
    if (this.records.nameTaken(projectId, "network", body.name)) {
      return this.operations.duplicate(projectId, "network", body.name, body);
    }
    const network = this.records.newNetwork(projectId, body.name, body.cidr ?? "10.0.0.0/16");
    return this.operations.start(projectId, "network", "CREATE", network.id, body, network);
  }

  get(projectId: string, networkId: string): NetworkRecord {
    const network = this.records.networks.get(networkId);
    if (network === undefined || network.projectId !== projectId || !this.records.visible(network)) {
      throw notFound(`network ${networkId} not found`);
    }
    return network;
  }

  list(projectId: string): NetworkRecord[] {
    this.records.defaultNetwork(projectId);
    return [...this.records.networks.values()].filter((n) => n.projectId === projectId && this.records.visible(n));
  }

  delete(projectId: string, networkId: string): OperationRecord {
    const network = this.get(projectId, networkId);
    const inFlight = this.records.operations.get(network.busyOperationId);
    if (inFlight?.name === "DELETE" && inFlight.state === "IN_PROGRESS") return inFlight;
    this.#checkUnused(network);
    const op = this.operations.start(projectId, "network", "DELETE", network.id, {});
    network.busyOperationId = op.id;
    return op;
  }

  #checkUnused(network: NetworkRecord): void {
    const rules = [...this.records.rules.values()].filter((r) => r.vpcNetworkId === network.id).length;
    const vms = [...this.records.vms.values()].filter((v) => v.networkId === network.id).length;
    if (rules > 0 || vms > 0) {
      throw conflict(`network ${network.id} is still used by ${rules} firewall rule(s) and ${vms} VM(s)`);
    }
  }

  apply(op: OperationRecord): unknown {
    if (op.name === "CREATE") {
      const network = op.pending as NetworkRecord;
      const now = this.records.now();
      network.createdAtMs = now;
      network.visibleAtMs = now + this.context.faults.notFoundAfterCreateMs();
      this.records.networks.set(network.id, network);
      return this.json(network);
    }
    const network = this.records.networks.get(op.resourceId);
    if (network === undefined) throw new SimError(404, `network ${op.resourceId} no longer exists`);
    network.busyOperationId = "";
    this.#checkUnused(network);
    this.records.networks.delete(network.id);
    return this.json(network);
  }
}
