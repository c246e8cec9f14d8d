// Table tests of the small pieces: error classification, snapshot coalescing, credential parsing, the index of
// dependents.

import pino from "pino";
import { describe, expect, it, vi } from "vitest";
import { CloudError } from "../../src/cloud/errors.ts";
import {
  CredentialStore,
  parseCredentialsSecret,
  type SecretLike,
} from "../../src/controllers/accounts/credentials.ts";
import { FamilySnapshot } from "../../src/controllers/accounts/snapshots.ts";
import { classify, ReconcileError, requestRefused } from "../../src/controllers/core/classify.ts";
import { ManagedParser } from "../../src/controllers/core/object-model.ts";
import { gpuVm } from "../../src/controllers/kinds/gpu-vm.ts";
import { findResource } from "../../src/controllers/kinds/support.ts";
import { DependencyIndex } from "../../src/controllers/managed/dependency-index.ts";
import { KubeApiError } from "../../src/runtime/index.ts";
import { FencedError } from "../../src/util/fence.ts";
import { StringInterner, sharedInterner } from "../../src/util/intern.ts";

const http = (status: number, extra: Partial<ConstructorParameters<typeof CloudError>[0]> = {}) =>
  new CloudError({ kind: "http", status, message: `status ${status}`, method: "GET", route: "/x", ...extra });

describe("classify", () => {
  it.each([
    {
      reason: "401 → CredentialsInvalid, retried with backoff",
      error: http(401),
      want: { reason: "CredentialsInvalid", outcome: "retry", stalled: true },
    },
    {
      reason: "429 with Retry-After waits exactly that",
      error: http(429, { retryAfterMs: 7000 }),
      want: { reason: "RateLimited", outcome: "requeueAfter", ms: 7000 },
    },
    {
      reason: "503 with Retry-After waits exactly that",
      error: http(503, { retryAfterMs: 3000 }),
      want: { reason: "ApiUnavailable", outcome: "requeueAfter", ms: 3000 },
    },
    { reason: "500 backs off", error: http(500), want: { reason: "ApiUnavailable", outcome: "retry", stalled: false } },
    { reason: "cloud 409 (busy) backs off", error: http(409), want: { reason: "ApiUnavailable", outcome: "retry" } },
    {
      reason: "400 is terminal: stalled, no hot loop",
      error: http(400),
      want: { reason: "InvalidSpec", outcome: "requeueAfter", stalled: true },
    },
    {
      reason: "413 (a body too large) is terminal: InvalidSpec, saying what to make smaller",
      error: http(413, { message: "request body is too large: at most 1048576 bytes" }),
      want: { reason: "InvalidSpec", outcome: "requeueAfter", stalled: true, message: /too large.*at most 1048576/ },
    },
    {
      reason: "414 (a URL too long) is terminal: InvalidSpec",
      error: http(414),
      want: { reason: "InvalidSpec", outcome: "requeueAfter", stalled: true },
    },
    {
      reason: "415 (the body's form refused) is terminal: NotSupported",
      error: http(415),
      want: { reason: "NotSupported", outcome: "requeueAfter", stalled: true },
    },
    {
      reason: "405 on a spec route is terminal: NotSupported",
      error: http(405),
      want: { reason: "NotSupported", outcome: "requeueAfter", stalled: true },
    },
    {
      reason: "402 → PaymentMethodRequired, retried with backoff",
      error: http(402),
      want: { reason: "PaymentMethodRequired", outcome: "retry", stalled: true },
    },
    {
      reason: "another 4xx the cloud answers again the same way is terminal",
      error: http(418),
      want: { reason: "InvalidSpec", outcome: "requeueAfter", stalled: true },
    },
    {
      reason: "404 proves nothing here (a read after a write may lag): backs off",
      error: http(404),
      want: { reason: "ApiUnavailable", outcome: "retry", stalled: false },
    },
    {
      reason: "408 (the server timed out reading) backs off",
      error: http(408),
      want: { reason: "ApiUnavailable", outcome: "retry", stalled: false },
    },
    {
      reason: "an endpoint the server lacks is NotSupported",
      error: new CloudError({
        kind: "unsupported",
        status: 405,
        message: "not supported by this server",
        method: "PATCH",
        route: "/x",
      }),
      want: { reason: "NotSupported", outcome: "requeueAfter", stalled: true },
    },
    {
      reason: "network errors back off",
      error: new CloudError({ kind: "network", message: "ECONNRESET", method: "GET", route: "/x" }),
      want: { reason: "ApiUnavailable", outcome: "retry" },
    },
    {
      reason: "an immutable change is terminal",
      error: new ReconcileError("ImmutableFieldChanged", "type family"),
      want: { reason: "ImmutableFieldChanged", outcome: "requeueAfter", stalled: true },
    },
    {
      reason: "an internal error (a bug) backs off as InternalError, never as an API problem",
      error: new Error("VM create before resolve"),
      want: { reason: "InternalError", outcome: "retry" },
    },
    {
      reason: "a failed Kubernetes API call backs off",
      error: new KubeApiError("patch status: 500 etcd timeout", { status: 500 }),
      want: { reason: "ApiUnavailable", outcome: "retry" },
    },
  ])("$reason", ({ error, want }) => {
    const verdict = classify(error);
    expect(verdict.reason).toBe(want.reason);
    expect(verdict.outcome.type).toBe(want.outcome);
    if (want.stalled !== undefined) expect(verdict.stalled).toBe(want.stalled);
    if (want.ms !== undefined) expect(verdict.outcome).toEqual({ type: "requeueAfter", ms: want.ms });
    if (want.message !== undefined) expect(verdict.message).toMatch(want.message);
    expect(verdict.silent).toBeUndefined();
  });

  it.each([
    {
      reason: "a call aborted with its pass (the Lease lost, shutdown)",
      error: new CloudError({
        kind: "network",
        code: "aborted",
        message: "GET /x was aborted",
        method: "GET",
        route: "/x",
      }),
    },
    {
      reason: "a cloud write the fence kept",
      error: new CloudError({ kind: "network", code: "fenced", message: "not sent", method: "PATCH", route: "/x" }),
    },
    {
      reason: "a Kubernetes write the fence kept",
      error: new KubeApiError("patch status: error", { cause: new FencedError("no Lease") }),
    },
  ])("$reason is a cancellation: a silent retry, no status and no Event", ({ error }) => {
    const verdict = classify(error);
    expect(verdict.silent).toBe(true);
    expect(verdict.outcome.type).toBe("retry");
  });
});

