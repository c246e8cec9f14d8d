// The VM state machine, operation lists, token expiry and usage, stepped on a manual clock.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { itemsOf, Operation, TokenResponse, UsageItem, Vm } from "../../src/cloud/wire.ts";
import type { ManualClock } from "../../src/simulator/index.ts";
import { createManualClock } from "../../src/simulator/index.ts";
import type { Api } from "./helpers.ts";
import { errorOf, ok, opOf, startTestSimulator, vmBody } from "./helpers.ts";

const LATENCY = 2000;
const HOUR = 3_600_000;
let api: Api;
let clock: ManualClock;

beforeAll(async () => {
  // 23:00 UTC so that two hours of running cross midnight.
  clock = createManualClock(Date.UTC(2026, 10, 20, 23, 0, 0));
  api = await startTestSimulator({ clock, latencyMs: LATENCY, tokenTtlSeconds: 60 });
});
afterAll(async () => {
  await api.sim.close();
});

const readVm = async (id: string) => ok(await api.call("GET", api.project(`/vms/${id}`)), Vm);
const readOp = async (id: string) => ok(await api.call("GET", api.project(`/vms/operations/${id}`)), Operation);
const act = async (id: string, body: Record<string, unknown>) =>
  opOf(await api.call("PATCH", api.project(`/vms/${id}`), body));

describe("VM state machine", () => {
  let vmId = "";

  it("provisions: PROVISIONING while the operation is in flight, then RUNNING", async () => {
    const op = opOf(await api.call("POST", api.project("/vms"), vmBody("machine", { type: "a40.2x" })));
    vmId = op.metadata.id;
    expect((await readVm(vmId)).state).toBe("STATE_PROVISIONING");
    const inFlight = ok(
      await api.call("GET", api.project("/vms/operations?state=IN_PROGRESS")),
      itemsOf(Operation),
    ).items;
    expect(inFlight.map((o) => o.operation_id)).toEqual([op.operation_id]);
    clock.advance(LATENCY - 1);
    expect((await readOp(op.operation_id)).state).toBe("IN_PROGRESS");
    clock.advance(1);
    const done = await readOp(op.operation_id);
    expect(done.state).toBe("SUCCEEDED");
    expect(done.completed_at).not.toBe("");
    expect((await readVm(vmId)).state).toBe("STATE_RUNNING");
    expect(
      ok(await api.call("GET", api.project("/vms/operations?state=IN_PROGRESS")), itemsOf(Operation)).items,
    ).toEqual([]);
  });

  it("answers 409 for actions in the wrong state", async () => {
    errorOf(await api.call("PATCH", api.project(`/vms/${vmId}`), { action: "START" }), 409, "conflict");
    const stop = await act(vmId, { action: "STOP" });
    expect((await readVm(vmId)).state).toBe("STATE_STOPPING");
    errorOf(await api.call("PATCH", api.project(`/vms/${vmId}`), { action: "RESET" }), 409, "conflict");
    errorOf(await api.call("DELETE", api.project(`/vms/${vmId}`)), 409, "conflict");
    clock.advance(LATENCY);
    expect((await readOp(stop.operation_id)).state).toBe("SUCCEEDED");
    expect((await readVm(vmId)).state).toBe("STATE_STOPPED");
    errorOf(await api.call("PATCH", api.project(`/vms/${vmId}`), { action: "STOP" }), 409, "conflict");
    errorOf(await api.call("PATCH", api.project(`/vms/${vmId}`), { action: "RESET" }), 409, "conflict");
  });

  it("changes type only within the family and only while stopped", async () => {
    expect(
      errorOf(
        await api.call("PATCH", api.project(`/vms/${vmId}`), { action: "UPDATE", type: "a100.2x" }),
        400,
        "bad_request",
      ),
    ).toMatch(/family/);
    const update = await act(vmId, { action: "UPDATE", type: "a40.4x" });
    expect((await readVm(vmId)).state).toBe("STATE_UPDATING");
    clock.advance(LATENCY);
    expect((await readOp(update.operation_id)).state).toBe("SUCCEEDED");
    expect(await readVm(vmId)).toMatchObject({ state: "STATE_STOPPED", type: "a40.4x" });
  });

  it("starts, resets and rejects a type change while running", async () => {
    await act(vmId, { action: "START" });
    expect((await readVm(vmId)).state).toBe("STATE_STARTING");
    clock.advance(LATENCY);
    expect((await readVm(vmId)).state).toBe("STATE_RUNNING");
    errorOf(
      await api.call("PATCH", api.project(`/vms/${vmId}`), { action: "UPDATE", type: "a40.8x" }),
      409,
      "conflict",
    );
    await act(vmId, { action: "RESET" });
    expect((await readVm(vmId)).state).toBe("STATE_RESETTING");
    clock.advance(LATENCY);
    expect((await readVm(vmId)).state).toBe("STATE_RUNNING");
    const update = await act(vmId, { action: "UPDATE", disks: [] });
    expect((await readVm(vmId)).state).toBe("STATE_UPDATING");
    clock.advance(LATENCY);
    expect((await readOp(update.operation_id)).state).toBe("SUCCEEDED");
    expect((await readVm(vmId)).state).toBe("STATE_RUNNING");
  });

  it("filters operations by resource, state and lower time bound", async () => {
    const all = ok(await api.call("GET", api.project(`/vms/operations?resource_id=${vmId}`)), itemsOf(Operation)).items;
    expect(all.map((o) => o.metadata.operation_name)).toEqual(["CREATE", "STOP", "UPDATE", "START", "RESET", "UPDATE"]);
    const bound = all[3]?.started_at ?? "";
    const recent = ok(
      await api.call("GET", api.project(`/vms/operations?lower_time_bound=${bound}`)),
      itemsOf(Operation),
    ).items;
    expect(recent.map((o) => o.metadata.operation_name)).toEqual(["START", "RESET", "UPDATE"]);
    errorOf(await api.call("GET", api.project("/vms/operations?state=DONE")), 400, "bad_request");
    errorOf(await api.call("GET", api.project("/vms/operations?lower_time_bound=yesterday")), 400, "bad_request");
  });

  it("terminates: DELETING, then gone; a second DELETE returns the same operation", async () => {
    const first = opOf(await api.call("DELETE", api.project(`/vms/${vmId}`)));
    expect((await readVm(vmId)).state).toBe("STATE_DELETING");
    const again = opOf(await api.call("DELETE", api.project(`/vms/${vmId}`)));
    expect(again.operation_id).toBe(first.operation_id);
    clock.advance(LATENCY);
    errorOf(await api.call("GET", api.project(`/vms/${vmId}`)), 404, "not_found");
  });
});

