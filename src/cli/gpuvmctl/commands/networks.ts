// networks list|get|delete
import type { VpcNetwork } from "../../../cloud/wire.ts";
import { orDash } from "../output.ts";
import { resourceGroup } from "../resource-commands.ts";

export const NETWORKS_COMMAND = resourceGroup<VpcNetwork>({
  group: "networks",
  what: "network",
  family: "network",
  summary: "VPC networks",
  list: async (ctx) => (await ctx.client()).networks.list(await ctx.projectId()),
  columns: () => [
    { header: "NAME", value: (n) => n.name },
    { header: "ID", value: (n) => n.id },
    { header: "CIDR", value: (n) => n.cidr },
    { header: "SUBNETS", value: (n) => String(n.subnets.length), align: "right" },
  ],
  details: (network) => [
    ["Name", network.name],
    ["ID", network.id],
    ["CIDR", network.cidr],
    ["Gateway", orDash(network.gateway)],
    ["Subnets", orDash(network.subnets.join(", "))],
  ],
  remove: {
    summary: "delete a network (no VM or firewall rule may use it)",
    call: (client, projectId, id) => client.networks.delete(projectId, id),
  },
});
