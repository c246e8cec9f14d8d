// Per-account capability discovery: the registry's states and re-probes, the classification of 404/405 on
// routes beyond the spec, and the client against both simulator profiles (request counts from /_sim).
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { CAPABILITY_NAMES, CapabilityRegistry, capabilityOf } from "../../src/cloud/capabilities.ts";
import { createCloudClient } from "../../src/cloud/client.ts";
import { CloudError, isNotFound, isUnsupported } from "../../src/cloud/errors.ts";
import { CONTRACT_ONLY_ROUTES, type RunningSimulator, startSimulator } from "../../src/simulator/index.ts";
import { PROJECT_ID } from "./fixtures.ts";
import { type StubServer, sendJson, startStub } from "./stub-server.ts";

const ROUTE = "/projects/:projectId/vpc/networks";
const missing = () =>
  new CloudError({ kind: "unsupported", status: 404, method: "GET", route: ROUTE, message: "GET … not supported" });

describe("CapabilityRegistry", () => {
  it("names one capability for each route the contract adds to the spec, and none for the spec's", () => {
    expect(CAPABILITY_NAMES).toHaveLength(CONTRACT_ONLY_ROUTES.length);
    for (const route of CONTRACT_ONLY_ROUTES) expect(capabilityOf(route.method, route.url), route.url).toBeDefined();
    expect(capabilityOf("GET", "/projects/:projectId/vms/operations")).toBeUndefined();
    expect(capabilityOf("GET", "/projects/:projectId/vpc/firewall-rules")).toBeUndefined();
  });

  it("refuses a missing capability locally, lets one re-probe through after the interval, and learns from it", () => {
    let now = 1_000;
    const registry = new CapabilityRegistry({ reprobeAfterMs: 60_000, now: () => now });
    expect(registry.supports("network-list")).toBeUndefined();
    expect(registry.refusal("network-list", "GET", ROUTE)).toBeUndefined();
    registry.record("network-list", missing());
    expect(registry.supports("network-list")).toBe(false);
    const refusal = registry.refusal("network-list", "GET", ROUTE);
    expect(refusal?.kind).toBe("unsupported");
    expect(refusal?.message).toMatch(/not supported by this server \(listing networks: .*checked again after/);

    now += 60_000;
    expect(registry.refusal("network-list", "GET", ROUTE)).toBeUndefined(); // the re-probe goes out
    expect(registry.refusal("network-list", "GET", ROUTE)).toBeDefined(); // everyone else waits for it
    registry.record("network-list", new CloudError({ kind: "timeout", method: "GET", route: ROUTE, message: "t" }));
    expect(registry.supports("network-list")).toBe(false); // inconclusive: still missing, next try in 60 s
    expect(registry.refusal("network-list", "GET", ROUTE)).toBeDefined();
    now += 60_000;
    expect(registry.refusal("network-list", "GET", ROUTE)).toBeUndefined();
    registry.record("network-list", "supported");
    expect(registry.supports("network-list")).toBe(true);
    expect(registry.refusal("network-list", "GET", ROUTE)).toBeUndefined();
    expect(registry.report().find((r) => r.capability === "network-list")).toMatchObject({
      state: "supported",
      since: now,
    });
  });

  it("tells its listener once per change of state, not once per refused call", () => {
    const changes: string[] = [];
    const registry = new CapabilityRegistry({
      onChange: (report) => changes.push(`${report.capability}:${report.state}`),
    });
    registry.record("network-delete", missing());
    registry.refusal("network-delete", "DELETE", ROUTE);
    registry.record("network-delete", missing());
    registry.record("network-list", "supported");
    registry.record("network-list", "supported");
    expect(changes).toEqual(["network-delete:unsupported", "network-list:supported"]);
  });

  it("does not take a 404 about a resource for a missing route", () => {
    const registry = new CapabilityRegistry();
    const gone = new CloudError({ kind: "http", status: 404, method: "GET", route: ROUTE, message: "not found" });
    registry.record("firewall-rule-read", gone);
    expect(registry.state("firewall-rule-read")).toBe("unknown");
  });
});

describe("classifying a 404 on a route beyond the spec", () => {
  let stub: StubServer;
  beforeEach(async () => {
    stub = await startStub();
  });
  afterEach(async () => {
    await stub.close();
  });
  const client = () =>
    createCloudClient({ baseUrl: stub.url, credentials: { apiKey: "k" }, rateLimiter: false, retryLimit: 0 });
  const failure = (promise: Promise<unknown>) =>
    promise.then(
      () => new Error("no error"),
      (error: unknown) => error,
    );

  it("reads any 404 on a list beyond the spec as a missing route, even one that names a resource", async () => {
    // A strict server routes /disks/operations to /disks/:diskId and says the disk "operations" does not exist.
    stub.handle((_, res) => sendJson(res, 404, { code: "not_found", message: "disk operations not found" }));
    expect(isUnsupported(await failure(client().operations.list(PROJECT_ID, "disk")))).toBe(true);
    expect(isUnsupported(await failure(client().networks.list(PROJECT_ID)))).toBe(true);
  });

  it("keeps a 404 about the project a plain not-found, and a well-formed 404 on a resource route too", async () => {
    stub.handle((_, res) => sendJson(res, 404, { code: "not_found", message: `project ${PROJECT_ID} not found` }));
    const c = client();
    const projectGone = await failure(c.networks.list(PROJECT_ID));
    expect(isNotFound(projectGone)).toBe(true);
    expect(c.capabilities.state("network-list")).toBe("unknown");
    stub.handle((_, res) => sendJson(res, 404, { code: "not_found", message: "firewall rule fw-1 not found" }));
    expect(isNotFound(await failure(c.firewallRules.delete(PROJECT_ID, "fw-1")))).toBe(true);
    expect(c.capabilities.state("firewall-rule-delete")).toBe("unknown");
  });

  it("remembers a missing route per client (per account): a second call sends nothing", async () => {
    stub.handle((_, res) => sendJson(res, 405, { code: "method_not_allowed", message: "DELETE not allowed" }));
    const c = client();
    expect(isUnsupported(await failure(c.networks.delete(PROJECT_ID, "n1")))).toBe(true);
    expect(isUnsupported(await failure(c.networks.delete(PROJECT_ID, "n2")))).toBe(true);
    expect(stub.requests).toHaveLength(1);
    // Another account learns for itself.
    expect(isUnsupported(await failure(client().networks.delete(PROJECT_ID, "n3")))).toBe(true);
    expect(stub.requests).toHaveLength(2);
  });
});

describe("the client against both simulator profiles", () => {
  const sims: RunningSimulator[] = [];
  beforeAll(async () => {
    for (const profile of ["contract", "seed-only"] as const) {
      sims.push(await startSimulator({ port: 0, latencyMs: 0, rateLimit: false, profile }));
    }
  });
  afterAll(async () => {
    for (const sim of sims) await sim.close();
  });

  async function requestCounts(sim: RunningSimulator): Promise<Record<string, number>> {
    const answer = (await (await fetch(`${sim.adminUrl}/requests`)).json()) as { counts: Record<string, number> };
    return answer.counts;
  }

  it("learns every capability of the seed-only server from one request each, then asks no more", async () => {
    const sim = sims[1] as RunningSimulator;
    const cloud = createCloudClient({ baseUrl: sim.url, credentials: { apiKey: sim.apiKey }, rateLimiter: false });
    const p = sim.projectId;
    const network = await cloud.networks.create(p, { name: "probe-net" });
    const tries: (() => Promise<unknown>)[] = [
      () => cloud.operations.list(p, "disk", { state: "IN_PROGRESS" }),
      () => cloud.operations.get(p, "disk", network.operation_id),
      () => cloud.operations.list(p, "network"),
      () => cloud.operations.get(p, "network", network.operation_id),
      () => cloud.operations.list(p, "firewall-rule"),
      () => cloud.operations.get(p, "firewall-rule", network.operation_id),
      () => cloud.networks.list(p),
      () => cloud.networks.delete(p, network.metadata.id),
      () => cloud.firewallRules.get(p, "rule-1"),
      () => cloud.firewallRules.patch(p, "rule-1", { name: "renamed" }),
      () => cloud.firewallRules.delete(p, "rule-1"),
    ];
    for (const attempt of tries) await expect(attempt()).rejects.toSatisfy(isUnsupported);
    expect(cloud.capabilities.report().map((r) => [r.capability, r.state])).toEqual(
      CAPABILITY_NAMES.map((name) => [name, "unsupported"]),
    );
    const before = await requestCounts(sim);
    for (const attempt of tries) await expect(attempt()).rejects.toSatisfy(isUnsupported);
    expect(await requestCounts(sim)).toEqual(before);
    // The spec's own routes are not touched by any of this.
    await expect(cloud.operations.list(p, "vm")).resolves.toEqual([]);
    await expect(cloud.networks.get(p, network.metadata.id)).resolves.toMatchObject({ name: "probe-net" });
  });

  it("finds every capability on the contract server", async () => {
    const sim = sims[0] as RunningSimulator;
    const cloud = createCloudClient({ baseUrl: sim.url, credentials: { apiKey: sim.apiKey }, rateLimiter: false });
    const p = sim.projectId;
    await cloud.operations.list(p, "disk");
    await cloud.operations.list(p, "network");
    await cloud.networks.list(p);
    expect(cloud.capabilities.supports("disk-operations-list")).toBe(true);
    expect(cloud.capabilities.supports("network-list")).toBe(true);
    expect(cloud.capabilities.supports("network-delete")).toBeUndefined();
  });
});