describe("usage", () => {
  const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
  const usageOf = async (query = "") =>
    ok(await api.call("GET", api.project(`/usage${query}`)), itemsOf(UsageItem)).items;

  it("accrues GPU-hours per UTC day for running time only, published by the daily refresh", async () => {
    const op = opOf(
      await api.call(
        "POST",
        api.project("/vms"),
        vmBody("billed", { type: "a100.2x", location: "us-southcentral1-a" }),
      ),
    );
    clock.advance(LATENCY);
    const midnight = Math.ceil(clock.now() / (24 * HOUR)) * 24 * HOUR;
    const beforeMidnight = midnight - clock.now();
    clock.advance(2 * HOUR);
    await act(op.metadata.id, { action: "STOP" });
    clock.advance(LATENCY);
    clock.advance(5 * HOUR); // stopped: accrues nothing
    // The day that is running is never in the answer; the day before is, once 00:15 UTC has passed.
    expect((await usageOf("?resource_types=a100.2x")).map((i) => i.date)).toEqual([day(midnight - 1)]);
    clock.advance(midnight + 24 * HOUR + 15 * 60_000 - clock.now());
    const items = await usageOf("?resource_types=a100.2x");
    const quantity = (date: string) => items.find((i) => i.date === date)?.quantity ?? 0;
    // Two GPUs; the STOPPING time still counts (the VM is up until it has stopped).
    expect(quantity(day(midnight - 1))).toBeCloseTo((2 * beforeMidnight) / HOUR, 5);
    expect(quantity(day(midnight))).toBeCloseTo((2 * (2 * HOUR - beforeMidnight + LATENCY)) / HOUR, 5);
    expect(items[0]).toMatchObject({
      billable_metric: "gpu-hours",
      region: "us-southcentral1",
      resource_type: "a100.2x",
      reservation_id: "",
    });
    expect(Object.keys(items[0] ?? {}).sort()).toEqual(
      ["billable_metric", "date", "project_id", "quantity", "region", "reservation_id", "resource_type"].sort(),
    );
    const onlySecond = await usageOf(`?start_date=${day(midnight)}&end_date=${day(midnight)}&regions=us-southcentral1`);
    expect(onlySecond.map((i) => i.date)).toEqual([day(midnight)]);
    expect(await usageOf("?regions=eu-iceland1&resource_types=a100.2x")).toEqual([]);
    errorOf(await api.call("GET", api.project("/usage?start_date=21-11-2026")), 400, "bad_request");
  });

  it("publishes a day at the first refresh after it ends (00:15 UTC), never the running day", async () => {
    const op = opOf(
      await api.call(
        "POST",
        api.project("/vms"),
        vmBody("refresh", { type: "l40s-48gb.4x", location: "eu-iceland1-a" }),
      ),
    );
    clock.advance(LATENCY);
    const nextMidnight = Math.ceil(clock.now() / (24 * HOUR)) * 24 * HOUR;
    const today = day(clock.now());
    const dates = async () => (await usageOf("?resource_types=l40s-48gb.4x")).map((i) => i.date);
    expect(await dates()).toEqual([]);
    clock.advance(nextMidnight - clock.now() + 15 * 60_000 - 1); // 00:14:59.999: not refreshed yet
    expect(await dates()).toEqual([]);
    clock.advance(1); // 00:15: yesterday is in, today (still running) is not
    expect(await dates()).toEqual([today]);
    clock.advance(24 * HOUR);
    expect(await dates()).toEqual([today, day(nextMidnight)]);
    const [, fullDay] = await usageOf("?resource_types=l40s-48gb.4x");
    expect(fullDay?.quantity).toBeCloseTo(4 * 24, 5);
    await act(op.metadata.id, { action: "STOP" });
    clock.advance(LATENCY);
  });
});

