// Firewall rules: create (on a network of the project), list, and (contract-decisions.md) read, PATCH of the
// changeable fields, delete; plus the admin drift that changes a rule behind the operator's back.
import { randomUUID } from "node:crypto";
import type { CreateFirewallRuleRequest, PatchFirewallRuleRequest } from "../cloud/wire.ts";
import { badRequest, conflict, notFound, SimError } from "./errors.ts";
import { requireIdle } from "./records.ts";
import type { EndpointRecord, FirewallRuleRecord, OperationRecord } from "./state.ts";
import { StoreArea } from "./store-area.ts";

type EndpointInput = { cidr?: string | undefined; resource_id?: string | undefined };

const endpoints = (list: EndpointInput[] | undefined): EndpointRecord[] =>
  (list ?? []).map((e) => ({ cidr: e.cidr ?? "", resource_id: e.resource_id ?? "" }));

export class FirewallRules extends StoreArea {
  json(rule: FirewallRuleRecord) {
    return {
      id: rule.id,
      name: rule.name,
      direction: rule.direction,
      action: rule.action,
      vpc_network_id: rule.vpcNetworkId,
      state: "active",
      sources: rule.sources.map((e) => ({ ...e })),
      source_ports: [...rule.sourcePorts],
      destinations: rule.destinations.map((e) => ({ ...e })),
      destination_ports: [...rule.destinationPorts],
      protocols: [...rule.protocols],
    };
  }

  create(projectId: string, body: CreateFirewallRuleRequest): OperationRecord {
    this.records.requirePaymentMethod(projectId);
    const network = this.records.networks.get(body.vpc_network_id);
    if (network === undefined || network.projectId !== projectId) {
      throw badRequest(`vpc_network_id: network ${body.vpc_network_id} not found in this project`);
    }
    if (this.records.nameTaken(projectId, "firewall-rule", body.name)) {
      return this.operations.duplicate(projectId, "firewall-rule", body.name, body);
    }
    const rule: FirewallRuleRecord = {
      id: randomUUID(),
      projectId,
      name: body.name,
      direction: body.direction,
      action: body.action,
      vpcNetworkId: network.id,
      sources: endpoints(body.sources),
      sourcePorts: [...(body.source_ports ?? [])],
      destinations: endpoints(body.destinations),
      destinationPorts: [...(body.destination_ports ?? [])],
      protocols: [...body.protocols],
      createdAtMs: this.records.now(),
      visibleAtMs: 0,
      busyOperationId: "",
    };
    return this.operations.start(projectId, "firewall-rule", "CREATE", rule.id, body, rule);
  }

  get(projectId: string, ruleId: string): FirewallRuleRecord {
    const rule = this.records.rules.get(ruleId);
    if (rule === undefined || rule.projectId !== projectId || !this.records.visible(rule)) {
      throw notFound(`firewall rule ${ruleId} not found`);
    }
    return rule;
  }

  list(projectId: string): FirewallRuleRecord[] {
    return [...this.records.rules.values()].filter((r) => r.projectId === projectId && this.records.visible(r));
  }

  patch(projectId: string, ruleId: string, body: PatchFirewallRuleRequest): OperationRecord {
    const rule = this.get(projectId, ruleId);
    requireIdle(rule, `firewall rule ${rule.id}`);
    if (body.name !== undefined && this.records.nameTaken(projectId, "firewall-rule", body.name, rule.id)) {
      throw conflict(`a firewall-rule named '${body.name}' already exists in this project`);
    }
    const op = this.operations.start(projectId, "firewall-rule", "UPDATE", rule.id, body, body);
    rule.busyOperationId = op.id;
    return op;
  }

  delete(projectId: string, ruleId: string): OperationRecord {
    const rule = this.get(projectId, ruleId);
    const inFlight = this.records.operations.get(rule.busyOperationId);
    if (inFlight?.name === "DELETE" && inFlight.state === "IN_PROGRESS") return inFlight;
    requireIdle(rule, `firewall rule ${rule.id}`);
    const op = this.operations.start(projectId, "firewall-rule", "DELETE", rule.id, {});
    rule.busyOperationId = op.id;
    return op;
  }

  apply(op: OperationRecord): unknown {
    if (op.name === "CREATE") {
      const rule = op.pending as FirewallRuleRecord;
      const now = this.records.now();
      rule.createdAtMs = now;
      rule.visibleAtMs = now + this.context.faults.notFoundAfterCreateMs();
      this.records.rules.set(rule.id, rule);
      return this.json(rule);
    }
    const rule = this.records.rules.get(op.resourceId);
    if (rule === undefined) throw new SimError(404, `firewall rule ${op.resourceId} no longer exists`);
    rule.busyOperationId = "";
    if (op.name === "DELETE") {
      this.records.rules.delete(rule.id);
      return this.json(rule);
    }
    this.#change(rule, op.pending as PatchFirewallRuleRequest);
    return this.json(rule);
  }

  #change(rule: FirewallRuleRecord, patch: PatchFirewallRuleRequest): void {
    if (patch.name !== undefined) rule.name = patch.name;
    if (patch.protocols !== undefined) rule.protocols = [...patch.protocols];
    if (patch.sources !== undefined) rule.sources = endpoints(patch.sources);
    if (patch.destinations !== undefined) rule.destinations = endpoints(patch.destinations);
    if (patch.source_ports !== undefined) rule.sourcePorts = [...patch.source_ports];
    if (patch.destination_ports !== undefined) rule.destinationPorts = [...patch.destination_ports];
  }

  /** Admin drift: change fields of a rule without an operation. */
  mutate(id: string, patch: PatchFirewallRuleRequest): void {
    const rule = this.records.rules.get(id);
    if (rule === undefined) throw notFound(`firewall rule ${id} not found`);
    this.#change(rule, patch);
    this.context.changed();
  }
}
