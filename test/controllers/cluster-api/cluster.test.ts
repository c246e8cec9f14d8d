// The GpuCluster controller's network and firewall rules, and the GpuMachineTemplate controller's capacity,
// in-process (simulator and test double, the test playing Cluster API): a network and rules are made where the
// spec asks, changed in place, and deleted with the GpuCluster; only locations that offer VMs are failure
// domains; a template says what a node of its type offers.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VM_TYPES } from "../../../src/cloud/wire.ts";
import { condition, type Env, startEnv } from "../harness.ts";
import {
  CLUSTER_API_CRDS,
  createCluster,
  createTemplate,
  deleteInfra,
  getInfra,
  patchInfra,
  waitInfra,
} from "./capi-double.ts";

let env: Env;

beforeAll(async () => {
  env = await startEnv({ crds: CLUSTER_API_CRDS, clusterApi: true });
}, 30_000);

afterAll(async () => {
  await env?.close();
});

interface CloudList {
  items: { id: string; name: string; protocols?: string[] }[];
}

const rule = { direction: "ingress", action: "allow", protocols: ["tcp"], destinationPorts: ["6443"] };

describe("GpuCluster network and firewall rules", () => {
  it("makes the network and rules the spec asks for, Ready once they are, and changes a rule in place", async () => {
    await createCluster(env, "net", {
      locations: ["us-east1-a"],
      network: { cidr: "10.20.0.0/16" },
      firewallRules: [{ name: "apiserver", ...rule }],
    });
    const ready = await waitInfra(env, "gpuclusters", "net", (c) => condition(c, "Ready")?.status === "True", 15_000);
    const network = await env.get("GpuNetwork", "net");
    expect(ready?.status?.networkId).toBe(network?.status?.id);
    // Pinned: a copy without status (clusterctl move) adopts the network instead of making another.
    expect(network?.spec.id).toBe(network?.status?.id);
    expect((ready?.status as { initialization?: unknown } | undefined)?.initialization).toEqual({ provisioned: true });
    const firewall = await env.get("GpuFirewallRule", "net-apiserver");
    expect(firewall?.spec).toMatchObject({ networkRef: { name: "net" }, destinationPorts: ["6443"] });
    expect(firewall?.metadata.ownerReferences?.[0]).toMatchObject({ kind: "GpuCluster", name: "net" });

    await patchInfra(env, "gpuclusters", "net", {
      spec: { firewallRules: [{ name: "apiserver", ...rule, protocols: ["tcp", "udp"] }] },
    });
    await env.waitFor("GpuFirewallRule", "net-apiserver", (r) => JSON.stringify(r?.spec.protocols) === '["tcp","udp"]');
    await env.waitFor(
      "GpuFirewallRule",
      "net-apiserver",
      (r) => (r?.status as { printableProtocols?: string })?.printableProtocols === "tcp,udp",
    );
  });

  it("deletes its rules, then its network, from the cloud before it goes", async () => {
    const networkId = (await env.get("GpuNetwork", "net"))?.status?.id;
    await deleteInfra(env, "gpuclusters", "net");
    await waitInfra(env, "gpuclusters", "net", (c) => c === undefined, 20_000);
    expect(await env.get("GpuNetwork", "net")).toBeUndefined();
    expect(await env.get("GpuFirewallRule", "net-apiserver")).toBeUndefined();
    expect((await env.cloud<CloudList>("vpc/networks")).items.map((n) => n.id)).not.toContain(networkId);
    expect(
      (await env.cloud<CloudList>("vpc/firewall-rules")).items.filter((r) => r.name.includes("net-apiserver")),
    ).toEqual([]);
  });

  it("lists only locations that offer VMs as failure domains", async () => {
    await env.admin("PUT", "/capacity", {
      "eu-iceland1-a": Object.fromEntries(VM_TYPES.map((type) => [type, { capacity: 0 }])),
    });
    await createCluster(env, "fd", { locations: ["us-east1-a", "eu-iceland1-a"] });
    const ready = await waitInfra(env, "gpuclusters", "fd", (c) => condition(c, "Ready")?.status === "True");
    expect(ready?.status?.failureDomains).toEqual([{ name: "us-east1-a", controlPlane: true }]);
  });
});

describe("GpuMachineTemplate", () => {
  it("says what a node of its type offers (cpu, memory, GPUs) and its node info, from the specs endpoint", async () => {
    await createTemplate(env, "workers", "a100-80gb.8x");
    const template = await waitInfra(env, "gpumachinetemplates", "workers", (t) => t?.status?.capacity !== undefined);
    const specs = (
      await env.cloud<{ items: { product_name: string; cpu_cores: number; memory_gb: number }[] }>("specs")
    ).items;
    const spec = specs.find((item) => item.product_name === "a100-80gb.8x");
    expect(template?.status).toEqual({
      capacity: { cpu: String(spec?.cpu_cores), memory: `${spec?.memory_gb}Gi`, "nvidia.com/gpu": "8" },
      nodeInfo: { architecture: "amd64", operatingSystem: "linux" },
    });
    expect(await getInfra(env, "gpumachinetemplates", "workers")).toBeDefined();
  });
});
