// Fault injection, rate limiting, the admin API and the duplicate-name variant.
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { Disk, FirewallRule, itemsOf, Operation, Vm, VmListPage } from "../../src/cloud/wire.ts";
import { createManualClock } from "../../src/simulator/index.ts";
import type { Api } from "./helpers.ts";
import { errorOf, ok, opOf, startTestSimulator, vmBody } from "./helpers.ts";

let api: Api | undefined;
afterEach(async () => {
  await api?.sim.close();
  api = undefined;
});

const Counts = z.object({ counts: z.record(z.string(), z.number()) });

describe("injected faults", () => {
  it("answers an injected error on one route, for a given count, with its status and code", async () => {
    api = await startTestSimulator({
      faults: {
        errors: [{ method: "GET", route: "/projects/:projectId/vms", status: 503, code: "unavailable", count: 2 }],
      },
    });
    errorOf(await api.call("GET", api.project("/vms")), 503, "unavailable");
    ok(await api.call("GET", api.project("/disks")), itemsOf(Disk));
    errorOf(await api.call("GET", api.project("/vms")), 503, "unavailable");
    ok(await api.call("GET", api.project("/vms")), VmListPage);

    // At run time: a 500 carries an error_id; a 429 carries Retry-After.
    const put = await api.admin("PUT", "/faults", {
      errors: [{ route: "/projects/:projectId/disks*", status: 500, count: 1 }],
    });
    expect(put.status).toBe(200);
    const failed = await api.call("GET", api.project("/disks"));
    errorOf(failed, 500, "internal_error");
    expect((failed.body as { error_id?: string }).error_id).toMatch(/^[0-9a-f-]{36}$/);
    await api.admin("PUT", "/faults", { errors: [{ status: 429, retry_after_seconds: 3, count: 1 }] });
    const limited = await api.call("GET", "/projects");
    errorOf(limited, 429, "too_many_requests");
    expect(limited.headers.get("retry-after")).toBe("3");
    expect((await api.admin("GET", "/faults")).body).toMatchObject({ errors: [{ status: 429, count: 0 }] });
    await api.admin("DELETE", "/faults");
    expect((await api.admin("GET", "/faults")).body).toMatchObject({ errors: [], latency: [] });
    errorOf(await api.admin("PUT", "/faults", { errors: [{ status: 200 }] }), 400, "bad_request");
    // What fired, by kind (npm run chaos reports it); the counts survive clearing the faults, until reset.
    expect((await api.admin("GET", "/faults/fired")).body).toEqual({ http_429: 1, http_500: 1, http_503: 2 });
    expect((await api.admin("DELETE", "/faults/fired")).body).toEqual({});
  });

  it("adds latency to one route", async () => {
    api = await startTestSimulator({ faults: { latency: [{ route: "/projects/:projectId/images", ms: 300 }] } });
    const slow = performance.now();
    await api.call("GET", api.project("/images"));
    expect(performance.now() - slow).toBeGreaterThanOrEqual(290);
    const fast = performance.now();
    await api.call("GET", api.project("/specs"));
    expect(performance.now() - fast).toBeLessThan(290);
  });

  it("fails operations with the configured code and rolls the change back", async () => {
    api = await startTestSimulator({
      faults: { operation_failures: [{ family: "vm", operation_name: "CREATE", code: "quota_exceeded", count: 1 }] },
    });
    const failed = await api.settle(
      "vm",
      opOf(await api.call("POST", api.project("/vms"), vmBody("quota"))).operation_id,
    );
    expect(failed).toMatchObject({ state: "FAILED", result: { code: "quota_exceeded" } });
    expect(failed.completed_at).not.toBe("");
    errorOf(await api.call("GET", api.project(`/vms/${failed.metadata.id}`)), 404, "not_found");
    const retried = await api.settle(
      "vm",
      opOf(await api.call("POST", api.project("/vms"), vmBody("quota"))).operation_id,
    );
    expect(retried.state).toBe("SUCCEEDED");
    await api.admin("PUT", "/faults", { operation_failures: [{ operation_name: "STOP", rate: 1 }] });
    const stop = await api.settle(
      "vm",
      opOf(await api.call("PATCH", api.project(`/vms/${retried.metadata.id}`), { action: "STOP" })).operation_id,
    );
    expect(stop).toMatchObject({ state: "FAILED", result: { code: "internal_error" } });
    expect(ok(await api.call("GET", api.project(`/vms/${retried.metadata.id}`)), Vm).state).toBe("STATE_RUNNING");
  });

  it("loses the response of a change that was nevertheless applied", async () => {
    api = await startTestSimulator({
      faults: { lost_responses: [{ method: "POST", route: "/projects/:projectId/disks", count: 1 }] },
    });
    const body = { name: "lost", size: "10GiB", location: "us-east1-a" };
    await expect(api.call("POST", api.project("/disks"), body)).rejects.toThrow();
    let disks: z.output<typeof Disk>[] = [];
    for (let attempt = 0; attempt < 100 && disks.length === 0; attempt++) {
      disks = ok(await api.call("GET", api.project("/disks")), itemsOf(Disk)).items;
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    expect(disks.map((d) => d.name)).toEqual(["lost"]);
    // The retry now meets the name the lost call took.
    errorOf(await api.call("POST", api.project("/disks"), body), 409, "conflict");
  });

  it("hides new resources for N ms after create (eventual consistency)", async () => {
    const clock = createManualClock();
    api = await startTestSimulator({ clock, latencyMs: 1000, faults: { not_found_after_create_ms: 5000 } });
    const op = opOf(await api.call("POST", api.project("/vms"), vmBody("shy")));
    errorOf(await api.call("GET", api.project(`/vms/${op.metadata.id}`)), 404, "not_found");
    expect(ok(await api.call("GET", api.project("/vms")), VmListPage).items).toEqual([]);
    clock.advance(4999);
    errorOf(await api.call("GET", api.project(`/vms/${op.metadata.id}`)), 404, "not_found");
    clock.advance(1);
    expect(ok(await api.call("GET", api.project(`/vms/${op.metadata.id}`)), Vm).state).toBe("STATE_RUNNING");
  });

  it("changes capacity at run time", async () => {
    api = await startTestSimulator();
    const Shape = z.record(z.string(), z.record(z.string(), z.object({ capacity: z.number(), used: z.number() })));
    // What a GET gives, edited and put back: one shape for reading and writing.
    const read = ok(await api.admin("GET", "/capacity"), Shape);
    const edited = { "us-east1-a": { ...read["us-east1-a"], "a40.1x": { capacity: 0, used: 0 } } };
    const written = ok(await api.admin("PUT", "/capacity", edited), Shape);
    const capacity = ok(await api.admin("GET", "/capacity"), Shape);
    expect(written).toEqual(capacity);
    expect(capacity["us-east1-a"]?.["a40.1x"]?.capacity).toBe(0);
    expect(capacity["us-east1-a"]?.["a40.2x"]).toEqual(read["us-east1-a"]?.["a40.2x"]);
    errorOf(await api.admin("PUT", "/capacity", { "us-east1-a": { "a40.1x": 0 } }), 400, "bad_request");
    const op = await api.settle(
      "vm",
      opOf(await api.call("POST", api.project("/vms"), vmBody("none-left"))).operation_id,
    );
    expect(op.result).toMatchObject({ code: "out_of_stock" });
    errorOf(await api.admin("PUT", "/capacity", { "mars-1a": { "a40.1x": { capacity: 1 } } }), 400, "bad_request");
  });
});

describe("duplicate names answered as a failed operation", () => {
  it("ends the second create FAILED already_exists", async () => {
    api = await startTestSimulator({ duplicateNames: "operation" });
    await api.settle("vm", opOf(await api.call("POST", api.project("/vms"), vmBody("twin"))).operation_id);
    const second = await api.settle(
      "vm",
      opOf(await api.call("POST", api.project("/vms"), vmBody("twin"))).operation_id,
    );
    expect(second).toMatchObject({ state: "FAILED", result: { code: "already_exists" } });
    expect(ok(await api.call("GET", api.project("/vms?names=twin")), VmListPage).items.length).toBe(1);
  });
});

describe("rate limiting", () => {
  it("answers 429 with Retry-After beyond the burst, per credential", async () => {
    api = await startTestSimulator({ rateLimit: { ratePerSec: 1, burst: 5 } });
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) statuses.push((await api.call("GET", "/projects")).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
    const limited = await api.call("GET", "/projects");
    errorOf(limited, 429, "too_many_requests");
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    // Another credential has its own bucket.
    const tenant = ok(await api.admin("POST", "/projects", { name: "b" }), z.object({ api_key: z.string() }));
    expect((await api.call("GET", "/projects", undefined, tenant.api_key)).status).toBe(200);
    // Turned off at run time.
    await api.admin("PUT", "/settings", { rate_limit: false });
    expect((await api.call("GET", "/projects")).status).toBe(200);
  });

  it("is on by default: 20/s sustained, burst 40", async () => {
    api = await startTestSimulator({ rateLimit: undefined });
    // 80 at once: with burst 40 at 20/s some are refused unless answering them all took two seconds.
    const statuses = await Promise.all(
      Array.from({ length: 80 }, () => api?.call("GET", "/projects").then((a) => a.status)),
    );
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(1);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(40);
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
  });
});

describe("admin API", () => {
  it("counts requests per method and route template, and resets them", async () => {
    api = await startTestSimulator();
    await api.call("GET", api.project("/vms"));
    await api.call("GET", api.project("/vms"));
    await api.call("GET", api.project("/vms/x"));
    await api.call("PUT", api.project("/vms"));
    const counts = ok(await api.admin("GET", "/requests"), Counts).counts;
    expect(counts["GET /v0.1/projects/:projectId/vms"]).toBe(2);
    expect(counts["GET /v0.1/projects/:projectId/vms/:vmId"]).toBe(1);
    expect(counts["PUT /v0.1/projects/:projectId/vms"]).toBe(1);
    await api.admin("DELETE", "/requests");
    expect(ok(await api.admin("GET", "/requests"), Counts).counts).toEqual({});
  });

  it("logs every write in order: when, who (User-Agent), which route and VM action, how it was answered", async () => {
    api = await startTestSimulator({
      faults: { lost_responses: [{ method: "PATCH", route: "/projects/:projectId/vms/:vmId", count: 1 }] },
    });
    const vmOp = await api.settle(
      "vm",
      opOf(await api.call("POST", api.project("/vms"), vmBody("logged"))).operation_id,
    );
    const before = Date.now();
    await api.call("PATCH", api.project(`/vms/${vmOp.metadata.id}`), { action: "RESET" }).catch(() => undefined);
    await api.call("PATCH", api.project(`/vms/${vmOp.metadata.id}`), { action: "STOP" });
    await api.call("GET", api.project("/vms"));
    const log = (await api.admin("GET", "/requests/log")).body as {
      writes: { at: number; method: string; route: string; path: string; action?: string; status?: unknown }[];
    };
    expect(log.writes.map(({ method, route, action, status }) => ({ method, route, action, status }))).toEqual([
      { method: "POST", route: "/projects/:projectId/vms", action: undefined, status: 200 },
      { method: "PATCH", route: "/projects/:projectId/vms/:vmId", action: "RESET", status: "lost" },
      { method: "PATCH", route: "/projects/:projectId/vms/:vmId", action: "STOP", status: 200 },
    ]);
    expect(log.writes[1]?.path).toBe(`/projects/${api.sim.projectId}/vms/${vmOp.metadata.id}`);
    expect(log.writes[1]?.at).toBeGreaterThanOrEqual(before - 5);
    expect((log.writes[1] as { userAgent?: unknown }).userAgent).toBe("node");
    // The lost answer's operation is known all the same (the change was made).
    expect((log.writes[1] as { operationId?: unknown }).operationId).toMatch(/.+/);
    await api.admin("DELETE", "/requests");
    expect(((await api.admin("GET", "/requests/log")).body as { writes: unknown[] }).writes).toEqual([]);
  });

  it("shows and resets state, and changes resources behind the operator's back", async () => {
    api = await startTestSimulator();
    const vmOp = await api.settle(
      "vm",
      opOf(await api.call("POST", api.project("/vms"), vmBody("drifter"))).operation_id,
    );
    const drifted = await api.admin("PUT", `/vms/${vmOp.metadata.id}/state`, { state: "STATE_STOPPED" });
    expect(drifted.status).toBe(200);
    expect(ok(await api.call("GET", api.project(`/vms/${vmOp.metadata.id}`)), Vm).state).toBe("STATE_STOPPED");
    errorOf(await api.admin("PUT", `/vms/${vmOp.metadata.id}/state`, { state: "ASLEEP" }), 400, "bad_request");

    const network = (await api.call("GET", api.project("/vpc/networks"))).body as { items: { id: string }[] };
    const rule = {
      name: "r",
      vpc_network_id: network.items[0]?.id,
      direction: "ingress",
      action: "allow",
      protocols: ["tcp"],
    };
    const ruleOp = await api.settle(
      "firewall-rule",
      opOf(await api.call("POST", api.project("/vpc/firewall-rules"), rule)).operation_id,
    );
    await api.admin("PATCH", `/firewall-rules/${ruleOp.metadata.id}`, { destination_ports: ["3389"] });
    expect(
      ok(await api.call("GET", api.project(`/vpc/firewall-rules/${ruleOp.metadata.id}`)), FirewallRule)
        .destination_ports,
    ).toEqual(["3389"]);

    const state = ok(await api.admin("GET", "/state"), z.object({ vms: z.array(z.object({ name: z.string() })) }));
    expect(state.vms.map((v) => v.name)).toEqual(["drifter"]);
    await api.admin("DELETE", `/resources/vms/${vmOp.metadata.id}`);
    errorOf(await api.call("GET", api.project(`/vms/${vmOp.metadata.id}`)), 404, "not_found");
    errorOf(await api.admin("DELETE", "/resources/boats/x"), 400, "bad_request");

    await api.admin("POST", "/reset");
    expect(ok(await api.call("GET", api.project("/vpc/firewall-rules")), itemsOf(FirewallRule)).items).toEqual([]);
    errorOf(await api.admin("GET", "/nothing"), 404, "not_found");
  });
});

describe("fault rates", () => {
  it("fires a fault only when the random draw falls under its rate", async () => {
    let draw = 0.7;
    api = await startTestSimulator({
      random: () => draw,
      faults: { errors: [{ route: "/projects", status: 503, rate: 0.5 }] },
    });
    expect((await api.call("GET", "/projects")).status).toBe(200);
    draw = 0.2;
    errorOf(await api.call("GET", "/projects"), 503, "unavailable");
  });

  it("changes operation latency and the unknown-operation status at run time", async () => {
    api = await startTestSimulator();
    const settings = await api.admin("PUT", "/settings", { latency_ms: 60_000 });
    expect(settings.body).toMatchObject({ latency_ms: 60_000, rate_limit: false });
    await api.admin("PUT", "/settings", { unknown_operation_status: 403 });
    errorOf(await api.call("GET", api.project("/vms/operations/no-such-operation")), 403, "forbidden");
    const op = opOf(await api.call("POST", api.project("/vms"), vmBody("slow")));
    await new Promise((resolve) => setTimeout(resolve, 20));
    const inFlight = ok(await api.call("GET", api.project("/vms/operations?state=IN_PROGRESS")), itemsOf(Operation));
    expect(inFlight.items.map((o) => o.operation_id)).toEqual([op.operation_id]);
  });
});