describe("requestRefused", () => {
  it("is true for an answer or a local refusal that proves the request was not carried out", () => {
    for (const status of [400, 401, 403, 404, 409, 413, 422, 429]) expect(requestRefused(http(status))).toBe(true);
    expect(requestRefused(new CloudError({ kind: "unsupported", message: "x", method: "GET", route: "/x" }))).toBe(
      true,
    );
    const local = new CloudError({ kind: "parse", code: "invalid_request", message: "x", method: "POST", route: "/x" });
    expect(requestRefused(local)).toBe(true);
    // Through the ReconcileError a kind wraps it in.
    expect(requestRefused(new ReconcileError("InvalidSpec", "too large", { cause: http(413) }))).toBe(true);
  });

  it("is false when the request may have been carried out", () => {
    for (const status of [500, 502, 503]) expect(requestRefused(http(status))).toBe(false);
    expect(requestRefused(new CloudError({ kind: "timeout", message: "x", method: "POST", route: "/x" }))).toBe(false);
    expect(requestRefused(new CloudError({ kind: "network", message: "x", method: "POST", route: "/x" }))).toBe(false);
    expect(requestRefused(new CloudError({ kind: "parse", message: "bad answer", method: "POST", route: "/x" }))).toBe(
      false,
    );
    expect(requestRefused(new Error("bug"))).toBe(false);
  });
});

