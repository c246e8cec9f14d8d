// OperationTracker against a stub operations endpoint that counts list and read calls.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createCloudClient } from "../../src/cloud/client.ts";
import {
  type OperationOutcome,
  OperationTracker,
  operationTrackerFor,
  TrackerStoppedError,
  type TrackerTimers,
} from "../../src/cloud/operations.ts";
import type { Operation } from "../../src/cloud/wire.ts";
import { operationFixture, PROJECT_ID } from "./fixtures.ts";
import { type StubServer, sendJson, sleep, startStub } from "./stub-server.ts";

/** In-memory operations of one project; `hidden` ones answer 403 on read (expired), `listLag` ones are left out of lists. */
class OperationStore {
  readonly states = new Map<string, string>();
  readonly hidden = new Set<string>();
  readonly listLag = new Set<string>();
  listCalls = 0;
  readCalls = 0;
  failLists = 0;

  add(...ids: string[]): void {
    for (const id of ids) this.states.set(id, "IN_PROGRESS");
  }
  operation(id: string): Record<string, unknown> {
    const state = this.states.get(id) ?? "IN_PROGRESS";
    return operationFixture({
      operation_id: id,
      state,
      completed_at: state === "IN_PROGRESS" ? "" : "2026-11-21T00:01:00Z",
      result: state === "FAILED" ? { code: "out_of_stock", message: "no a100 left" } : null,
    });
  }
}

let stub: StubServer;
let store: OperationStore;
beforeEach(async () => {
  store = new OperationStore();
  stub = await startStub((req, res) => {
    const match = /^\/projects\/[^/]+\/vms\/operations(?:\/([^/]+))?$/.exec(req.path);
    if (!match) {
      sendJson(res, 404, { message: `Route ${req.method}:${req.path} not found`, statusCode: 404 });
      return;
    }
    const operationId = match[1];
    if (!operationId) {
      store.listCalls++;
      if (store.failLists > 0) {
        store.failLists--;
        sendJson(res, 500, { code: "internal_error", message: "db down" });
        return;
      }
      const state = req.query.get("state");
      const ids = [...store.states].filter(([id, s]) => (!state || s === state) && !store.listLag.has(id));
      sendJson(res, 200, { items: ids.map(([id]) => store.operation(id)) });
      return;
    }
    store.readCalls++;
    if (store.hidden.has(operationId) || !store.states.has(operationId)) {
      sendJson(res, 403, { code: "forbidden", message: "operation not visible" });
      return;
    }
    sendJson(res, 200, store.operation(operationId));
  });
});
afterEach(async () => {
  await stub.close();
});

function cloud() {
  return createCloudClient({ baseUrl: stub.url, credentials: { apiKey: "k" }, rateLimiter: false, retryLimit: 0 });
}

/** Timers the test fires by hand: deterministic rounds. */
class ManualTimers implements TrackerTimers {
  readonly scheduled = new Map<number, { callback: () => void; ms: number }>();
  #next = 0;
  setTimeout(callback: () => void, ms: number): unknown {
    const handle = ++this.#next;
    this.scheduled.set(handle, { callback, ms });
    return handle;
  }
  clearTimeout(handle: unknown): void {
    this.scheduled.delete(handle as number);
  }
  fireAll(): void {
    const due = [...this.scheduled.values()];
    this.scheduled.clear();
    for (const timer of due) timer.callback();
  }
}