describe("usage published live (the playground)", () => {
  it("answers the running day as accrued so far, minutes after a VM started", async () => {
    const liveClock = createManualClock(Date.UTC(2026, 10, 20, 10, 0, 0));
    const live = await startTestSimulator({ clock: liveClock, latencyMs: LATENCY, usagePublication: "live" });
    try {
      opOf(await live.call("POST", live.project("/vms"), vmBody("live", { type: "a100.2x" })));
      liveClock.advance(LATENCY);
      liveClock.advance(30 * 60_000);
      const items = ok(await live.call("GET", live.project("/usage")), itemsOf(UsageItem)).items;
      expect(items.map((i) => [i.date, i.resource_type])).toEqual([["2026-11-20", "a100.2x"]]);
      expect(items[0]?.quantity).toBeCloseTo(2 * 0.5, 5);
    } finally {
      await live.sim.close();
    }
  });
});

describe("tokens", () => {
  it("expires access tokens after expires_in seconds", async () => {
    const { email, password } = api.sim.user;
    const token = ok(
      await api.call("POST", "/auth/token", { grant_type: "password", email, password }, null),
      TokenResponse,
    );
    expect(token.expires_in).toBe(60);
    ok(await api.call("GET", "/projects", undefined, token.access_token), z.array(z.unknown()));
    clock.advance(60_000);
    expect(errorOf(await api.call("GET", "/projects", undefined, token.access_token), 401, "unauthorized")).toMatch(
      /expired/,
    );
    // The refresh token still works once the access token expired.
    ok(
      await api.call("POST", "/auth/token", { grant_type: "refresh_token", refresh_token: token.refresh_token }, null),
      TokenResponse,
    );
  });
});