describe("FamilySnapshot", () => {
  function counting(items: { id: string; name: string }[] = [{ id: "1", name: "a" }]) {
    let calls = 0;
    let clock = 1000;
    const snapshot = new FamilySnapshot({
      list: async () => {
        calls++;
        return items;
      },
      idOf: (item) => item.id,
      nameOf: (item) => item.name,
      maxAgeMs: 10_000,
      minIntervalMs: 20,
      now: () => clock,
    });
    return { snapshot, calls: () => calls, advance: (ms: number) => (clock += ms) };
  }

  it("many readers at once share one list", async () => {
    const { snapshot, calls } = counting();
    const views = await Promise.all(Array.from({ length: 50 }, () => snapshot.read()));
    expect(calls()).toBe(1);
    expect(views[49]?.byName.get("a")?.id).toBe("1");
  });

  it("takes a list item by item as its pages come: what a page shows alike is the object already held", async () => {
    let listing = 0;
    const changed: string[][] = [];
    const snapshot = new FamilySnapshot<{ id: string; name: string; state: string }>({
      list: async function* () {
        listing++;
        // Two pages; the second list shows "b" changed. Each item is a fresh copy, as a parsed page gives it.
        yield { id: "1", name: "a", state: "RUNNING" };
        await Promise.resolve();
        yield { id: "2", name: "b", state: listing === 1 ? "RUNNING" : "STOPPED" };
      },
      idOf: (item) => item.id,
      nameOf: (item) => item.name,
      maxAgeMs: 0,
      minIntervalMs: 0,
      onChanged: (ids) => changed.push(ids),
    });
    const first = await snapshot.read();
    const again = await snapshot.read(Date.now());
    expect(again.byId.get("1")).toBe(first.byId.get("1"));
    expect(again.byId.get("2")).not.toBe(first.byId.get("2"));
    expect(again.byName.get("b")?.state).toBe("STOPPED");
    expect(changed).toEqual([["2"]]);
  });

  it("a resource observed while the first list is under way stays as observed, not as the list showed it", async () => {
    let clock = 1000;
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const snapshot = new FamilySnapshot<{ id: string; name: string; state: string }>({
      list: async function* () {
        yield { id: "1", name: "a", state: "RUNNING" };
        await gate;
        yield { id: "2", name: "b", state: "RUNNING" };
      },
      idOf: (item) => item.id,
      nameOf: (item) => item.name,
      maxAgeMs: 10_000,
      minIntervalMs: 0,
      now: () => clock,
    });
    const listed = snapshot.read();
    await new Promise((resolve) => setImmediate(resolve));
    clock += 10;
    snapshot.observed({ id: "2", name: "b", state: "STOPPED" }, clock);
    release();
    const view = await listed;
    expect(view.byId.get("2")?.state).toBe("STOPPED");
    expect(view.byId.get("1")?.state).toBe("RUNNING");
  });

  it("a fresh view is reused until it is too old or invalidated", async () => {
    const { snapshot, calls, advance } = counting();
    await snapshot.read();
    advance(5000);
    await snapshot.read();
    expect(calls()).toBe(1);
    advance(6000);
    await snapshot.read();
    expect(calls()).toBe(2);
    snapshot.invalidate();
    await snapshot.read();
    expect(calls()).toBe(3);
  });

  it("notBefore after the last list forces a new one", async () => {
    const { snapshot, calls, advance } = counting();
    await snapshot.read();
    advance(1);
    await snapshot.read(1001);
    expect(calls()).toBe(2);
  });

  it("holds one copy of each repeated string of its resources (lists, lists by ids, remembered reads)", async () => {
    const interner = new StringInterner();
    const vm = (id: string) => ({ id, name: `vm-${id}`, location: "us-east1-a", project_id: "p-1" });
    const snapshot = new FamilySnapshot({
      list: async () => [vm("1"), vm("2")],
      listIds: async (ids) => ids.map(vm),
      idOf: (item) => item.id,
      nameOf: (item) => item.name,
      maxAgeMs: 10_000,
      fullListUpTo: 0,
      idsIntervalMs: 0,
      interner,
    });
    await snapshot.read();
    expect(interner.hits).toBe(2); // the second VM's location and project
    await snapshot.readOne("3", Date.now());
    expect(interner.hits).toBe(4);
    snapshot.remember(vm("4"));
    expect(interner.hits).toBe(6);
    expect((await snapshot.read()).byId.get("4")?.location).toBe("us-east1-a");
  });

  it("keeps the copy it holds of a resource a new list shows alike, and takes the new one when it changed", async () => {
    let state = "RUNNING";
    let clock = 1000;
    const snapshot = new FamilySnapshot({
      list: async () => [
        { id: "1", name: "a", state: "RUNNING", disks: [{ id: "d-1" }] },
        { id: "2", name: "b", state, disks: [] },
      ],
      idOf: (item) => item.id,
      nameOf: (item) => item.name,
      maxAgeMs: 10_000,
      minIntervalMs: 0,
      now: () => clock,
    });
    const first = await snapshot.read();
    state = "STOPPED";
    clock += 20_000;
    const second = await snapshot.read();
    expect(second).not.toBe(first);
    // Alike: the long-lived copy stays (the listed one is garbage at once); changed: the new one.
    expect(second.byId.get("1")).toBe(first.byId.get("1"));
    expect(second.byName.get("a")).toBe(first.byId.get("1"));
    expect(second.byId.get("2")).not.toBe(first.byId.get("2"));
    expect(second.byId.get("2")?.state).toBe("STOPPED");
  });

  it("lists itself again each pollEveryMs while it is read, naming what changed and vanished, and rests when nobody reads", async () => {
    const items = new Map([
      ["1", { id: "1", name: "a", state: "RUNNING" }],
      ["2", { id: "2", name: "b", state: "RUNNING" }],
      ["3", { id: "3", name: "c", state: "RUNNING" }],
    ]);
    let lists = 0;
    const changed: string[][] = [];
    const vanished: string[][] = [];
    const snapshot = new FamilySnapshot({
      list: async () => {
        lists++;
        return [...items.values()].map((item) => ({ ...item }));
      },
      idOf: (item) => item.id,
      nameOf: (item) => item.name,
      maxAgeMs: 60_000,
      minIntervalMs: 0,
      pollEveryMs: 40,
      idleAfterMs: 300,
      onChanged: (ids) => changed.push(ids),
      onVanished: (ids) => vanished.push(ids),
    });
    try {
      await snapshot.read();
      // Changed and deleted by someone else: no reader asks, the background list sees it.
      items.set("2", { id: "2", name: "b", state: "STOPPED" });
      items.delete("3");
      await vi.waitFor(() => expect(changed).toEqual([["2"]]), { timeout: 2000, interval: 10 });
      expect(vanished).toEqual([["3"]]);
      expect((await snapshot.read()).byId.get("2")?.state).toBe("STOPPED");
      // Lists alike name nothing; once nobody has read it for idleAfterMs, it stops listing.
      await new Promise((resolve) => setTimeout(resolve, 700));
      expect(changed).toHaveLength(1);
      const resting = lists;
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(lists).toBe(resting);
      // The next read lists (the view is older than an interval only if maxAge says so: ask for it) and polls again.
      await snapshot.read(Date.now());
      const again = lists;
      await vi.waitFor(() => expect(lists).toBeGreaterThan(again), { timeout: 2000, interval: 10 });
    } finally {
      snapshot.stop();
    }
    const stopped = lists;
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(lists).toBe(stopped);
  });

  describe("readOne: one resource refreshed by id in a large family", () => {
    function large(
      count: number,
      idsIntervalMs = 0,
      extra: { holds?: (item: { id: string }) => boolean; onVanished?: (ids: string[]) => void } = {},
    ) {
      const items = new Map(
        Array.from({ length: count }, (_, i) => [`id-${i}`, { id: `id-${i}`, name: `vm-${i}`, v: 1 }]),
      );
      let clock = 1000;
      const calls = { full: 0, byIds: [] as string[][] };
      const snapshot = new FamilySnapshot<{ id: string; name: string; v: number }>({
        list: async () => {
          calls.full++;
          return [...items.values()];
        },
        listIds: async (ids) => {
          calls.byIds.push(ids);
          // Fresh copies, as every answer of a server is.
          return ids.flatMap((id) => {
            const item = items.get(id);
            return item === undefined ? [] : [{ ...item }];
          });
        },
        idOf: (item) => item.id,
        nameOf: (item) => item.name,
        maxAgeMs: 10_000,
        minIntervalMs: 0,
        idsIntervalMs,
        fullListUpTo: 10,
        maxIdsPerList: 3,
        now: () => clock,
        ...extra,
      });
      return { snapshot, items, calls, advance: (ms: number) => (clock += ms) };
    }

    it("many settled resources at once share lists by ids, not full lists", async () => {
      const { snapshot, items, calls, advance } = large(50);
      await snapshot.read();
      advance(10);
      for (const id of ["id-1", "id-2", "id-3", "id-4"]) items.set(id, { id, name: id.replace("id", "vm"), v: 2 });
      items.delete("id-5");
      const found = await Promise.all(["id-1", "id-2", "id-3", "id-4", "id-5"].map((id) => snapshot.readOne(id, 1005)));
      expect(found.map((item) => item?.v)).toEqual([2, 2, 2, 2, undefined]);
      expect(calls.full).toBe(1);
      // At most 3 per call; everyone asking meanwhile rides along.
      expect(calls.byIds.map((ids) => ids.length)).toEqual([3, 2]);
      // The view holds the fresh versions; a gone one is dropped (by id and by name).
      const view = await snapshot.read();
      expect(view.byId.get("id-1")?.v).toBe(2);
      expect(view.byId.has("id-5")).toBe(false);
      expect(view.byName.has("vm-5")).toBe(false);
      // Already fresh enough: no call.
      await snapshot.readOne("id-1", 1005);
      expect(calls.byIds).toHaveLength(2);
    });

    it("a list by ids keeps the copy it holds of a resource shown alike, and takes the new one when it changed", async () => {
      const { snapshot, items, advance } = large(50);
      const first = await snapshot.read();
      // Held before the list by ids (which refreshes the view in place).
      const [held1, held2] = [first.byId.get("id-1"), first.byId.get("id-2")];
      advance(10);
      items.set("id-2", { id: "id-2", name: "vm-2", v: 2 });
      const [same, changed] = await Promise.all([snapshot.readOne("id-1", 1005), snapshot.readOne("id-2", 1005)]);
      expect(same).toBe(held1);
      expect(changed).not.toBe(held2);
      expect(changed?.v).toBe(2);
    });

    it("a settled operation makes a small family list again for everyone; a large one only refreshes by id", async () => {
      const small = large(5);
      await small.snapshot.read();
      small.advance(10);
      small.snapshot.settled(1005);
      await small.snapshot.read(); // any reader, no notBefore: the view predates the settlement
      expect(small.calls.full).toBe(2);
      const big = large(50);
      await big.snapshot.read();
      big.advance(10);
      big.items.set("id-3", { id: "id-3", name: "vm-3", v: 2 });
      big.snapshot.settled(1005);
      await big.snapshot.read();
      expect(big.calls.full).toBe(1);
      // The owner's pass asks for its resource as fresh as the settlement; everyone sees it afterwards.
      expect((await big.snapshot.readOne("id-3", 1005))?.v).toBe(2);
      expect((await big.snapshot.read()).byId.get("id-3")?.v).toBe(2);
    });

    it("a spec change's read goes at once, settled ones keep the spacing between lists by ids", async () => {
      vi.useFakeTimers();
      try {
        const { snapshot, calls, advance } = large(50, 1000);
        await snapshot.read();
        advance(10);
        const first = snapshot.readOne("id-1", 1005);
        await vi.advanceTimersByTimeAsync(0);
        await first;
        const answered: string[] = [];
        const settled = snapshot.readOne("id-2", 1005).then(() => answered.push("settled"));
        await vi.advanceTimersByTimeAsync(10);
        expect(answered).toEqual([]); // batched: the next list by ids is a second after the last
        const change = snapshot.readOne("id-3", 1005, true).then(() => answered.push("change"));
        await vi.advanceTimersByTimeAsync(0);
        await Promise.all([settled, change]);
        // The spec change did not wait; the settled read rode along with it.
        expect(calls.byIds).toEqual([["id-1"], ["id-3", "id-2"]]);
        expect(answered.sort()).toEqual(["change", "settled"]);
      } finally {
        vi.useRealTimers();
      }
    });

    it("a periodic look (no notBefore) and a small family use the full list", async () => {
      const big = large(50);
      await big.snapshot.readOne("id-1");
      expect(big.calls).toMatchObject({ full: 1, byIds: [] });
      const small = large(5);
      await small.snapshot.read();
      small.advance(10);
      await small.snapshot.readOne("id-1", 1005);
      expect(small.calls).toMatchObject({ full: 2, byIds: [] });
    });

    it("a resource an operation's answer showed is its owner's fresh view: no list, whatever the family's size", async () => {
      for (const count of [5, 50]) {
        const { snapshot, calls, advance } = large(count);
        await snapshot.read();
        advance(10);
        // The settling list started at 1005 (notBefore); the operation's result is in the view from 1008.
        advance(3);
        snapshot.observed({ id: "id-1", name: "vm-1", v: 4 }, 1013);
        expect((await snapshot.readOne("id-1", 1005))?.v).toBe(4);
        expect(calls).toMatchObject({ full: 1, byIds: [] });
        // Everyone else reads the view as it is; a change asked for after that result still lists.
        expect((await snapshot.read()).byName.get("vm-1")?.v).toBe(4);
        advance(10);
        await snapshot.readOne("id-1", 1020, true);
        expect(calls.full + calls.byIds.length).toBe(2);
      }
    });

    it("a shard's replica holds what `holds` keeps: the others known by name, never reported gone, the family still large", async () => {
      const held = new Set(["id-0", "id-1", "id-2", "id-3", "id-4"]);
      const vanished: string[][] = [];
      const { snapshot, items, calls, advance } = large(50, 0, {
        holds: (item) => held.has(item.id),
        onVanished: (ids) => vanished.push(ids),
      });
      const view = await snapshot.read();
      expect([...view.byId.keys()]).toEqual([...held]);
      expect(view.byName.has("vm-7")).toBe(false);
      expect(view.othersByName?.get("vm-7")).toBe("id-7");
      expect(view.othersByName?.has("vm-1")).toBe(false);
      // Fifty listed though five held: a settled operation refreshes by id, not by a full list of the family.
      advance(10);
      snapshot.settled(1005);
      await snapshot.read();
      expect(calls.full).toBe(1);
      // One of ours asks for another's resource by id (an adoption): read and held, whatever `holds` says.
      expect((await snapshot.readOne("id-7", 1005))?.id).toBe("id-7");
      expect((await snapshot.read()).byId.has("id-7")).toBe(true);
      // No longer ours (another shard's object took it) is not gone; deleted is.
      held.delete("id-1");
      items.delete("id-2");
      advance(10);
      await snapshot.read(1020);
      expect(vanished).toEqual([["id-2"]]);
      expect((await snapshot.read()).othersByName?.get("vm-1")).toBe("id-1");
    });

    it("a shard's replica looks again in the background at what it holds, by id, not at the whole family", async () => {
      const items = new Map(
        Array.from({ length: 40 }, (_, i) => [`id-${i}`, { id: `id-${i}`, name: `vm-${i}`, v: 1 }]),
      );
      const calls = { full: 0, byIds: [] as string[][] };
      const changed: string[][] = [];
      const vanished: string[][] = [];
      const held = new Set(["id-0", "id-1", "id-2", "id-3", "id-4"]);
      const snapshot = new FamilySnapshot<{ id: string; name: string; v: number }>({
        list: async () => {
          calls.full++;
          return [...items.values()].map((item) => ({ ...item }));
        },
        listIds: async (ids) => {
          calls.byIds.push(ids);
          return ids.flatMap((id) => {
            const item = items.get(id);
            return item === undefined ? [] : [{ ...item }];
          });
        },
        holds: (item) => held.has(item.id),
        idOf: (item) => item.id,
        nameOf: (item) => item.name,
        maxAgeMs: 60_000,
        minIntervalMs: 0,
        fullListUpTo: 10,
        maxIdsPerList: 3,
        pollEveryMs: 40,
        onChanged: (ids) => changed.push(ids),
        onVanished: (ids) => vanished.push(ids),
      });
      try {
        await snapshot.read();
        // Changed and deleted by someone else, ours and another shard's.
        items.set("id-1", { id: "id-1", name: "vm-1", v: 2 });
        items.set("id-20", { id: "id-20", name: "vm-20", v: 2 });
        items.delete("id-3");
        await vi.waitFor(() => expect(changed).toEqual([["id-1"]]), { timeout: 2000, interval: 10 });
        expect(vanished).toEqual([["id-3"]]);
        expect(calls.full).toBe(1);
        // Only the five held ids were asked for, three at most per call.
        expect([...new Set(calls.byIds.flat())].sort()).toEqual(["id-0", "id-1", "id-2", "id-3", "id-4"]);
        expect(Math.max(...calls.byIds.map((ids) => ids.length))).toBe(3);
        expect((await snapshot.read()).byId.get("id-1")?.v).toBe(2);
        expect((await snapshot.read()).byId.has("id-3")).toBe(false);
        // Holding most of the family (nobody claims it yet: an adoption), by ids would cost more: full lists.
        for (let i = 0; i < 40; i++) held.add(`id-${i}`);
        await snapshot.read(Date.now());
        const [full, byIds] = [calls.full, calls.byIds.length];
        await vi.waitFor(() => expect(calls.full).toBeGreaterThan(full + 1), { timeout: 2000, interval: 10 });
        expect(calls.byIds.length).toBe(byIds);
      } finally {
        snapshot.stop();
      }
    });

    it("a full list started before a resource was read by id keeps the newer version", async () => {
      const { snapshot, items, advance } = large(50);
      await snapshot.read();
      advance(10);
      items.set("id-7", { id: "id-7", name: "vm-7", v: 3 });
      await snapshot.readOne("id-7", 1005);
      expect((await snapshot.read()).byId.get("id-7")?.v).toBe(3);
    });
  });
});

