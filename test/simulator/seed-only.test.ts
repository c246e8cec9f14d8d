// Conformance of the seed-only profile: exactly the endpoints the spec shows. Every route that only
// contract-decisions.md adds answers as an unknown route does; the spec's routes work as in the contract profile;
// finished operations vanish after the retention and then read 403. Plain HTTP, manual clock.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { parseSimulatorArgs } from "../../src/cli/commands/simulator.ts";
import { Disk, FirewallRule, itemsOf, Operation, Vm, VpcNetwork } from "../../src/cloud/wire.ts";
import type { ManualClock } from "../../src/simulator/index.ts";
import { CONTRACT_ONLY_ROUTES, createManualClock } from "../../src/simulator/index.ts";
import type { Api, HttpAnswer } from "./helpers.ts";
import { errorOf, ok, opOf, startTestSimulator, vmBody } from "./helpers.ts";

const AdminSettings = z.record(z.string(), z.unknown());
const LATENCY = 2000;
const RETENTION = 60_000;
let api: Api;
let clock: ManualClock;

beforeAll(async () => {
  clock = createManualClock(Date.UTC(2026, 10, 20, 12, 0, 0));
  api = await startTestSimulator({ clock, latencyMs: LATENCY, profile: "seed-only" });
});
afterAll(async () => {
  await api.sim.close();
});

/** What the server answers for a route it does not have at all. */
function unknownRouteAnswer(method: string, path: string) {
  return { status: 404, body: { code: "not_found", message: `no route ${method} /v0.1${path}` } };
}

const essentials = (answer: HttpAnswer) => ({ status: answer.status, body: answer.body });

/** Create a network, a rule on it, a disk and a VM, and let every operation settle. */
async function seedResources() {
  const network = opOf(await api.call("POST", api.project("/vpc/networks"), { name: "net-a", cidr: "10.8.0.0/16" }));
  const disk = opOf(
    await api.call("POST", api.project("/disks"), { name: "disk-a", size: "10GiB", location: "us-east1-a" }),
  );
  const vm = opOf(await api.call("POST", api.project("/vms"), vmBody("vm-a")));
  clock.advance(LATENCY);
  const rule = opOf(
    await api.call("POST", api.project("/vpc/firewall-rules"), {
      name: "rule-a",
      action: "allow",
      direction: "ingress",
      protocols: ["tcp"],
      sources: [{ cidr: "0.0.0.0/0" }],
      destinations: [{ cidr: "10.8.0.0/16" }],
      vpc_network_id: network.metadata.id,
    }),
  );
  clock.advance(LATENCY);
  return { network, disk, vm, rule };
}

