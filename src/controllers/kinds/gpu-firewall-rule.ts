// GpuFirewallRule: resolves networkRef and vmRef to cloud ids (waiting for them), creates the rule, PATCHes
// the changeable fields when they drift, deletes. Compared after normalising (ports `*` = `1-65535` = all,
// list order, duplicates), or drift never settles. A server with only the spec's endpoints cannot read one rule,
// change or delete it: rules are found in the list, and a change or a delete stalls as NotSupported with what
// to do instead.
import { REASONS } from "../../api/common.ts";
import { type FirewallEndpoint, type GpuFirewallRuleSpec, gpuFirewallRuleKind } from "../../api/gpu-firewall-rule.ts";
import type { EndpointRequest, FirewallRule, PatchFirewallRuleRequest } from "../../cloud/wire.ts";
import type { ManagedObject } from "../core/object-model.ts";
import type {
  Blocked,
  ExternalClient,
  KindDefinition,
  KindDeps,
  Observation,
  Resolution,
} from "../managed/external.ts";
import {
  blocked,
  createdAtFromOperations,
  findResource,
  itemByName,
  knownId,
  missingTarget,
  readyTarget,
  rereadById,
  type Waiting,
} from "./support.ts";

const ALL_PORTS = new Set(["*", "1-65535", "0-65535"]);

/** Ports as a sorted set; anything meaning "all ports" (or nothing) becomes the empty list. */
export function normalizePorts(ports: readonly (string | number)[] | undefined): string[] {
  const list = (ports ?? []).map((port) => String(port).trim());
  if (list.length === 0 || list.some((port) => ALL_PORTS.has(port))) return [];
  const single = list.map((port) => {
    const [low, high] = port.split("-");
    return high !== undefined && low === high ? low : port;
  });
  return [...new Set(single)].sort();
}

interface EndpointLike {
  cidr?: string;
  resource_id?: string;
}

/** Endpoints as sorted `cidr:` / `id:` keys. */
export function normalizeEndpoints(endpoints: readonly EndpointLike[]): string[] {
  const keys = endpoints.map((endpoint) =>
    endpoint.resource_id ? `id:${endpoint.resource_id}` : `cidr:${endpoint.cidr ?? ""}`,
  );
  return [...new Set(keys)].sort();
}

export function normalizeProtocols(protocols: readonly string[]): string[] {
  return [...new Set(protocols.map((protocol) => protocol.toLowerCase()))].sort();
}

/** The desired changeable fields, with references already resolved to ids. */
export interface DesiredRule {
  name: string;
  protocols: ("tcp" | "udp" | "icmp")[];
  sources: EndpointRequest[];
  destinations: EndpointRequest[];
  source_ports: string[];
  destination_ports: string[];
}

/** Fields whose normalised forms differ (empty: up to date). */
export function ruleDrift(desired: DesiredRule, observed: FirewallRule): (keyof PatchFirewallRuleRequest)[] {
  const drift: (keyof PatchFirewallRuleRequest)[] = [];
  const same = (a: string[], b: string[]): boolean => a.join(",") === b.join(",");
  if (desired.name !== observed.name) drift.push("name");
  if (!same(normalizeProtocols(desired.protocols), normalizeProtocols(observed.protocols))) drift.push("protocols");
  if (!same(normalizeEndpoints(desired.sources), normalizeEndpoints(observed.sources))) drift.push("sources");
  if (!same(normalizeEndpoints(desired.destinations), normalizeEndpoints(observed.destinations)))
    drift.push("destinations");
  if (!same(normalizePorts(desired.source_ports), normalizePorts(observed.source_ports))) drift.push("source_ports");
  if (!same(normalizePorts(desired.destination_ports), normalizePorts(observed.destination_ports))) {
    drift.push("destination_ports");
  }
  return drift;
}

export function observeRule(
  desired: DesiredRule | undefined,
  rule: FirewallRule,
): Extract<Observation, { exists: true }> {
  const drift = desired === undefined ? [] : ruleDrift(desired, rule);
  return {
    exists: true,
    id: rule.id,
    name: rule.name,
    ready: true,
    upToDate: drift.length === 0,
    atProvider: {
      cloudName: rule.name,
      state: rule.state,
      networkId: rule.vpc_network_id,
      // The Protocols column: tcp,udp (a list column would print ["tcp","udp"]).
      printableProtocols: rule.protocols.join(","),
    },
    ...(drift.length > 0 ? { diff: `changed: ${drift.join(", ")}` } : {}),
  };
}