describe("findResource", () => {
  const object = (id?: string) =>
    ({ metadata: { uid: "u" }, spec: id === undefined ? {} : { id }, status: {} }) as unknown as Parameters<
      typeof findResource
    >[1];

  it("reads by id a name the view knows but does not hold (another shard's object holds it): never taken as free", async () => {
    const other = { id: "id-9", name: "trainer" };
    const remembered: unknown[] = [];
    const gets: string[] = [];
    const snapshot = {
      read: async () => ({
        byId: new Map<string, typeof other>(),
        byName: new Map<string, typeof other>(),
        othersByName: new Map([["trainer", "id-9"]]),
        fetchedAt: 0,
      }),
      readOne: async () => undefined,
      remember: (item: typeof other) => remembered.push(item),
    };
    const get = async (id: string) => {
      gets.push(id);
      if (id !== "id-9") throw http(404);
      return other;
    };
    expect(await findResource(snapshot, object(), { cloudName: "trainer" }, get)).toBe(other);
    expect(gets).toEqual(["id-9"]);
    expect(remembered).toEqual([other]);
    // A name nobody has is free without a read.
    expect(await findResource(snapshot, object(), { cloudName: "nobody" }, get)).toBeUndefined();
    expect(gets).toEqual(["id-9"]);
  });
});