describe("seed-only profile", () => {
  let ids: Awaited<ReturnType<typeof seedResources>>;

  beforeAll(async () => {
    ids = await seedResources();
  });

  it("says which profile it serves", async () => {
    expect(api.sim.profile).toBe("seed-only");
    const settings = ok(await api.admin("GET", "/settings"), AdminSettings);
    expect(settings).toMatchObject({
      profile: "seed-only",
      operation_retention_ms: RETENTION,
      unknown_operation_status: 403,
      availability_counts: false,
    });
  });

  it("answers availability as the spec shows it: yes or no, without a count", async () => {
    const answer = await api.call("GET", api.project("/availabilities?product_name=a100.1x&location=us-east1-a"));
    expect(answer.body).toEqual({ items: [{ type: "a100.1x", location: "us-east1-a", available: true }] });
  });

  it("answers every contract-only route exactly as an unknown route, with or without credentials", async () => {
    const concrete: Record<string, string> = {
      projectId: api.sim.projectId,
      operationId: ids.disk.operation_id,
      networkId: ids.network.metadata.id,
      ruleId: ids.rule.metadata.id,
    };
    expect(CONTRACT_ONLY_ROUTES).toHaveLength(11);
    for (const route of CONTRACT_ONLY_ROUTES) {
      const path = route.url.replace(/:(\w+)/g, (_, name: string) => concrete[name] ?? name);
      const body = route.method === "PATCH" ? { name: "renamed" } : undefined;
      const withKey = await api.call(route.method, path, body);
      const anonymous = await api.call(route.method, path, body, null);
      const expected = unknownRouteAnswer(route.method, path);
      expect(essentials(withKey), `${route.method} ${route.url}`).toEqual(expected);
      expect(essentials(anonymous), `${route.method} ${route.url} without a token`).toEqual(expected);
      expect(withKey.headers.get("allow"), route.url).toBeNull();
      expect(withKey.headers.get("content-type")).toBe(
        (await api.call(route.method, `/no-such-route${path}`)).headers.get("content-type"),
      );
    }
    // The formula is the one of a path that exists nowhere.
    expect(essentials(await api.call("GET", "/no/such/route"))).toEqual(unknownRouteAnswer("GET", "/no/such/route"));
  });

  it("leaves the resources those routes would have touched alone", async () => {
    const networks = await api.admin("GET", "/state");
    const state = networks.body as { networks: { id: string }[]; firewallRules: { id: string; name: string }[] };
    expect(state.networks.map((n) => n.id)).toContain(ids.network.metadata.id);
    expect(state.firewallRules.find((r) => r.id === ids.rule.metadata.id)?.name).toBe("rule-a");
  });

  it("serves the spec's routes: resources appear in their reads and lists once their operation is done", async () => {
    const disks = ok(await api.call("GET", api.project("/disks")), itemsOf(Disk)).items;
    expect(disks.map((d) => d.id)).toEqual([ids.disk.metadata.id]);
    ok(await api.call("GET", api.project(`/disks/${ids.disk.metadata.id}`)), Disk);
    const network = ok(await api.call("GET", api.project(`/vpc/networks/${ids.network.metadata.id}`)), VpcNetwork);
    expect(network).toMatchObject({ name: "net-a", cidr: "10.8.0.0/16" });
    const rules = ok(await api.call("GET", api.project("/vpc/firewall-rules")), itemsOf(FirewallRule)).items;
    expect(rules.map((r) => r.name)).toEqual(["rule-a"]);
    expect(ok(await api.call("GET", api.project(`/vms/${ids.vm.metadata.id}`)), Vm).state).toBe("STATE_RUNNING");
    const vmOp = ok(await api.call("GET", api.project(`/vms/operations/${ids.vm.operation_id}`)), Operation);
    expect(vmOp.state).toBe("SUCCEEDED");
  });

  it("resizes and deletes disks and terminates VMs; a disk in flight is absent until its create is done", async () => {
    const resize = opOf(await api.call("PATCH", api.project(`/disks/${ids.disk.metadata.id}`), { size: "20GiB" }));
    expect(resize.metadata.operation_name).toBe("RESIZE");
    clock.advance(LATENCY);
    expect(ok(await api.call("GET", api.project(`/disks/${ids.disk.metadata.id}`)), Disk).size).toBe("20GiB");

    const second = opOf(
      await api.call("POST", api.project("/disks"), { name: "disk-b", size: "10GiB", location: "us-east1-a" }),
    );
    errorOf(await api.call("GET", api.project(`/disks/${second.metadata.id}`)), 404, "not_found");
    clock.advance(LATENCY);
    ok(await api.call("GET", api.project(`/disks/${second.metadata.id}`)), Disk);
    opOf(await api.call("DELETE", api.project(`/disks/${second.metadata.id}`)));
    clock.advance(LATENCY);
    errorOf(await api.call("GET", api.project(`/disks/${second.metadata.id}`)), 404, "not_found");

    const vm = opOf(await api.call("POST", api.project("/vms"), vmBody("vm-terminated")));
    clock.advance(LATENCY);
    const terminate = opOf(await api.call("DELETE", api.project(`/vms/${vm.metadata.id}`)));
    expect(terminate.metadata.operation_name).toBe("DELETE");
    clock.advance(LATENCY);
    errorOf(await api.call("GET", api.project(`/vms/${vm.metadata.id}`)), 404, "not_found");
  });

  it("still answers a wrong method on a spec path with 405 and Allow", async () => {
    const wrong = await api.call("PUT", api.project(`/vms/${ids.vm.metadata.id}`));
    errorOf(wrong, 405, "method_not_allowed");
    expect(wrong.headers.get("allow")).toContain("PATCH");
    // GET on the network collection is contract-only: unknown route, not 405, although POST is served there.
    expect(essentials(await api.call("GET", api.project("/vpc/networks")))).toEqual(
      unknownRouteAnswer("GET", api.project("/vpc/networks")),
    );
    errorOf(await api.call("PUT", api.project("/vpc/networks")), 405, "method_not_allowed");
  });

  it("drops finished operations from lists and reads after the retention; they then read 403", async () => {
    const stop = opOf(await api.call("PATCH", api.project(`/vms/${ids.vm.metadata.id}`), { action: "STOP" }));
    const listAll = async () =>
      ok(await api.call("GET", api.project("/vms/operations")), itemsOf(Operation)).items.map((o) => o.operation_id);
    clock.advance(LATENCY);
    expect(await listAll()).toContain(stop.operation_id);
    clock.advance(RETENTION - 1);
    expect(ok(await api.call("GET", api.project(`/vms/operations/${stop.operation_id}`)), Operation).state).toBe(
      "SUCCEEDED",
    );
    clock.advance(1);
    expect(await listAll()).not.toContain(stop.operation_id);
    const bounded = ok(
      await api.call("GET", api.project("/vms/operations?lower_time_bound=2000-01-01T00:00:00Z")),
      itemsOf(Operation),
    ).items;
    expect(bounded.map((o) => o.operation_id)).not.toContain(stop.operation_id);
    errorOf(await api.call("GET", api.project(`/vms/operations/${stop.operation_id}`)), 403, "forbidden");
  });

  it("never drops an operation in flight, however long it runs", async () => {
    await api.admin("PUT", "/settings", { latency_ms: RETENTION * 3 });
    const start = opOf(await api.call("PATCH", api.project(`/vms/${ids.vm.metadata.id}`), { action: "START" }));
    clock.advance(RETENTION * 2);
    const inFlight = ok(
      await api.call("GET", api.project("/vms/operations?state=IN_PROGRESS")),
      itemsOf(Operation),
    ).items;
    expect(inFlight.map((o) => o.operation_id)).toEqual([start.operation_id]);
    clock.advance(RETENTION);
    expect(ok(await api.call("GET", api.project(`/vms/operations/${start.operation_id}`)), Operation).state).toBe(
      "SUCCEEDED",
    );
    await api.admin("PUT", "/settings", { latency_ms: LATENCY });
  });

  it("counts contract-only requests under their route template", async () => {
    await api.admin("DELETE", "/requests");
    await api.call("GET", api.project("/disks/operations?state=IN_PROGRESS"));
    await api.call("GET", api.project("/disks/operations?state=IN_PROGRESS"));
    await api.call("GET", api.project("/vpc/networks"));
    const counts = (await api.admin("GET", "/requests")).body as { counts: Record<string, number> };
    expect(counts.counts).toEqual({
      "GET /v0.1/projects/:projectId/disks/operations": 2,
      "GET /v0.1/projects/:projectId/vpc/networks": 1,
    });
  });
});

