// The capacity queue under a fake clock: thirty creates waiting on capacity 0 go, when ten come free, exactly the ten
// oldest and in order, with at most one availability probe per interval for the pair; priorities go first, a later
// joiner of the same priority never overtakes; a location list moves waiters on; shards and restarts compute the
// same order from the same objects; where the cloud only says yes, creates go one, then two, then four at once.
import { describe, expect, it } from "vitest";
import { CapacityQueue, type CapacityWaiter, queueMessage } from "../../src/admission/capacity-queue.ts";

const INTERVAL = 60_000;
const T0 = Date.parse("2026-11-28T12:00:00Z");

function clock() {
  let now = T0;
  return {
    now: () => now,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

const waiter = (name: string, sinceMinutes: number, extra: Partial<CapacityWaiter> = {}): CapacityWaiter => ({
  key: `team/${name}`,
  uid: `uid-${name}`,
  type: "a40.1x",
  locations: ["us-east1-a"],
  locationIndex: 0,
  priority: 0,
  sinceMs: T0 - 3600_000 + sinceMinutes * 60_000,
  ...extra,
});

/** Deterministic shuffle, so that insertion order never decides anything. */
function shuffled<T>(items: T[], seed = 7): T[] {
  const copy = [...items];
  let state = seed;
  for (let i = copy.length - 1; i > 0; i--) {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    const j = state % (i + 1);
    [copy[i], copy[j]] = [copy[j] as T, copy[i] as T];
  }
  return copy;
}

describe("CapacityQueue", () => {
  it("capacity 0 then 10 for 30 waiters: exactly the 10 oldest proceed, in order, probing at most once per interval", () => {
    const time = clock();
    const queue = new CapacityQueue({ now: time.now, probeIntervalMs: INTERVAL });
    const waiters = Array.from({ length: 30 }, (_, i) => waiter(`vm${String(i).padStart(2, "0")}`, i));
    for (const entry of shuffled(waiters)) queue.upsert(entry);
    let free = 0;
    let probes = 0;
    const started: string[] = [];
    // Ten minutes of a reconcile loop ticking every second; capacity comes back after five.
    for (let second = 0; second < 600; second++) {
      if (second === 300) free = 10;
      for (const pair of queue.dueProbes()) {
        probes++;
        const { admitted } = queue.record(pair.type, pair.location, { available: free > 0, count: free });
        for (const key of admitted) {
          expect(queue.mayTry(key)).toBe(true);
          queue.started(key);
          free--;
          started.push(key);
        }
      }
      // Nobody else may try in between.
      for (const entry of waiters) if (!started.includes(entry.key)) expect(queue.mayTry(entry.key)).toBe(false);
      time.advance(1000);
    }
    expect(started).toEqual(waiters.slice(0, 10).map((entry) => entry.key));
    expect(probes).toBeLessThanOrEqual(600 / 60);
    expect(queue.readings()).toEqual([
      { type: "a40.1x", location: "us-east1-a", length: 20, oldestWaitSeconds: expect.any(Number), probes },
    ]);
    expect(queue.position("team/vm10")).toMatchObject({ position: 1, length: 20, admitted: false });
  });

  it("puts a higher priority first; a later joiner of the same priority stays behind", () => {
    const time = clock();
    const queue = new CapacityQueue({ now: time.now });
    queue.upsert(waiter("old", 0));
    queue.upsert(waiter("new", 30));
    queue.upsert(waiter("urgent", 50, { priority: 10 }));
    queue.record("a40.1x", "us-east1-a", { available: true, count: 2 });
    expect(queue.mayTry("team/urgent")).toBe(true);
    expect(queue.mayTry("team/old")).toBe(true);
    expect(queue.mayTry("team/new")).toBe(false);
    // One more arrives with the same priority as "new", later: it is behind "new".
    queue.upsert(waiter("later", 40));
    expect(queue.position("team/later")).toMatchObject({ position: 4, length: 4 });
    expect(queueMessage({ type: "a40.1x", location: "us-east1-a", position: 2, length: 4, admitted: true })).toBe(
      "2nd of 4 waiting for a40.1x in us-east1-a; capacity is there, its create goes next",
    );
  });

  it("keeps a waiter's place after an out-of-stock create, and holds everyone until the next probe", () => {
    const time = clock();
    const queue = new CapacityQueue({ now: time.now, probeIntervalMs: INTERVAL });
    for (const name of ["a", "b"]) queue.upsert(waiter(name, name === "a" ? 0 : 1));
    expect(queue.dueProbes()).toHaveLength(1);
    queue.record("a40.1x", "us-east1-a", { available: true, count: 1 });
    queue.started("team/a");
    // The cloud said one, but the create failed out of stock: "a" rejoins, first again; no room now.
    queue.outOfStock("a40.1x", "us-east1-a");
    queue.upsert(waiter("a", 0));
    expect(queue.position("team/a")).toMatchObject({ position: 1, admitted: false });
    time.advance(INTERVAL - 1);
    expect(queue.dueProbes()).toEqual([]);
    time.advance(1);
    expect(queue.dueProbes()).toEqual([{ type: "a40.1x", location: "us-east1-a" }]);
  });

  it("moves waiters with a location list on when their location has none, keeping their place", () => {
    const time = clock();
    const queue = new CapacityQueue({ now: time.now });
    const locations = ["us-east1-a", "eu-iceland1-a"];
    queue.upsert(waiter("walker", 0, { locations }));
    queue.upsert(waiter("fixed", 5));
    queue.upsert(waiter("there", 10, { locations: ["eu-iceland1-a"] }));
    const none = queue.record("a40.1x", "us-east1-a", { available: false });
    expect(none.moved).toEqual([{ key: "team/walker", locationIndex: 1 }]);
    expect(queue.position("team/fixed")).toMatchObject({ location: "us-east1-a", position: 1 });
    // In its next location it is ahead of the one waiting there since later.
    expect(queue.position("team/walker")).toMatchObject({ location: "eu-iceland1-a", position: 1, length: 2 });
    expect(queue.record("a40.1x", "eu-iceland1-a", { available: true, count: 1 }).admitted).toEqual(["team/walker"]);
    // With no room there either, it wraps around to the first.
    expect(queue.record("a40.1x", "eu-iceland1-a", { available: false }).moved).toEqual([
      { key: "team/walker", locationIndex: 0 },
    ]);
  });

  it("orders the same across shards and restarts: each shard admits only its own waiters among the heads", () => {
    const waiters = Array.from({ length: 12 }, (_, i) => waiter(`vm${String(i).padStart(2, "0")}`, i));
    const shardOf = (key: string) => Number(key.slice(-2)) % 2;
    const replicas = [0, 1].map((shard) => {
      const queue = new CapacityQueue({ owns: (key) => shardOf(key) === shard });
      for (const entry of shuffled(waiters, 11 + shard)) queue.upsert(entry);
      return queue;
    });
    const admitted = replicas.flatMap(
      (queue) => queue.record("a40.1x", "us-east1-a", { available: true, count: 5 }).admitted,
    );
    expect(admitted.sort()).toEqual(waiters.slice(0, 5).map((entry) => entry.key));
    // A restarted process (a new queue from the same objects) computes the same positions.
    const restarted = new CapacityQueue();
    for (const entry of shuffled(waiters, 99)) restarted.upsert(entry);
    for (const entry of waiters) {
      expect(restarted.position(entry.key)?.position).toBe(replicas[0]?.position(entry.key)?.position);
    }
    // A shard probes only pairs where it owns a waiter.
    const lonely = new CapacityQueue({ owns: () => false });
    lonely.upsert(waiter("x", 0));
    expect(lonely.dueProbes()).toEqual([]);
  });

  it("where the cloud only says yes: one create at first, then two more per success", () => {
    const queue = new CapacityQueue();
    for (let i = 0; i < 10; i++) queue.upsert(waiter(`vm${i}`, i));
    expect(queue.record("a40.1x", "us-east1-a", { available: true }).admitted).toEqual(["team/vm0"]);
    queue.started("team/vm0");
    expect(queue.succeeded("a40.1x", "us-east1-a")).toEqual(["team/vm1", "team/vm2"]);
    expect(queue.roomFor("a40.1x", "us-east1-a")).toBeUndefined();
    queue.record("a40.1x", "us-east1-a", { available: true, count: 12 });
    // Twelve free, nine waiting: a newcomer placed now (a pool's new replica) has room for three.
    expect(queue.roomFor("a40.1x", "us-east1-a")).toBe(3);
  });

  it("in order: of one replica's waiters within the room, only the first may go; the next once it started", () => {
    const waiters = Array.from({ length: 6 }, (_, i) => waiter(`vm${i}`, i));
    const ours = (key: string) => key !== "team/vm1";
    const queue = new CapacityQueue({ owns: ours, inOrder: true });
    for (const entry of shuffled(waiters)) queue.upsert(entry);
    expect(queue.record("a40.1x", "us-east1-a", { available: true, count: 4 }).admitted).toEqual([
      "team/vm0",
      "team/vm2",
      "team/vm3",
    ]);
    // Another replica's waiter (vm1) ahead holds no one back; ours go one after the other.
    expect(["team/vm0", "team/vm2", "team/vm3"].map((key) => queue.mayTry(key))).toEqual([true, false, false]);
    expect(queue.started("team/vm0")).toEqual(["team/vm2", "team/vm3"]);
    expect(["team/vm2", "team/vm3"].map((key) => queue.mayTry(key))).toEqual([true, false]);
    queue.started("team/vm2");
    expect(queue.mayTry("team/vm3")).toBe(true);
    queue.started("team/vm3");
    // The room is used up (vm1 holds the fourth place): the rest wait for the next probe.
    expect(queue.mayTry("team/vm4")).toBe(false);
    expect(queue.admitted("a40.1x", "us-east1-a")).toEqual([]);
    // Without the option, every waiter within the room may go at once (what the other tests rely on).
    const atOnce = new CapacityQueue();
    for (const entry of waiters) atOnce.upsert(entry);
    atOnce.record("a40.1x", "us-east1-a", { available: true, count: 3 });
    expect(waiters.slice(0, 3).every((entry) => atOnce.mayTry(entry.key))).toBe(true);
  });
});