describe("parseCredentialsSecret", () => {
  const b64 = (s: string) => Buffer.from(s).toString("base64");
  const meta = { namespace: "ns", name: "creds" };
  const rows: { reason: string; secret: SecretLike; ok: boolean; message?: RegExp }[] = [
    {
      reason: "apiKey + projectId + apiUrl",
      secret: { metadata: meta, data: { apiKey: b64("k"), projectId: b64("p"), apiUrl: b64("http://x/v0.1") } },
      ok: true,
    },
    {
      reason: "email + password with the default URL",
      secret: { metadata: meta, stringData: { email: "a@b", password: "pw", projectId: "p" } },
      ok: true,
    },
    {
      reason: "no key at all",
      secret: { metadata: meta, data: { projectId: b64("p") } },
      ok: false,
      message: /neither key apiKey/,
    },
    {
      reason: "no projectId",
      secret: { metadata: meta, stringData: { apiKey: "k" } },
      ok: false,
      message: /no key projectId/,
    },
    {
      reason: "a projectId that status could not hold (a Secret's contents are checked, like a cloud answer)",
      secret: { metadata: meta, stringData: { apiKey: "k", projectId: "p".repeat(200) } },
      ok: false,
      message: /projectId is not a project id/,
    },
    {
      reason: "a bad apiUrl",
      secret: { metadata: meta, stringData: { apiKey: "k", projectId: "p", apiUrl: "ftp://x" } },
      ok: false,
      message: /http/,
    },
  ];
  it.each(rows)("$reason", ({ secret, ok, message }) => {
    const parsed = parseCredentialsSecret(secret, "http://default/v0.1");
    expect(parsed.ok).toBe(ok);
    if (!parsed.ok && message) {
      expect(parsed.message).toMatch(message);
      expect(parsed.message).not.toContain("pw");
    }
  });
});