describe("operation retention, configured", () => {
  it("takes a retention option and a run-time setting, in either profile", async () => {
    const local = createManualClock(Date.UTC(2026, 10, 20, 12, 0, 0));
    const contract = await startTestSimulator({ clock: local, latencyMs: 10, operationRetentionMs: 1000 });
    try {
      const settings = ok(await contract.admin("GET", "/settings"), AdminSettings);
      expect(settings).toMatchObject({
        profile: "contract",
        operation_retention_ms: 1000,
        unknown_operation_status: 404,
      });
      const disk = opOf(
        await contract.call("POST", contract.project("/disks"), { name: "d", size: "1GiB", location: "us-east1-a" }),
      );
      local.advance(10 + 999);
      ok(await contract.call("GET", contract.project(`/disks/operations/${disk.operation_id}`)), Operation);
      local.advance(1);
      errorOf(await contract.call("GET", contract.project(`/disks/operations/${disk.operation_id}`)), 404, "not_found");
      // null keeps finished operations again.
      await contract.admin("PUT", "/settings", { operation_retention_ms: null });
      ok(await contract.call("GET", contract.project(`/disks/operations/${disk.operation_id}`)), Operation);
    } finally {
      await contract.sim.close();
    }
  });

  it("is a flag and a config-file field of the simulator command", async () => {
    expect(await parseSimulatorArgs(["--profile", "seed-only", "--operation-retention-ms", "5000"])).toEqual({
      profile: "seed-only",
      operationRetentionMs: 5000,
    });
    await expect(parseSimulatorArgs(["--profile", "spec"])).rejects.toThrow(
      /--profile: expected one of contract, seed-only/,
    );
    await expect(parseSimulatorArgs(["--operation-retention-ms", "-1"])).rejects.toThrow(/--operation-retention-ms/);
  });
});
