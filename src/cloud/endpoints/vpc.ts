// The VPC endpoints: networks (create, list, read, delete) and firewall rules (create, list, read, patch,
// delete). The network list, the network delete and the firewall rule read, patch and delete are beyond the spec.
import {
  CreateFirewallRuleRequest,
  CreateNetworkRequest,
  FirewallRule,
  type Operation,
  PatchFirewallRuleRequest,
  VpcNetwork,
} from "../wire.ts";
import {
  type Call,
  type CallOptions,
  listOf,
  projectGet,
  projectRoute,
  projectWrite,
  requireId,
  validateBody,
} from "./shared.ts";

const Networks = listOf(VpcNetwork);
const FirewallRules = listOf(FirewallRule);

export function networkEndpoints(call: Call) {
  return {
    async create(projectId: string, request: CreateNetworkRequest, opts: CallOptions = {}): Promise<Operation> {
      const body = validateBody(CreateNetworkRequest, request, "POST", projectRoute("/vpc/networks"));
      return projectWrite(call, "POST", projectId, "/vpc/networks", () => "vpc/networks", body, opts);
    },
    /** Beyond the spec: the spec says the list exists but shows neither its path nor its answer. */
    async list(projectId: string, opts: CallOptions = {}): Promise<VpcNetwork[]> {
      const { p, endpoint } = projectGet(projectId, "/vpc/networks", Networks, opts, true);
      return call({ ...endpoint, path: `projects/${p}/vpc/networks`, collection: true });
    },
    async get(projectId: string, networkId: string, opts: CallOptions = {}): Promise<VpcNetwork> {
      const { p, route, endpoint } = projectGet(projectId, "/vpc/networks/:networkId", VpcNetwork, opts);
      return call({
        ...endpoint,
        path: `projects/${p}/vpc/networks/${requireId(networkId, "networkId", "GET", route)}`,
      });
    },
    async delete(projectId: string, networkId: string, opts: CallOptions = {}): Promise<Operation> {
      const net = requireId(networkId, "networkId", "DELETE", projectRoute("/vpc/networks/:networkId"));
      return projectWrite(
        call,
        "DELETE",
        projectId,
        "/vpc/networks/:networkId",
        () => `vpc/networks/${net}`,
        undefined,
        opts,
        true,
      );
    },
  };
}

export function firewallRuleEndpoints(call: Call) {
  return {
    async create(projectId: string, request: CreateFirewallRuleRequest, opts: CallOptions = {}): Promise<Operation> {
      const body = validateBody(CreateFirewallRuleRequest, request, "POST", projectRoute("/vpc/firewall-rules"));
      return projectWrite(call, "POST", projectId, "/vpc/firewall-rules", () => "vpc/firewall-rules", body, opts);
    },
    async list(projectId: string, opts: CallOptions = {}): Promise<FirewallRule[]> {
      const { p, endpoint } = projectGet(projectId, "/vpc/firewall-rules", FirewallRules, opts);
      return call({ ...endpoint, path: `projects/${p}/vpc/firewall-rules` });
    },
    async get(projectId: string, ruleId: string, opts: CallOptions = {}): Promise<FirewallRule> {
      const { p, route, endpoint } = projectGet(projectId, "/vpc/firewall-rules/:ruleId", FirewallRule, opts, true);
      return call({
        ...endpoint,
        path: `projects/${p}/vpc/firewall-rules/${requireId(ruleId, "ruleId", "GET", route)}`,
      });
    },
    async patch(
      projectId: string,
      ruleId: string,
      change: PatchFirewallRuleRequest,
      opts: CallOptions = {},
    ): Promise<Operation> {
      const route = projectRoute("/vpc/firewall-rules/:ruleId");
      const body = validateBody(PatchFirewallRuleRequest, change, "PATCH", route);
      const rule = requireId(ruleId, "ruleId", "PATCH", route);
      return projectWrite(
        call,
        "PATCH",
        projectId,
        "/vpc/firewall-rules/:ruleId",
        () => `vpc/firewall-rules/${rule}`,
        body,
        opts,
        true,
      );
    },
    async delete(projectId: string, ruleId: string, opts: CallOptions = {}): Promise<Operation> {
      const rule = requireId(ruleId, "ruleId", "DELETE", projectRoute("/vpc/firewall-rules/:ruleId"));
      return projectWrite(
        call,
        "DELETE",
        projectId,
        "/vpc/firewall-rules/:ruleId",
        () => `vpc/firewall-rules/${rule}`,
        undefined,
        opts,
        true,
      );
    },
  };
}