describe("CredentialStore", () => {
  it("keeps the account across a metadata-only change of its Secret, and builds a new one when a key changes", () => {
    let secret: SecretLike = {
      metadata: { namespace: "ns", name: "gpucloud-credentials", resourceVersion: "1" },
      stringData: { email: "a@b", password: "pw-1", projectId: "p" },
    };
    const built: string[] = [];
    const disposed: string[] = [];
    const store = new CredentialStore<{ password: string }>({
      secrets: { getSecret: () => secret },
      defaultApiUrl: "http://cloud/v0.1",
      logger: pino({ level: "silent" }),
      build: (parsed) => {
        const password = "password" in parsed.credentials ? parsed.credentials.password : "";
        built.push(password);
        return { password };
      },
      dispose: (account) => disposed.push(account.password),
    });
    const accountOf = () => {
      const resolved = store.resolve("ns", undefined);
      if (resolved.type !== "ok") throw new Error(resolved.message);
      return resolved.handle.account;
    };
    const first = accountOf();
    // The in-use finalizer is added: a new resourceVersion, the same credentials. What the account learned stays.
    secret = { ...secret, metadata: { ...secret.metadata, resourceVersion: "2" } };
    expect(accountOf()).toBe(first);
    // The password is changed: a new account (a new client), the old one released.
    secret = {
      ...secret,
      metadata: { ...secret.metadata, resourceVersion: "3" },
      stringData: { email: "a@b", password: "pw-2", projectId: "p" },
    };
    expect(accountOf()).not.toBe(first);
    expect(built).toEqual(["pw-1", "pw-2"]);
    expect(disposed).toEqual(["pw-1"]);
  });
});

