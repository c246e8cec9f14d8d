// GpuNetwork: create, read, delete (the contract's endpoint) once no firewall rule or VM uses it. A server with
// only the spec's endpoints has neither the network list nor delete: networks are read by id, and deleting one
// stalls as NotSupported (deletionPolicy: Orphan lets the object go).
import { REASONS } from "../../api/common.ts";
import { type GpuNetworkSpec, gpuNetworkKind } from "../../api/gpu-network.ts";
import type { VpcNetwork } from "../../cloud/wire.ts";
import type { ExternalClient, KindDefinition, Observation } from "../managed/external.ts";
import { createdAtFromOperations, findResource, itemByName, knownId, rereadById } from "./support.ts";

export function networkAtProvider(network: VpcNetwork): Record<string, unknown> {
  return { cloudName: network.name, cidr: network.cidr, gateway: network.gateway, subnets: [...network.subnets] };
}

export function observeNetwork(spec: GpuNetworkSpec, network: VpcNetwork): Extract<Observation, { exists: true }> {
  const cidrChanged = network.cidr !== "" && network.cidr !== spec.cidr;
  return {
    exists: true,
    id: network.id,
    name: network.name,
    ready: true,
    upToDate: true,
    atProvider: networkAtProvider(network),
    ...(cidrChanged
      ? {
          terminal: {
            reason: REASONS.ImmutableFieldChanged,
            message: `spec.cidr ${spec.cidr} differs from the network's ${network.cidr}; a network's range cannot change`,
          },
        }
      : {}),
  };
}

export const gpuNetwork: KindDefinition<GpuNetworkSpec, undefined> = {
  info: gpuNetworkKind,
  family: "network",
  locations: () => [],
  references: () => [],
  external(account, deps): ExternalClient<GpuNetworkSpec, undefined> {
    const { client, projectId } = account;
    return {
      resolve: async () => ({ type: "ready", resolved: undefined }),
      async observe(mr, options, signal) {
        // On a server without the network list (beyond the spec), a network is read by the id its create
        // operation named (metadata.id, kept in status.id); it cannot be looked up by name.
        const network = await findResource(account.networks, mr, options, (id) =>
          client.networks.get(projectId, id, { signal }),
        );
        if (network === undefined) return { exists: false };
        const observed = { ...observeNetwork(mr.spec, network), reads: [network] };
        // Found by name only: when it was created decides whether this object may adopt it.
        if (knownId(mr) !== undefined) return observed;
        const createdAt = await createdAtFromOperations(account, "network", network.id, signal);
        return createdAt !== undefined ? { ...observed, createdAt } : observed;
      },
      reread: (mr) => rereadById(account.networks, mr),
      async findByName(cloudName, signal) {
        // A server without the network list cannot look a name up: nothing to adopt (spec.id imports).
        const network = await itemByName(account.networks, cloudName);
        if (network === undefined) return undefined;
        const createdAt = await createdAtFromOperations(account, "network", network.id, signal);
        return { id: network.id, ...(createdAt !== undefined ? { createdAt } : {}) };
      },
      async create(mr, _resolved, target, signal) {
        const operation = await client.networks.create(
          projectId,
          { name: target.cloudName, cidr: mr.spec.cidr },
          { signal },
        );
        return { type: "started", operation, statusFields: { cloudName: target.cloudName } };
      },
      update: async () => ({ type: "unchanged" }),
      async delete(_mr, id, signal) {
        return { type: "action", action: "DELETE", send: () => client.networks.delete(projectId, id, { signal }) };
      },
      deleteBlocker(mr) {
        // Known impossible on this server: say so at once (NotSupported) rather than wait for the rules to go.
        if (client.capabilities.supports("network-delete") === false) return undefined;
        // Rules of this namespace that still point at the network go first (the cloud would answer 409).
        const users = deps
          .listManaged("GpuFirewallRule", mr.metadata.namespace)
          .filter((rule) => (rule.spec as { networkRef?: { name?: string } }).networkRef?.name === mr.metadata.name);
        if (users.length === 0) return undefined;
        const names = (rules: typeof users) =>
          rules.map((rule) => `${rule.metadata.namespace}/${rule.metadata.name}`).join(", ");
        const staying = users.filter((rule) => rule.metadata.deletionTimestamp === undefined);
        if (staying.length === 0) {
          return { message: `waiting for GpuFirewallRules ${names(users)} to be deleted first`, needsAction: false };
        }
        return {
          message: `GpuFirewallRules ${names(staying)} still use this network (spec.networkRef): delete them, or point them at another network; the network is deleted once they are gone`,
          needsAction: true,
        };
      },
    };
  },
};