function resolveEndpoints(
  deps: KindDeps,
  namespace: string,
  endpoints: readonly FirewallEndpoint[] | undefined,
  field: string,
): { endpoints: EndpointRequest[] } | Waiting | Blocked {
  const resolved: EndpointRequest[] = [];
  for (const [index, endpoint] of (endpoints ?? []).entries()) {
    if (endpoint.cidr !== undefined) resolved.push({ cidr: endpoint.cidr, resource_id: "" });
    else if (endpoint.resourceId !== undefined) resolved.push({ cidr: "", resource_id: endpoint.resourceId });
    else if (endpoint.vmRef !== undefined) {
      const what = `GpuVm ${namespace}/${endpoint.vmRef.name}`;
      const vm = deps.managed("GpuVm", namespace, endpoint.vmRef.name);
      const where = `spec.${field}[${index}].vmRef`;
      if (vm === undefined) return missingTarget(deps, "GpuVm", namespace, endpoint.vmRef.name, where);
      if (vm.metadata.deletionTimestamp !== undefined) {
        return blocked(
          REASONS.ReferenceDeleting,
          `${what} is being deleted: remove it from ${where} (or delete this rule too)`,
        );
      }
      // The rule follows the VM's id, Ready or not: it needs only to exist.
      if (vm.status.id === undefined) return { type: "waiting", message: `${what} has no cloud id yet` };
      resolved.push({ cidr: "", resource_id: vm.status.id });
    }
  }
  return { endpoints: resolved };
}

/** What a rule's `resolve` finds: its network and the changeable fields, references resolved to ids. */
interface RuleResolved {
  networkId: string;
  desired: DesiredRule;
}

function resolveRule(
  deps: KindDeps,
  mr: ManagedObject<GpuFirewallRuleSpec>,
  cloudName: string,
): Resolution<RuleResolved> {
  const namespace = mr.metadata.namespace;
  let networkId = mr.spec.networkId;
  if (mr.spec.networkRef !== undefined) {
    const network = readyTarget(deps, "GpuNetwork", namespace, mr.spec.networkRef.name, "spec.networkRef");
    if ("type" in network) return network;
    networkId = network.id;
  }
  if (networkId === undefined) return { type: "invalid", message: "set exactly one of networkRef and networkId" };
  const sources = resolveEndpoints(deps, namespace, mr.spec.sources, "sources");
  if ("type" in sources) return sources;
  const destinations = resolveEndpoints(deps, namespace, mr.spec.destinations, "destinations");
  if ("type" in destinations) return destinations;
  const desired: DesiredRule = {
    name: cloudName,
    protocols: [...mr.spec.protocols],
    sources: sources.endpoints,
    destinations: destinations.endpoints,
    source_ports: [...(mr.spec.sourcePorts ?? [])],
    destination_ports: [...(mr.spec.destinationPorts ?? [])],
  };
  return { type: "ready", resolved: { networkId, desired } };
}

export const gpuFirewallRule: KindDefinition<GpuFirewallRuleSpec, RuleResolved> = {
  info: gpuFirewallRuleKind,
  family: "firewall-rule",
  locations: () => [],
  references: (spec) => [
    ...(spec.networkRef ? [`GpuNetwork/${spec.networkRef.name}`] : []),
    ...[...(spec.sources ?? []), ...(spec.destinations ?? [])].flatMap((e) =>
      e.vmRef ? [`GpuVm/${e.vmRef.name}`] : [],
    ),
  ],
  external(account, deps): ExternalClient<GpuFirewallRuleSpec, RuleResolved> {
    const { client, projectId } = account;
    return {
      resolve: async (mr, cloudName) => resolveRule(deps, mr, cloudName),
      async observe(mr, options, signal) {
        const rule = await findResource(account.firewallRules, mr, options, (id) =>
          client.firewallRules.get(projectId, id, { signal }),
        );
        if (rule === undefined) return { exists: false };
        const observed = { ...observeRule(options.resolved?.desired, rule), reads: [rule] };
        // Found by name only: when it was created decides whether this object may adopt it.
        if (knownId(mr) !== undefined) return observed;
        const createdAt = await createdAtFromOperations(account, "firewall-rule", rule.id, signal);
        return createdAt !== undefined ? { ...observed, createdAt } : observed;
      },
      reread: (mr) => rereadById(account.firewallRules, mr),
      async findByName(cloudName, signal) {
        const rule = await itemByName(account.firewallRules, cloudName);
        if (rule === undefined) return undefined;
        const createdAt = await createdAtFromOperations(account, "firewall-rule", rule.id, signal);
        return { id: rule.id, ...(createdAt !== undefined ? { createdAt } : {}) };
      },
      async create(mr, { networkId, desired }, target, signal) {
        const operation = await client.firewallRules.create(
          projectId,
          {
            name: target.cloudName,
            vpc_network_id: networkId,
            direction: mr.spec.direction,
            action: mr.spec.action,
            protocols: desired.protocols,
            sources: desired.sources,
            destinations: desired.destinations,
            source_ports: desired.source_ports,
            destination_ports: desired.destination_ports,
          },
          { signal },
        );
        return { type: "started", operation, statusFields: { cloudName: target.cloudName, networkId } };
      },
      async update(_mr, { desired }, observed, signal) {
        const change: PatchFirewallRuleRequest = {
          name: desired.name,
          protocols: desired.protocols,
          sources: desired.sources,
          destinations: desired.destinations,
          source_ports: desired.source_ports,
          destination_ports: desired.destination_ports,
        };
        return {
          type: "action",
          action: "UPDATE",
          send: () => client.firewallRules.patch(projectId, observed.id, change, { signal }),
          note: `PATCH rule (${observed.diff ?? "drift"})`,
        };
      },
      async delete(_mr, id, signal) {
        return {
          type: "action",
          action: "DELETE",
          send: () => client.firewallRules.delete(projectId, id, { signal }),
        };
      },
    };
  },
};