describe("OperationTracker", () => {
  it("makes one list call per interval for any number of tracked operations", async () => {
    const tracker = new OperationTracker({ client: cloud(), projectId: PROJECT_ID, family: "vm", intervalMs: 100 });
    const ids = ["a", "b", "c", "d", "e"];
    store.add(...ids);
    const settled: OperationOutcome[] = [];
    tracker.onSettled((outcome) => settled.push(outcome));
    const promises = ids.map((id) => tracker.track(id));
    expect(tracker.inFlight()).toBe(5);
    await sleep(360);
    expect(store.listCalls).toBeGreaterThanOrEqual(2);
    expect(store.listCalls).toBeLessThanOrEqual(4);
    expect(store.readCalls).toBe(0);

    store.states.set("a", "SUCCEEDED");
    store.states.set("b", "FAILED");
    const [a, b] = await Promise.all([promises[0], promises[1]]);
    expect(a).toMatchObject({ vanished: false, operation: { operation_id: "a", state: "SUCCEEDED" } });
    expect(b).toMatchObject({ vanished: false, operation: { state: "FAILED", result: { code: "out_of_stock" } } });
    expect(store.readCalls).toBe(2);
    expect(settled.map((o) => o.operationId).sort()).toEqual(["a", "b"]);
    expect(tracker.inFlight()).toBe(3);
    tracker.stop();
    const listCallsAtStop = store.listCalls;
    await sleep(250);
    expect(store.listCalls).toBe(listCallsAtStop);
    await expect(promises[2]).rejects.toBeInstanceOf(TrackerStoppedError);
  });

  it("reports an operation that vanished (403 on read) so the caller reads the resource", async () => {
    const timers = new ManualTimers();
    const tracker = new OperationTracker({ client: cloud(), projectId: PROJECT_ID, family: "vm", timers });
    store.add("old");
    const outcome = tracker.track("old");
    store.states.delete("old");
    await tracker.poll();
    await expect(outcome).resolves.toEqual({ operationId: "old", vanished: true });
    expect(tracker.inFlight()).toBe(0);
    expect(timers.scheduled.size).toBe(0);
  });

  it("keeps tracking when the list lags behind a read that is still in progress", async () => {
    const timers = new ManualTimers();
    const tracker = new OperationTracker({ client: cloud(), projectId: PROJECT_ID, family: "vm", timers });
    store.add("lagging");
    store.listLag.add("lagging");
    void tracker.track("lagging");
    await tracker.poll();
    expect(store.readCalls).toBe(1);
    expect(tracker.inFlight()).toBe(1);
    expect([...timers.scheduled.values()].map((t) => t.ms)).toEqual([2000]);
    tracker.stop();
  });

  it("survives a failing list call and settles on a later round", async () => {
    const timers = new ManualTimers();
    const tracker = new OperationTracker({ client: cloud(), projectId: PROJECT_ID, family: "vm", timers });
    store.add("x");
    const outcome = tracker.track("x");
    store.states.set("x", "SUCCEEDED");
    store.failLists = 1;
    await tracker.poll();
    expect(tracker.inFlight()).toBe(1);
    await tracker.poll();
    await expect(outcome).resolves.toMatchObject({ vanished: false, operation: { state: "SUCCEEDED" } });
    expect(store.listCalls).toBe(2);
  });

  it("settles an operation that is already final without any call", async () => {
    const tracker = new OperationTracker({ client: cloud(), projectId: PROJECT_ID, family: "vm" });
    const done = operationFixture({ operation_id: "fast", state: "SUCCEEDED" }) as Operation;
    await expect(tracker.track(done)).resolves.toMatchObject({ vanished: false, operationId: "fast" });
    expect(stub.requests).toHaveLength(0);
  });

  it("shares one promise when the same id is tracked twice, and schedules only while tracking", async () => {
    const timers = new ManualTimers();
    const tracker = new OperationTracker({ client: cloud(), projectId: PROJECT_ID, family: "vm", timers });
    expect(timers.scheduled.size).toBe(0);
    store.add("same");
    expect(tracker.track("same")).toBe(tracker.track("same"));
    expect(timers.scheduled.size).toBe(1);
    store.states.set("same", "SUCCEEDED");
    timers.fireAll();
    await expect(tracker.track("same")).resolves.toMatchObject({ operationId: "same" });
    expect(timers.scheduled.size).toBe(0);
  });

  it("falls back to vanished when the family has no operations endpoints on this server", async () => {
    const timers = new ManualTimers();
    const tracker = new OperationTracker({ client: cloud(), projectId: PROJECT_ID, family: "disk", timers });
    const outcome = tracker.track("disk-op");
    await tracker.poll();
    await expect(outcome).resolves.toEqual({ operationId: "disk-op", vanished: true });
    expect(stub.requests.map((r) => r.path)).toEqual([
      `/projects/${PROJECT_ID}/disks/operations`,
      `/projects/${PROJECT_ID}/disks/operations/disk-op`,
    ]);
  });

  it("refuses to track after stop, and a throwing listener does not break settling", async () => {
    const timers = new ManualTimers();
    const tracker = new OperationTracker({ client: cloud(), projectId: PROJECT_ID, family: "vm", timers });
    tracker.onSettled(() => {
      throw new Error("listener bug");
    });
    const seen: string[] = [];
    tracker.onSettled((o) => seen.push(o.operationId));
    await tracker.track(operationFixture({ operation_id: "f", state: "FAILED" }) as Operation);
    expect(seen).toEqual(["f"]);
    tracker.stop();
    await expect(tracker.track("late")).rejects.toBeInstanceOf(TrackerStoppedError);
  });

  it("operationTrackerFor gives one tracker per (client, project, family)", () => {
    const c = cloud();
    const vmTracker = operationTrackerFor(c, PROJECT_ID, "vm");
    expect(operationTrackerFor(c, PROJECT_ID, "vm")).toBe(vmTracker);
    expect(operationTrackerFor(c, PROJECT_ID, "disk")).not.toBe(vmTracker);
    expect(operationTrackerFor(cloud(), PROJECT_ID, "vm")).not.toBe(vmTracker);
    vmTracker.stop();
    expect(operationTrackerFor(c, PROJECT_ID, "vm")).not.toBe(vmTracker);
  });
});
