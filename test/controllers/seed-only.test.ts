// The four kinds against a server with only the spec's endpoints (simulator profile seed-only): progress is read
// from the resources themselves, what the server cannot do stalls as NotSupported and says how to let go.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCloudClient } from "../../src/cloud/client.ts";
import type { Disk, FirewallRule } from "../../src/cloud/wire.ts";
import { CHANGE_INSTEAD, cannotDo } from "../../src/controllers/core/classify.ts";
import { condition, type Env, reasonOf, startEnv, vmSpec } from "./harness.ts";

const LATENCY_MS = 300;
let env: Env;
beforeAll(async () => {
  env = await startEnv({ simulator: { profile: "seed-only", latencyMs: LATENCY_MS } });
});
afterAll(async () => {
  await env?.close();
});

const state = async () =>
  (await env.admin("GET", "/state")) as {
    disks: { id: string; size: string }[];
    networks: { id: string; name: string }[];
    firewallRules: { id: string; name: string }[];
    vms: { id: string }[];
  };
const counts = async () => ((await env.admin("GET", "/requests")) as { counts: Record<string, number> }).counts;

describe("on a server with only the spec's endpoints", () => {
  it("brings a network, a disk, a rule and a VM with that disk to Ready", async () => {
    await env.apply("GpuNetwork", "net", { cidr: "10.20.0.0/16" });
    await env.apply("GpuDisk", "data", { size: "10GiB", location: "us-east1-a" });
    await env.apply("GpuFirewallRule", "ssh", {
      networkRef: { name: "net" },
      direction: "ingress",
      action: "allow",
      protocols: ["tcp"],
      sources: [{ cidr: "0.0.0.0/0" }],
      destinationPorts: ["22"],
    });
    await env.apply("GpuVm", "box", vmSpec({ disks: [{ diskRef: { name: "data" } }] }));
    const network = await env.waitReady("GpuNetwork", "net", 15_000);
    const disk = await env.waitReady("GpuDisk", "data", 15_000);
    const rule = await env.waitReady("GpuFirewallRule", "ssh", 15_000);
    const vm = await env.waitReady("GpuVm", "box", 15_000);
    const cloud = await state();
    expect(cloud.networks.map((n) => n.id)).toContain(network.status?.id);
    expect(cloud.disks.map((d) => d.id)).toEqual([disk.status?.id]);
    expect(cloud.firewallRules.map((r) => r.id)).toEqual([rule.status?.id]);
    expect(cloud.vms.map((v) => v.id)).toEqual([vm.status?.id]);
    // The operations of those families could not be read: the history says how they ended.
    const created = (disk.status?.operations as { name: string; state: string }[] | undefined)?.[0];
    expect(created).toMatchObject({ name: "CREATE", state: "SUCCEEDED" });
    expect(condition(network, "Stalled")?.status).toBe("False");
  });

  it("grows a disk and sees the new size in the disk itself", async () => {
    await env.patchSpec("GpuDisk", "data", { size: "20GiB" });
    await env.waitFor("GpuDisk", "data", (o) => o?.status?.size === "20GiB" && reasonOf(o) === "Available", 15_000);
    const disks = ((await env.cloud<{ items: Disk[] }>("disks")).items ?? []).map((d) => d.size);
    expect(disks).toEqual(["20GiB"]);
  });

  it("refuses a rule change the server cannot make, without sending it, and says what to do", async () => {
    const before = await counts();
    await env.patchSpec("GpuFirewallRule", "ssh", { destinationPorts: ["22", "443"] });
    const stalled = await env.waitFor("GpuFirewallRule", "ssh", (o) => reasonOf(o) === "NotSupported", 15_000);
    expect(condition(stalled, "Stalled")?.status).toBe("True");
    expect(condition(stalled, "Ready")?.message).toMatch(/does not support changing a firewall rule/);
    const after = await counts();
    const patches = "PATCH /v0.1/projects/:projectId/vpc/firewall-rules/:ruleId";
    expect((after[patches] ?? 0) - (before[patches] ?? 0)).toBeLessThanOrEqual(1);
    const rules = (await env.cloud<{ items: FirewallRule[] }>("vpc/firewall-rules")).items;
    expect(rules[0]?.destination_ports).toEqual(["22"]);
    await env.patchSpec("GpuFirewallRule", "ssh", { destinationPorts: ["22"] });
    await env.waitReady("GpuFirewallRule", "ssh", 15_000);
  });

  it("deletes the VM and the disk cleanly", async () => {
    await env.remove("GpuVm", "box");
    await env.waitFor("GpuVm", "box", (o) => o === undefined, 15_000);
    await env.remove("GpuDisk", "data");
    await env.waitFor("GpuDisk", "data", (o) => o === undefined, 15_000);
    const cloud = await state();
    expect(cloud.vms).toEqual([]);
    expect(cloud.disks).toEqual([]);
  });

  it("reports NotSupported for deleting a rule and a network, and releases them with deletionPolicy Orphan", async () => {
    const rule = await env.get("GpuFirewallRule", "ssh");
    await env.remove("GpuFirewallRule", "ssh");
    const stalledRule = await env.waitFor("GpuFirewallRule", "ssh", (o) => reasonOf(o) === "NotSupported", 15_000);
    expect(condition(stalledRule, "Ready")?.message).toMatch(/deletionPolicy: Orphan/);
    await env.patchSpec("GpuFirewallRule", "ssh", { deletionPolicy: "Orphan" });
    await env.waitFor("GpuFirewallRule", "ssh", (o) => o === undefined, 15_000);

    const network = await env.get("GpuNetwork", "net");
    await env.remove("GpuNetwork", "net");
    const stalledNet = await env.waitFor("GpuNetwork", "net", (o) => reasonOf(o) === "NotSupported", 15_000);
    expect(condition(stalledNet, "Ready")?.message).toMatch(
      /does not support deleting a network.*deletionPolicy: Orphan/,
    );
    await env.patchSpec("GpuNetwork", "net", { deletionPolicy: "Orphan" });
    await env.waitFor("GpuNetwork", "net", (o) => o === undefined, 15_000);

    // Both stay in the cloud, as the server cannot delete them.
    const cloud = await state();
    expect(cloud.firewallRules.map((r) => r.id)).toEqual([rule?.status?.id]);
    expect(cloud.networks.map((n) => n.id)).toContain(network?.status?.id);
  });

  it("says NotSupported at once for a network whose rules remain, once the account knows it cannot delete", async () => {
    await env.apply("GpuNetwork", "net2", { cidr: "10.21.0.0/16" });
    await env.waitReady("GpuNetwork", "net2", 15_000);
    await env.apply("GpuFirewallRule", "web", {
      networkRef: { name: "net2" },
      direction: "ingress",
      action: "allow",
      protocols: ["tcp"],
      sources: [{ cidr: "0.0.0.0/0" }],
      destinationPorts: ["443"],
    });
    await env.waitReady("GpuFirewallRule", "web", 15_000);
    await env.remove("GpuNetwork", "net2");
    // Not "waiting for firewall rules web": that wait would never end in a deletion.
    const stalled = await env.waitFor("GpuNetwork", "net2", (o) => reasonOf(o) === "NotSupported", 15_000);
    expect(condition(stalled, "Ready")?.message).toMatch(/does not support deleting a network/);
    await env.patchSpec("GpuNetwork", "net2", { deletionPolicy: "Orphan" });
    await env.waitFor("GpuNetwork", "net2", (o) => o === undefined, 15_000);
    await env.patchSpec("GpuFirewallRule", "web", { deletionPolicy: "Orphan" });
    await env.remove("GpuFirewallRule", "web");
    await env.waitFor("GpuFirewallRule", "web", (o) => o === undefined, 15_000);
  });

  it("says once that the server lacks an endpoint, when it answered and when the account already knew", async () => {
    const client = createCloudClient({ baseUrl: env.sim.url, credentials: { apiKey: env.sim.apiKey } });
    const messages: string[] = [];
    for (let attempt = 0; attempt < 2; attempt++) {
      // The first call is answered 404 by the server; the second is refused at once (the account knows).
      const error = await client.networks.delete(env.sim.projectId, "vpc-0000").then(
        () => undefined,
        (failure: unknown) => failure,
      );
      messages.push(cannotDo(error, CHANGE_INSTEAD).message);
    }
    for (const message of messages) {
      expect(message).toMatch(/^this server does not support deleting a network \(DELETE \S+: /);
      expect(message.match(/not support/g)).toHaveLength(1);
    }
    expect(messages[1]).toMatch(/checked again after/);
  });
});