describe("DependencyIndex", () => {
  it("wakes exactly the dependents, and forgets references that were removed", () => {
    const index = new DependencyIndex();
    index.record("GpuVm", "ns", "trainer", ["GpuDisk/data", "Secret/creds"]);
    index.record("GpuVm", "ns", "other", ["Secret/creds"]);
    expect(index.dependents("GpuVm", "GpuDisk", "ns", "data")).toEqual(["ns/trainer"]);
    expect(index.dependents("GpuVm", "Secret", "ns", "creds").sort()).toEqual(["ns/other", "ns/trainer"]);
    expect(index.dependents("GpuVm", "GpuDisk", "elsewhere", "data")).toEqual([]);
    index.record("GpuVm", "ns", "trainer", ["Secret/creds"]);
    expect(index.dependents("GpuVm", "GpuDisk", "ns", "data")).toEqual([]);
  });

  it("holds one string for a target many objects share (the credentials Secret), not one per object", () => {
    const index = new DependencyIndex();
    const hits = sharedInterner.hits;
    for (let i = 0; i < 100; i++) index.record("GpuVm", "ns", `vm-${i}`, ["Secret/shared-creds"]);
    expect(sharedInterner.hits - hits).toBeGreaterThanOrEqual(99);
  });

  it("names the targets of one dependent, including those it referred to before (detached later)", () => {
    const index = new DependencyIndex();
    index.record("GpuVm", "ns", "trainer", ["GpuDisk/data", "GpuDisk/scratch", "Secret/creds"]);
    expect(index.targets("GpuVm", "ns", "trainer", "GpuDisk").sort()).toEqual(["ns/data", "ns/scratch"]);
    index.record("GpuVm", "ns", "trainer", ["GpuDisk/data", "Secret/creds"]);
    expect(index.targets("GpuVm", "ns", "trainer", "GpuDisk").sort()).toEqual(["ns/data", "ns/scratch"]);
    expect(index.dependents("GpuVm", "GpuDisk", "ns", "scratch")).toEqual([]);
    expect(index.targets("GpuVm", "ns", "other", "GpuDisk")).toEqual([]);
  });
});

