// Every endpoint of the client against the real simulator (src/simulator), operations followed with the
// OperationTracker. Complements endpoints.test.ts (exact requests against a stub).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CloudClient, createCloudClient } from "../../src/cloud/client.ts";
import { CloudError, isConflict, isNotFound } from "../../src/cloud/errors.ts";
import { type OperationOutcome, OperationTracker } from "../../src/cloud/operations.ts";
import { TokenBucket } from "../../src/cloud/rate-limit.ts";
import { sizesEqual } from "../../src/cloud/sizes.ts";
import type { RequestEvent } from "../../src/cloud/transport.ts";
import type { Operation, OperationFamily } from "../../src/cloud/wire.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/index.ts";

let sim: RunningSimulator;
let cloud: CloudClient;
let projectId: string;
const trackers = new Map<OperationFamily, OperationTracker>();

beforeAll(async () => {
  // The simulator's own rate limit (20/s) would only slow this journey down; 429 handling is tested elsewhere.
  sim = await startSimulator({ port: 0, latencyMs: 0, rateLimit: false });
  projectId = sim.projectId;
  cloud = createCloudClient({ baseUrl: sim.url, credentials: { apiKey: sim.apiKey }, rateLimiter: false });
});
afterAll(async () => {
  for (const tracker of trackers.values()) tracker.stop();
  await sim.close();
});

/** Follow an operation to its end through the tracker of its family. */
async function settle(family: OperationFamily, operation: Operation): Promise<Operation> {
  let tracker = trackers.get(family);
  if (!tracker) {
    tracker = new OperationTracker({ client: cloud, projectId, family, intervalMs: 20 });
    trackers.set(family, tracker);
  }
  const outcome: OperationOutcome = await tracker.track(operation);
  if (outcome.vanished) throw new Error(`operation ${outcome.operationId} vanished`);
  return outcome.operation;
}

