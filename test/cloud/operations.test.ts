// OperationTracker against a stub operations endpoint that counts list and read calls.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createCloudClient } from "../../src/cloud/client.ts";
import { OPERATIONS_PER_ROUND } from "../../src/cloud/operation-rounds.ts";
import {
  type OperationOutcome,
  type OperationsApi,
  OperationTracker,
  operationTrackerFor,
  TrackerStoppedError,
  type TrackerTimers,
} from "../../src/cloud/operations.ts";
import { formatTimestamp, type Operation } from "../../src/cloud/wire.ts";
import { operationFixture, PROJECT_ID } from "./fixtures.ts";
import { type StubServer, sendJson, sleep, startStub } from "./stub-server.ts";

/**
 * In-memory operations of one project; `hidden` ones answer 403 on read (expired), `listLag` ones are left out
 * of lists, `droppedWhenFinished` ones are left out of lists once finished (as a real server may do).
 * Lists honour `state` and `lower_time_bound` (on `started_at`, seconds precision).
 */
class OperationStore {
  readonly states = new Map<string, string>();
  readonly startedAt = new Map<string, string>();
  readonly hidden = new Set<string>();
  readonly listLag = new Set<string>();
  readonly droppedWhenFinished = new Set<string>();
  listCalls = 0;
  /** List calls filtered by `state=IN_PROGRESS`, and those filtered by `lower_time_bound`. */
  inProgressListCalls = 0;
  boundListCalls = 0;
  readCalls = 0;
  failLists = 0;
  /** Answer 500 to this many lists carrying `lower_time_bound`. */
  failBoundLists = 0;
  /** Answer 400 to any list carrying `lower_time_bound` (a server that does not take it). */
  refuseLowerTimeBound = false;
  readonly lowerTimeBounds: string[] = [];

