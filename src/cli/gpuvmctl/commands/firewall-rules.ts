// firewall-rules list|get|delete
import type { Endpoint, FirewallRule } from "../../../cloud/wire.ts";
import { paintState } from "../output.ts";
import { resourceGroup } from "../resource-commands.ts";

const endpoints = (list: readonly Endpoint[]) =>
  list.length === 0 ? "any" : list.map((e) => e.cidr || e.resource_id || "?").join(",");
const ports = (list: readonly string[]) => (list.length === 0 ? "all" : list.join(","));

export const FIREWALL_RULES_COMMAND = resourceGroup<FirewallRule>({
  group: "firewall-rules",
  what: "firewall rule",
  family: "firewall-rule",
  summary: "firewall rules",
  list: async (ctx) => (await ctx.client()).firewallRules.list(await ctx.projectId()),
  columns: () => [
    { header: "NAME", value: (r) => r.name },
    { header: "ID", value: (r) => r.id },
    { header: "DIRECTION", value: (r) => r.direction },
    { header: "ACTION", value: (r) => r.action, paint: (v) => (v === "deny" ? "red" : undefined) },
    { header: "PROTOCOLS", value: (r) => r.protocols.join(",") },
    { header: "SOURCES", value: (r) => endpoints(r.sources) },
    { header: "PORTS", value: (r) => ports(r.destination_ports) },
    { header: "STATE", value: (r) => r.state, paint: (v) => paintState(v) },
  ],
  details: (rule) => [
    ["Name", rule.name],
    ["ID", rule.id],
    ["Network", rule.vpc_network_id],
    ["Direction", rule.direction],
    ["Action", rule.action],
    ["Protocols", rule.protocols.join(", ")],
    ["Sources", endpoints(rule.sources)],
    ["Source ports", ports(rule.source_ports)],
    ["Destinations", endpoints(rule.destinations)],
    ["Destination ports", ports(rule.destination_ports)],
    ["State", rule.state],
  ],
  remove: {
    summary: "delete a firewall rule",
    call: (client, projectId, id) => client.firewallRules.delete(projectId, id),
  },
});