describe("against the simulator", () => {
  it("authenticates with email and password, refreshes, changes the password", async () => {
    const userCloud = createCloudClient({ baseUrl: sim.url, credentials: sim.user, rateLimiter: false });
    const projects = await userCloud.projects.list();
    expect(projects.map((p) => p.id)).toContain(projectId);
    const token = await userCloud.auth.token();
    expect(token.token_type.toLowerCase()).toBe("bearer");
    const refreshed = await userCloud.auth.refresh(token.refresh_token);
    expect(refreshed.refresh_token).not.toBe(token.refresh_token);
    await expect(userCloud.auth.refresh(token.refresh_token)).rejects.toBeInstanceOf(CloudError);
    const newPassword = "a-brand-new-password";
    await userCloud.auth.changePassword({ current_password: sim.user.password, new_password: newPassword });
    // The client signs in with the new password from now on.
    await expect(userCloud.auth.token()).resolves.toMatchObject({ token_type: expect.any(String) });
    await userCloud.auth.changePassword({ current_password: newPassword, new_password: sim.user.password });
  });

  it("reads organizations, billing link, projects and the catalogue", async () => {
    const orgs = await cloud.organizations.list();
    const org = orgs[0];
    expect(org).toBeDefined();
    if (!org) return;
    expect((await cloud.organizations.billingLink(org.id)).url).toMatch(/^https?:\/\//);
    const project = await cloud.projects.get(projectId);
    expect(project.organization.id).toBe(org.id);
    expect(await cloud.catalogue.locations(projectId)).not.toHaveLength(0);
    expect(await cloud.catalogue.images(projectId)).not.toHaveLength(0);
    expect((await cloud.catalogue.specs(projectId)).map((s) => s.product_name)).toContain("a40.1x");
    const availability = await cloud.catalogue.availabilities(projectId, { product_name: "a40.1x" });
    expect(availability.every((a) => a.type === "a40.1x")).toBe(true);
    expect(Array.isArray(await cloud.usage.list(projectId, { start_date: "2026-11-01", end_date: "2026-11-30" }))).toBe(
      true,
    );
  });

  it("runs a disk, a network, a firewall rule and a VM through their lifecycles", async () => {
    const [location] = await cloud.catalogue.locations(projectId);
    if (!location) throw new Error("simulator has no location");

    // Disk: create, read, grow (answered maybe in the other unit), list.
    const diskOp = await settle(
      "disk",
      await cloud.disks.create(projectId, { name: "data-1", size: "1TiB", location }),
    );
    expect(diskOp.state).toBe("SUCCEEDED");
    const diskId = diskOp.metadata.id;
    expect(sizesEqual((await cloud.disks.get(projectId, diskId)).size, "1024GiB")).toBe(true);
    await settle("disk", await cloud.disks.resize(projectId, diskId, "2TiB"));
    expect(sizesEqual((await cloud.disks.get(projectId, diskId)).size, "2TiB")).toBe(true);
    expect((await cloud.disks.list(projectId)).map((d) => d.id)).toContain(diskId);

    // Network and firewall rule.
    const netOp = await settle(
      "network",
      await cloud.networks.create(projectId, { name: "net-a", cidr: "10.8.0.0/16" }),
    );
    const networkId = netOp.metadata.id;
    expect((await cloud.networks.get(projectId, networkId)).cidr).toBe("10.8.0.0/16");
    expect((await cloud.networks.list(projectId)).map((n) => n.id)).toContain(networkId);
    const ruleOp = await settle(
      "firewall-rule",
      await cloud.firewallRules.create(projectId, {
        name: "ssh",
        vpc_network_id: networkId,
        direction: "ingress",
        action: "allow",
        protocols: ["tcp"],
        sources: [{ cidr: "0.0.0.0/0" }],
        destination_ports: ["22"],
      }),
    );
    const ruleId = ruleOp.metadata.id;
    expect((await cloud.firewallRules.get(projectId, ruleId)).destination_ports).toEqual(["22"]);
    await settle(
      "firewall-rule",
      await cloud.firewallRules.patch(projectId, ruleId, { destination_ports: ["22", "8000-9000"] }),
    );
    expect((await cloud.firewallRules.list(projectId)).find((r) => r.id === ruleId)?.destination_ports).toEqual([
      "22",
      "8000-9000",
    ]);

    // VM with the disk attached: create, list, stop, update, start, reset, terminate.
    const vmOp = await settle(
      "vm",
      await cloud.vms.create(projectId, {
        name: "train-1",
        type: "a40.1x",
        location,
        ssh_public_key: "ssh-ed25519 AAAAC3Nza test",
        disks: [{ id: diskId }],
      }),
    );
    expect(vmOp.state).toBe("SUCCEEDED");
    const vmId = vmOp.metadata.id;
    expect((await cloud.vms.get(projectId, vmId)).state).toBe("STATE_RUNNING");
    const listed: string[] = [];
    for await (const vm of cloud.vms.listAll(projectId, { names: ["train-1"], limit: 1 })) listed.push(vm.id);
    expect(listed).toEqual([vmId]);
    await expect(cloud.vms.start(projectId, vmId)).rejects.toSatisfy(isConflict);
    await settle("vm", await cloud.vms.stop(projectId, vmId));
    expect((await cloud.vms.get(projectId, vmId)).state).toBe("STATE_STOPPED");
    await settle("vm", await cloud.vms.update(projectId, vmId, { type: "a40.2x", disks: [] }));
    expect((await cloud.vms.get(projectId, vmId)).type).toBe("a40.2x");
    await settle("vm", await cloud.vms.start(projectId, vmId));
    await settle("vm", await cloud.vms.reset(projectId, vmId));
    expect((await cloud.vms.get(projectId, vmId)).state).toBe("STATE_RUNNING");

    // Operations of every family can be listed and read.
    for (const [family, op] of [
      ["vm", vmOp],
      ["disk", diskOp],
      ["network", netOp],
      ["firewall-rule", ruleOp],
    ] as const) {
      const ops = await cloud.operations.list(projectId, family, { resource_id: op.metadata.id });
      expect(ops.map((o) => o.operation_id)).toContain(op.operation_id);
      expect((await cloud.operations.get(projectId, family, op.operation_id)).state).toBe("SUCCEEDED");
    }

    // Tear down in dependency order; reads after delete are 404.
    await settle("vm", await cloud.vms.terminate(projectId, vmId));
    await expect(cloud.vms.get(projectId, vmId)).rejects.toSatisfy(isNotFound);
    await settle("firewall-rule", await cloud.firewallRules.delete(projectId, ruleId));
    await expect(cloud.firewallRules.get(projectId, ruleId)).rejects.toSatisfy(isNotFound);
    await settle("network", await cloud.networks.delete(projectId, networkId));
    await settle("disk", await cloud.disks.delete(projectId, diskId));
    await expect(cloud.disks.get(projectId, diskId)).rejects.toSatisfy(isNotFound);
  });

  it("keeps below the server's rate limit with a client-side bucket shared by two clients", async () => {
    const limited = await startSimulator({ port: 0, latencyMs: 0, rateLimit: { ratePerSec: 20, burst: 5 } });
    try {
      const events: RequestEvent[] = [];
      const bucket = new TokenBucket({ ratePerSec: 10, burst: 3 });
      const make = () =>
        createCloudClient({
          baseUrl: limited.url,
          credentials: { apiKey: limited.apiKey },
          rateLimiter: bucket,
          observer: (e) => events.push(e),
        });
      const [first, second] = [make(), make()];
      const started = performance.now();
      await Promise.all(Array.from({ length: 14 }, (_, i) => (i % 2 ? first : second).vms.list(limited.projectId)));
      expect(performance.now() - started).toBeGreaterThanOrEqual(1000);
      expect(events).toHaveLength(14);
      expect(events.filter((e) => e.status === 429)).toEqual([]);
    } finally {
      await limited.close();
    }
  });
});