  add(...ids: string[]): void {
    for (const id of ids) {
      this.states.set(id, "IN_PROGRESS");
      this.startedAt.set(id, formatTimestamp(new Date()));
    }
  }
  operation(id: string): Record<string, unknown> {
    const state = this.states.get(id) ?? "IN_PROGRESS";
    return operationFixture({
      operation_id: id,
      state,
      started_at: this.startedAt.get(id) ?? "2026-11-21T00:00:00Z",
      completed_at: state === "IN_PROGRESS" ? "" : "2026-11-21T00:01:00Z",
      result: state === "FAILED" ? { code: "out_of_stock", message: "no a100 left" } : null,
    });
  }
  /** Answer of a list call: counts it, applies the configured failures, then the filters. */
  list(query: URLSearchParams): [number, Record<string, unknown>] {
    this.listCalls++;
    const state = query.get("state");
    const bound = query.get("lower_time_bound");
    if (state === "IN_PROGRESS") this.inProgressListCalls++;
    if (bound !== null) {
      this.boundListCalls++;
      this.lowerTimeBounds.push(bound);
    }
    if (this.failLists > 0) {
      this.failLists--;
      return [500, { code: "internal_error", message: "db down" }];
    }
    if (bound !== null && this.refuseLowerTimeBound) {
      return [400, { code: "bad_request", message: "unknown query parameter lower_time_bound" }];
    }
    if (bound !== null && this.failBoundLists > 0) {
      this.failBoundLists--;
      return [500, { code: "internal_error", message: "db down" }];
    }
    const boundMs = bound === null ? undefined : Date.parse(bound);
    const ids = [...this.states].filter(
      ([id, s]) =>
        (!state || s === state) &&
        !this.listLag.has(id) &&
        !(s !== "IN_PROGRESS" && this.droppedWhenFinished.has(id)) &&
        (boundMs === undefined || Date.parse(this.startedAt.get(id) ?? "") >= boundMs),
    );
    return [200, { items: ids.map(([id]) => this.operation(id)) }];
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
      const [status, body] = store.list(req.query);
      sendJson(res, status, body);
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

/** Virtual time: timers fire in the order they are due as the clock is moved on. */
class VirtualTime implements TrackerTimers {
  now = Date.parse("2026-11-27T10:00:00Z");
  readonly #timers = new Map<number, { at: number; callback: () => void }>();
  #next = 0;
  readonly clock = (): number => this.now;
  setTimeout(callback: () => void, ms: number): unknown {
    const handle = ++this.#next;
    this.#timers.set(handle, { at: this.now + ms, callback });
    return handle;
  }
  clearTimeout(handle: unknown): void {
    this.#timers.delete(handle as number);
  }
  /** Fire every timer due until `at` (and those they set), letting each round's calls answer. */
  async advanceTo(at: number): Promise<void> {
    for (;;) {
      const due = [...this.#timers].filter(([, t]) => t.at <= at).sort((a, b) => a[1].at - b[1].at)[0];
      if (due === undefined) break;
      this.#timers.delete(due[0]);
      this.now = Math.max(this.now, due[1].at);
      due[1].callback();
      for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
    }
    this.now = Math.max(this.now, at);
  }
}

/**
 * A burst through the tracker in virtual time: `n` operations started `perSecond` a second, each taking 200 ms, on
 * a server that lists them as the simulator does (seconds precision, `lower_time_bound` on the start). The list
 * calls made until every one settled, and the longest wait from an operation's end to its settlement.
 */
async function burst(n: number, perSecond: number, intervalMs: number) {
  const time = new VirtualTime();
  const startedAt = new Map<string, number>();
  const stateOf = (id: string): string => ((startedAt.get(id) ?? 0) + 200 <= time.now ? "SUCCEEDED" : "IN_PROGRESS");
  const asOperation = (id: string) =>
    operationFixture({
      operation_id: id,
      state: stateOf(id),
      started_at: formatTimestamp(new Date(startedAt.get(id) ?? 0)),
    }) as Operation;
  let lists = 0;
  const operations: OperationsApi = {
    list: async (_project, _family, query) => {
      lists++;
      const bound = query?.lower_time_bound === undefined ? 0 : Date.parse(query.lower_time_bound);
      return [...startedAt.keys()]
        .filter((id) => Math.floor((startedAt.get(id) ?? 0) / 1000) * 1000 >= bound)
        .filter((id) => query?.state === undefined || stateOf(id) === query.state)
        .map(asOperation);
    },
    get: async (_project, _family, id) => asOperation(id),
  };
  const tracker = new OperationTracker({
    client: { operations },
    projectId: PROJECT_ID,
    family: "vm",
    intervalMs,
    timers: time,
    now: time.clock,
  });
  const waits: number[] = [];
  const begin = time.now;
  const settled: Promise<OperationOutcome>[] = [];
  for (let i = 0; i < n; i++) {
    await time.advanceTo(begin + (i * 1000) / perSecond);
    const id = `op-${i}`;
    startedAt.set(id, time.now);
    settled.push(
      tracker.track(asOperation(id)).then((outcome) => {
        waits.push(time.now - ((startedAt.get(id) ?? 0) + 200));
        return outcome;
      }),
    );
  }
  await time.advanceTo(time.now + 30_000);
  const outcomes = await Promise.all(settled);
  return { lists, maxWaitMs: Math.max(...waits), outcomes };
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
    // Wait for a few rounds (timers run late on a loaded machine), then check the rate against the time taken.
    const started = Date.now();
    while (store.listCalls < 3) await sleep(20);
    const elapsed = Date.now() - started;
    expect(store.listCalls).toBeLessThanOrEqual(Math.floor(elapsed / 100) + 1);
    expect(store.readCalls).toBe(0);

    store.states.set("a", "SUCCEEDED");
    store.states.set("b", "FAILED");
    const [a, b] = await Promise.all([promises[0], promises[1]]);
    expect(a).toMatchObject({ vanished: false, operation: { operation_id: "a", state: "SUCCEEDED" } });
    expect(b).toMatchObject({ vanished: false, operation: { state: "FAILED", result: { code: "out_of_stock" } } });
    // Settled by the one lower_time_bound list, not by reads.
    expect(store.readCalls).toBe(0);
    expect(store.boundListCalls).toBeGreaterThanOrEqual(1);
    expect(settled.map((o) => o.operationId).sort()).toEqual(["a", "b"]);
    expect(tracker.inFlight()).toBe(3);
    tracker.stop();
    const listCallsAtStop = store.listCalls;
    await sleep(250);
    expect(store.listCalls).toBe(listCallsAtStop);
    await expect(promises[2]).rejects.toBeInstanceOf(TrackerStoppedError);
  });

  it("settles a round with one list when every tracked operation started seconds ago", async () => {
    const timers = new ManualTimers();
    const tracker = new OperationTracker({ client: cloud(), projectId: PROJECT_ID, family: "vm", timers });
    store.add("a", "b", "c");
    const outcomes = ["a", "b", "c"].map((id) =>
      tracker.track(operationFixture({ operation_id: id, started_at: store.startedAt.get(id) }) as Operation),
    );
    store.states.set("a", "SUCCEEDED");
    store.states.set("b", "FAILED");
    await tracker.poll();
    await expect(Promise.all(outcomes.slice(0, 2))).resolves.toMatchObject([
      { vanished: false, operation: { state: "SUCCEEDED" } },
      { vanished: false, operation: { state: "FAILED" } },
    ]);
    // One list bounded by the earliest start shows how the finished ones ended and which still run.
    expect([store.inProgressListCalls, store.boundListCalls, store.readCalls]).toEqual([0, 1, 0]);
    expect(tracker.inFlight()).toBe(1);
    tracker.stop();
  });

  it("polls a burst once per batch of operations, not per interval, and as often at a quarter of the pace", async () => {
    // The playground's interval (100 ms) and 1,000 operations of 200 ms: at 20 a second (the server's rate), and at
    // 5 a second (an operator lagging on a busy machine): the rounds follow the operations, not the clock.
    const fast = await burst(1000, 20, 100);
    const slow = await burst(1000, 5, 100);
    for (const run of [fast, slow]) {
      expect(run.outcomes.every((o) => !o.vanished && o.operation.state === "SUCCEEDED")).toBe(true);
      expect(run.lists).toBeLessThanOrEqual(1000 / OPERATIONS_PER_ROUND + 3);
      // Fair progress: nobody waits long for the round that settles it.
      expect(run.maxWaitMs).toBeLessThanOrEqual(11_000);
    }
    expect(Math.abs(slow.lists - fast.lists)).toBeLessThanOrEqual(3);
  });

  it("looks at a lone operation every interval", async () => {
    const lone = await burst(1, 1, 100);
    // Tracked, looked at after 100 ms (still running), settled by the round 100 ms later.
    expect(lone.lists).toBe(2);
    expect(lone.maxWaitMs).toBeLessThanOrEqual(100);
  });

  it("per-operation mode (the Terraform provider's way, for comparison) reads each operation every round", async () => {
    const timers = new ManualTimers();
    const tracker = new OperationTracker({
      client: cloud(),
      projectId: PROJECT_ID,
      family: "vm",
      timers,
      mode: "per-operation",
    });
    store.add("p", "q", "r");
    const outcomes = ["p", "q", "r"].map((id) => tracker.track(id));
    await tracker.poll();
    expect(store.readCalls).toBe(3);
    expect(store.listCalls).toBe(0);
    store.states.set("q", "SUCCEEDED");
    await tracker.poll();
    expect(store.readCalls).toBe(6);
    await expect(outcomes[1]).resolves.toMatchObject({ vanished: false, operation: { state: "SUCCEEDED" } });
    expect(tracker.inFlight()).toBe(2);
    tracker.stop();
  });

  it("reports an operation that vanished (403 on read) so the caller reads the resource", async () => {
    const timers = new ManualTimers();
    const tracker = new OperationTracker({ client: cloud(), projectId: PROJECT_ID, family: "vm", timers });
    store.add("old");
    const outcome = tracker.track("old");
    store.states.delete("old");
    await tracker.poll();
    await expect(outcome).resolves.toEqual({ operationId: "old", vanished: true, reason: "gone" });
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
    expect(store.inProgressListCalls).toBe(2);
    expect(store.boundListCalls).toBe(1);
    expect(store.readCalls).toBe(0);
  });

  it("settles N operations finishing in one interval with one in-progress list and one lower_time_bound list", async () => {
    const timers = new ManualTimers();
    const tracker = new OperationTracker({ client: cloud(), projectId: PROJECT_ID, family: "vm", timers });
    const ids = Array.from({ length: 25 }, (_, i) => `op-${i}`);
    store.add(...ids);
    const earliestMs = Date.parse("2026-11-21T10:00:00Z");
    store.startedAt.set("op-7", formatTimestamp(new Date(earliestMs)));
    const outcomes = ids.map((id) => tracker.track(id));
    await tracker.poll();
    expect([store.inProgressListCalls, store.boundListCalls, store.readCalls]).toEqual([1, 0, 0]);

    for (const [i, id] of ids.entries()) store.states.set(id, i % 5 === 0 ? "FAILED" : "SUCCEEDED");
    await tracker.poll();
    expect([store.inProgressListCalls, store.boundListCalls, store.readCalls]).toEqual([2, 1, 0]);
    // Earliest started_at (learned from the in-progress list: the server's clock) minus two seconds (its seconds
    // precision), seconds precision with Z.
    expect(store.lowerTimeBounds).toEqual(["2026-11-21T09:59:58Z"]);
    const settled = await Promise.all(outcomes);
    expect(settled.filter((o) => !o.vanished && o.operation.state === "FAILED")).toHaveLength(5);
    expect(settled.filter((o) => !o.vanished && o.operation.state === "SUCCEEDED")).toHaveLength(20);
    expect(tracker.inFlight()).toBe(0);
    expect(timers.scheduled.size).toBe(0);
  });

  it("reaches back seconds before a start the server gave, a minute before a start only the local clock knows", async () => {
    const timers = new ManualTimers();
    const tracker = new OperationTracker({ client: cloud(), projectId: PROJECT_ID, family: "vm", timers });
    store.add("given", "local");
    store.states.set("given", "SUCCEEDED");
    // Its started_at as the create's answer gave it (kept in status), not seen in any in-progress list.
    const given = tracker.track("given", "2026-11-21T10:00:00Z");
    await tracker.poll();
    await expect(given).resolves.toMatchObject({ vanished: false, operation: { state: "SUCCEEDED" } });
    expect(store.lowerTimeBounds).toEqual(["2026-11-21T09:59:58Z"]);

    // Tracked by id alone and finished before a list showed it: the local time of tracking, less a minute of skew.
    store.states.set("local", "SUCCEEDED");
    const trackedAt = Date.now();
    const local = tracker.track("local");
    await tracker.poll();
    await expect(local).resolves.toMatchObject({ vanished: false });
    const bound = Date.parse(store.lowerTimeBounds[1] ?? "");
    expect(trackedAt - bound).toBeGreaterThanOrEqual(60_000);
    expect(trackedAt - bound).toBeLessThan(62_000);
  });

  it("settles operations that finished before any in-progress list saw them from the lower_time_bound list", async () => {
    const timers = new ManualTimers();
    const tracker = new OperationTracker({ client: cloud(), projectId: PROJECT_ID, family: "vm", timers });
    store.add("quick-1", "quick-2");
    store.states.set("quick-1", "SUCCEEDED");
    store.states.set("quick-2", "FAILED");
    const outcomes = Promise.all([tracker.track("quick-1"), tracker.track("quick-2")]);
    await tracker.poll();
    await expect(outcomes).resolves.toMatchObject([
      { vanished: false, operation: { state: "SUCCEEDED" } },
      { vanished: false, operation: { state: "FAILED" } },
    ]);
    expect([store.inProgressListCalls, store.boundListCalls, store.readCalls]).toEqual([1, 1, 0]);
    expect(store.lowerTimeBounds[0]).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
  });

  it("reads only the operation missing from both lists, and reports it vanished on 403", async () => {
    const timers = new ManualTimers();
    const tracker = new OperationTracker({ client: cloud(), projectId: PROJECT_ID, family: "vm", timers });
    store.add("listed", "dropped", "expired");
    store.droppedWhenFinished.add("dropped");
    store.droppedWhenFinished.add("expired");
    store.hidden.add("expired");
    const listed = tracker.track("listed");
    const dropped = tracker.track("dropped");
    await tracker.poll();

    store.states.set("listed", "SUCCEEDED");
    store.states.set("dropped", "SUCCEEDED");
    await tracker.poll();
    await expect(listed).resolves.toMatchObject({ vanished: false, operation: { state: "SUCCEEDED" } });
    await expect(dropped).resolves.toMatchObject({ vanished: false, operation: { operation_id: "dropped" } });
    // The first round learnt both starts from the in-progress list: the second needs one bounded list, no other.
    expect([store.inProgressListCalls, store.boundListCalls, store.readCalls]).toEqual([1, 1, 1]);
    expect(stub.requests.at(-1)?.path).toBe(`/projects/${PROJECT_ID}/vms/operations/dropped`);

    const expired = tracker.track("expired");
    await tracker.poll();
    store.states.set("expired", "SUCCEEDED");
    await tracker.poll();
    await expect(expired).resolves.toEqual({ operationId: "expired", vanished: true, reason: "gone" });
    expect([store.inProgressListCalls, store.boundListCalls, store.readCalls]).toEqual([2, 2, 2]);
    expect(tracker.inFlight()).toBe(0);
  });

  it("keeps an operation the lower_time_bound list still shows in progress, without reading it", async () => {
    const timers = new ManualTimers();
    const client = cloud();
    // The in-progress list lags once: a stale answer without the operation, while it is in fact still running.
    let lagOnce = true;
    const tracker = new OperationTracker({
      client: {
        operations: {
          get: client.operations.get,
          list: async (projectId, family, query, opts) => {
            const items = await client.operations.list(projectId, family, query, opts);
            if (query?.state !== "IN_PROGRESS" || !lagOnce) return items;
            lagOnce = false;
            return [];
          },
        },
      },
      projectId: PROJECT_ID,
      family: "vm",
      timers,
    });
    store.add("slow");
    const slow = tracker.track("slow");
    await tracker.poll();
    expect(tracker.inFlight()).toBe(1);
    expect([store.inProgressListCalls, store.boundListCalls, store.readCalls]).toEqual([1, 1, 0]);
    store.states.set("slow", "SUCCEEDED");
    await tracker.poll();
    await expect(slow).resolves.toMatchObject({ vanished: false, operation: { state: "SUCCEEDED" } });
    // Its start, learnt from the bounded list, is recent: the next round is one bounded list.
    expect([store.inProgressListCalls, store.boundListCalls, store.readCalls]).toEqual([1, 2, 0]);
  });

  it("falls back to single reads for good when the server answers 400 to lower_time_bound", async () => {
    const timers = new ManualTimers();
    const tracker = new OperationTracker({ client: cloud(), projectId: PROJECT_ID, family: "vm", timers });
    store.refuseLowerTimeBound = true;
    store.add("a", "b", "c");
    const a = tracker.track("a");
    const b = tracker.track("b");
    const c = tracker.track("c");
    await tracker.poll();
    store.states.set("a", "SUCCEEDED");
    store.states.set("b", "SUCCEEDED");
    await tracker.poll();
    await expect(Promise.all([a, b])).resolves.toMatchObject([{ vanished: false }, { vanished: false }]);
    expect([store.inProgressListCalls, store.boundListCalls, store.readCalls]).toEqual([2, 1, 2]);

    store.states.set("c", "FAILED");
    await tracker.poll();
    await expect(c).resolves.toMatchObject({ vanished: false, operation: { state: "FAILED" } });
    // No second lower_time_bound attempt: one in-progress list and one read.
    expect([store.inProgressListCalls, store.boundListCalls, store.readCalls]).toEqual([3, 1, 3]);
  });

  it("leaves finished operations tracked when the lower_time_bound list fails transiently", async () => {
    const timers = new ManualTimers();
    const tracker = new OperationTracker({ client: cloud(), projectId: PROJECT_ID, family: "vm", timers });
    store.add("x");
    const outcome = tracker.track("x");
    store.states.set("x", "SUCCEEDED");
    store.failBoundLists = 1;
    await tracker.poll();
    expect(tracker.inFlight()).toBe(1);
    expect([store.inProgressListCalls, store.boundListCalls, store.readCalls]).toEqual([1, 1, 0]);
    await tracker.poll();
    await expect(outcome).resolves.toMatchObject({ vanished: false, operation: { state: "SUCCEEDED" } });
    // A 500 is not a refusal: the next round uses lower_time_bound again.
    expect([store.inProgressListCalls, store.boundListCalls, store.readCalls]).toEqual([2, 2, 0]);
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

  it("gives up on a family this server cannot show after two requests, and never polls it again", async () => {
    const timers = new ManualTimers();
    const client = cloud();
    const tracker = new OperationTracker({ client, projectId: PROJECT_ID, family: "disk", timers });
    const first = tracker.track("disk-op-1");
    const second = tracker.track("disk-op-2");
    await tracker.poll();
    await expect(first).resolves.toEqual({ operationId: "disk-op-1", vanished: true, reason: "unsupported" });
    await expect(second).resolves.toEqual({ operationId: "disk-op-2", vanished: true, reason: "unsupported" });
    // The list and one read answered 404 from the router: the registry now knows both are missing.
    expect(stub.requests.map((r) => r.path)).toEqual([
      `/projects/${PROJECT_ID}/disks/operations`,
      `/projects/${PROJECT_ID}/disks/operations/disk-op-1`,
    ]);
    expect(client.capabilities.state("disk-operations-list")).toBe("unsupported");
    expect(client.capabilities.state("disk-operations-read")).toBe("unsupported");
    expect(timers.scheduled.size).toBe(0);

    const later = tracker.track("disk-op-3");
    for (let tick = 0; tick < 3 && timers.scheduled.size > 0; tick++) timers.fireAll();
    await expect(later).resolves.toMatchObject({ vanished: true, reason: "unsupported" });
    expect(stub.requests).toHaveLength(2);
  });

  it("reads one operation per interval, the least recently read, when only the list is missing", async () => {
    const timers = new ManualTimers();
    stub.handle((req, res) => {
      const match = /^\/projects\/[^/]+\/disks\/operations\/([^/]+)$/.exec(req.path);
      if (match?.[1] === undefined) {
        sendJson(res, 405, { code: "method_not_allowed", message: "listing is not offered" });
        return;
      }
      sendJson(res, 200, store.operation(match[1]));
    });
    const tracker = new OperationTracker({ client: cloud(), projectId: PROJECT_ID, family: "disk", timers });
    store.add("a", "b", "c");
    const outcomes = ["a", "b", "c"].map((id) => tracker.track(id));
    await tracker.poll();
    await tracker.poll();
    await tracker.poll();
    // One list (405, remembered) and then exactly one read per tick, each operation in turn.
    expect(stub.requests.map((r) => r.path.split("/").at(-1))).toEqual(["operations", "a", "b", "c"]);
    store.states.set("b", "SUCCEEDED");
    await tracker.poll();
    await tracker.poll();
    await expect(outcomes[1]).resolves.toMatchObject({ vanished: false, operation: { state: "SUCCEEDED" } });
    expect(stub.requests.map((r) => r.path.split("/").at(-1)).slice(4)).toEqual(["a", "b"]);
    expect(tracker.inFlight()).toBe(2);
    tracker.stop();
  });

  it("backs off while listing fails, doubling up to maxBackoffMs, and returns to the interval after a success", async () => {
    const timers = new ManualTimers();
    const tracker = new OperationTracker({
      client: cloud(),
      projectId: PROJECT_ID,
      family: "vm",
      intervalMs: 100,
      maxBackoffMs: 500,
      timers,
    });
    store.add("slow");
    const outcome = tracker.track("slow");
    const waits = () => [...timers.scheduled.values()].map((timer) => timer.ms);
    expect(waits()).toEqual([100]);
    store.failLists = 4;
    const seen: number[] = [];
    for (let tick = 0; tick < 5; tick++) {
      await tracker.poll();
      seen.push(...waits());
    }
    expect(seen).toEqual([200, 400, 500, 500, 100]);
    expect(store.listCalls).toBe(5);
    store.states.set("slow", "SUCCEEDED");
    await tracker.poll();
    await expect(outcome).resolves.toMatchObject({ vanished: false });
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