describe("ManagedParser", () => {
  const raw = () => ({
    apiVersion: "gpucloud.dev/v1alpha1",
    kind: "GpuVm",
    metadata: { namespace: "ns", name: "trainer", uid: "u-1", generation: 2, resourceVersion: "41" },
    spec: { type: "a100.1x", location: "us-east1-a", sshPublicKey: "ssh-ed25519 AAAA k" },
    status: { id: "vm-1", observedGeneration: 2 },
  });

  it("parses an informer object once, and no pass's changes reach the next pass", () => {
    const parser = new ManagedParser(gpuVm.info.specSchema, gpuVm.info.statusSchema);
    const schema = vi.spyOn(gpuVm.info.specSchema, "safeParse");
    const object = raw();
    const first = parser.parse(object);
    if (!first.ok) throw new Error(first.message);
    // What a pass does to its object: its own write moves the version, an intent replaces the status.
    first.object.metadata.resourceVersion = "42";
    first.object.status = { id: "vm-1", observedGeneration: 2, lastError: "an intent" };
    const second = parser.parse(object);
    if (!second.ok) throw new Error(second.message);
    expect(second.object.metadata.resourceVersion).toBe("41");
    expect(second.object.status).toEqual({ id: "vm-1", observedGeneration: 2 });
    expect(schema).toHaveBeenCalledTimes(1);
    // The informer's next object (a new version) is parsed afresh.
    const next = parser.parse({ ...raw(), metadata: { ...raw().metadata, resourceVersion: "43" } });
    expect(next.object?.metadata.resourceVersion).toBe("43");
    expect(schema).toHaveBeenCalledTimes(2);
    schema.mockRestore();
  });

  it("keeps the informer's spec and status when parsing changed nothing (no second copy per object)", () => {
    const parser = new ManagedParser(gpuVm.info.specSchema, gpuVm.info.statusSchema);
    const object = raw();
    const withDefaults = parser.parse(object);
    // The API server applies the CRD's defaults; an object that has them all parses to what it is.
    const defaulted = { ...object, spec: withDefaults.object?.spec };
    const parsed = parser.parse(defaulted);
    expect(parsed.object?.spec).toBe(defaulted.spec);
    expect(parsed.object?.status).toBe(object.status);
  });

  it("parses a new version's spec and status only when the informer handed it new ones", () => {
    const parser = new ManagedParser(gpuVm.info.specSchema, gpuVm.info.statusSchema);
    const specSchema = vi.spyOn(gpuVm.info.specSchema, "safeParse");
    const statusSchema = vi.spyOn(gpuVm.info.statusSchema, "safeParse");
    const object = raw();
    parser.parse(object);
    // A status write: the informer's next object shares the spec object (runtime/informer.ts shareUnchanged).
    const statusWritten = {
      ...object,
      metadata: { ...object.metadata, resourceVersion: "42" },
      status: { id: "vm-1" },
    };
    expect(parser.parse(statusWritten).object?.status).toEqual({ id: "vm-1" });
    expect(specSchema).toHaveBeenCalledTimes(1);
    expect(statusSchema).toHaveBeenCalledTimes(2);
    // A finalizer write shares both.
    const finalized = { ...statusWritten, metadata: { ...statusWritten.metadata, finalizers: ["f"] } };
    expect(parser.parse(finalized).object?.metadata.finalizers).toEqual(["f"]);
    expect(specSchema).toHaveBeenCalledTimes(1);
    expect(statusSchema).toHaveBeenCalledTimes(2);
    // A new spec object is parsed, even when equal.
    parser.parse({ ...finalized, spec: { ...object.spec } });
    expect(specSchema).toHaveBeenCalledTimes(2);
    specSchema.mockRestore();
    statusSchema.mockRestore();
  });

  it("hands out an invalid spec's object with its message, every time", () => {
    const parser = new ManagedParser(gpuVm.info.specSchema, gpuVm.info.statusSchema);
    const object = { ...raw(), spec: { type: 7 } };
    const first = parser.parse(object);
    const second = parser.parse(object);
    expect(first.ok).toBe(false);
    expect(second).toEqual(first);
    expect(second.object).not.toBe(first.object);
  });
});
