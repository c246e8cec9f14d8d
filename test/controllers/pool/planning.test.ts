// The pure parts of the GpuVmPool controller: the plan of a pass (scale, capacity moves, rolling replacement and
// in-place changes within maxUnavailable/maxSurge), the removal order, placement, the revision and in-place diff.
import { describe, expect, it } from "vitest";
import { GpuVmPoolSpec } from "../../../src/api/gpu-vm-pool.ts";
import {
  desiredVm,
  hasPoolDisks,
  inPlaceChangeOf,
  type Member,
  poolDisksPatch,
  revisionOf,
} from "../../../src/controllers/pool/members.ts";
import {
  CapacityMemory,
  type LocationEvidence,
  placeReplicas,
  type Room,
  roomIn,
  SLOW_START_BATCH,
} from "../../../src/controllers/pool/placement.ts";
import { planPool, type SlotState } from "../../../src/controllers/pool/rollout.ts";
import { removalOrder } from "../../../src/controllers/pool/scale-down.ts";
import { SSH_KEY } from "../harness.ts";

function slot(name: string, extra: Partial<SlotState> = {}): SlotState {
  return {
    name,
    started: true,
    ready: true,
    outdated: false,
    deleteFirst: false,
    createdAtMs: Number(name.replace(/\D/g, "")) * 1000,
    movable: false,
    change: undefined,
    ...extra,
  };
}

const ROLLING = { type: "RollingReplace" as const, maxUnavailable: 1, maxSurge: 0 };
const CHANGE = { patch: { spec: { type: "a100.2x" } }, disruptive: true, summary: "type a100.1x → a100.2x" };

describe("removal order", () => {
  it("takes the marked ones, then the not Ready, then the outdated, then the newest", () => {
    const order = removalOrder([
      slot("r1"),
      slot("r2", { ready: false }),
      slot("r3"),
      slot("r4", { outdated: true }),
      slot("r5", { deleteFirst: true }),
      slot("r6"),
    ]);
    expect(order.map((entry) => entry.name)).toEqual(["r5", "r2", "r4", "r6", "r3", "r1"]);
  });
});

describe("the plan of a pass", () => {
  it("adds what is missing and removes the excess in removal order", () => {
    expect(planPool({ replicas: 3, strategy: ROLLING, slots: [slot("r1")], replacedTerminating: 0 })).toEqual({
      remove: [],
      add: 2,
      change: [],
      held: 0,
    });
    const down = planPool({
      replicas: 1,
      strategy: ROLLING,
      slots: [slot("r1"), slot("r2"), slot("r3", { ready: false })],
      replacedTerminating: 0,
    });
    expect(down.remove).toEqual([
      { name: "r3", why: "scale-down" },
      { name: "r2", why: "scale-down" },
    ]);
  });

  it("replaces one Ready replica at a time with maxUnavailable 1 and maxSurge 0, once its predecessor is gone", () => {
    const slots = [slot("r1", { outdated: true }), slot("r2", { outdated: true }), slot("r3", { outdated: true })];
    const first = planPool({ replicas: 3, strategy: ROLLING, slots, replacedTerminating: 0 });
    expect(first).toMatchObject({ remove: [{ name: "r3", why: "replace" }], add: 0, held: 2 });
    // r3 is being deleted: no room for its successor yet.
    const waiting = planPool({ replicas: 3, strategy: ROLLING, slots: slots.slice(0, 2), replacedTerminating: 1 });
    expect(waiting).toMatchObject({ remove: [], add: 0, held: 2 });
    // Gone: its successor is created; nothing else goes while it is not Ready.
    const next = planPool({ replicas: 3, strategy: ROLLING, slots: slots.slice(0, 2), replacedTerminating: 0 });
    expect(next).toMatchObject({ remove: [], add: 1 });
    const creating = planPool({
      replicas: 3,
      strategy: ROLLING,
      slots: [...slots.slice(0, 2), slot("r4", { ready: false })],
      replacedTerminating: 0,
    });
    expect(creating).toMatchObject({ remove: [], add: 0, held: 2 });
  });

  it("surges first with maxSurge 1 and maxUnavailable 0, and never drops below the replicas", () => {
    const strategy = { type: "RollingReplace" as const, maxUnavailable: 0, maxSurge: 1 };
    const slots = [slot("r1", { outdated: true }), slot("r2", { outdated: true })];
    expect(planPool({ replicas: 2, strategy, slots, replacedTerminating: 0 })).toMatchObject({ remove: [], add: 1 });
    const surged = [...slots, slot("r3", { ready: false })];
    expect(planPool({ replicas: 2, strategy, slots: surged, replacedTerminating: 0 })).toMatchObject({
      remove: [],
      add: 0,
      held: 2,
    });
    const ready = [...slots, slot("r3")];
    expect(planPool({ replicas: 2, strategy, slots: ready, replacedTerminating: 0 })).toMatchObject({
      remove: [{ name: "r2", why: "replace" }],
      add: 0,
    });
  });

  it("removes a not-Ready outdated replica without using the budget, and drops outdated slots never started", () => {
    const plan = planPool({
      replicas: 3,
      strategy: ROLLING,
      slots: [
        slot("r1", { outdated: true, ready: false }),
        slot("r2", { outdated: true }),
        slot("r3", { outdated: true, started: false, ready: false }),
      ],
      replacedTerminating: 0,
    });
    expect(plan.remove).toEqual([
      { name: "r3", why: "replace" },
      { name: "r1", why: "replace" },
    ]);
    expect(plan.held).toBe(1);
  });

  it("leaves outdated replicas alone with OnDelete", () => {
    const plan = planPool({
      replicas: 2,
      strategy: { type: "OnDelete", maxUnavailable: 1, maxSurge: 0 },
      slots: [slot("r1", { outdated: true }), slot("r2", { outdated: true, change: CHANGE })],
      replacedTerminating: 0,
    });
    expect(plan).toEqual({ remove: [], add: 0, change: [], held: 0 });
  });

  it("changes in place within maxUnavailable (at least one at a time), metadata-only changes at once", () => {
    const metadataOnly = { patch: { metadata: { labels: { a: "b" } } }, disruptive: false, summary: "labels a" };
    const plan = planPool({
      replicas: 3,
      strategy: { type: "RollingReplace", maxUnavailable: 0, maxSurge: 1 },
      slots: [slot("r1", { change: CHANGE }), slot("r2", { change: CHANGE }), slot("r3", { change: metadataOnly })],
      replacedTerminating: 0,
    });
    expect(plan.change.map((entry) => entry.name)).toEqual(["r3", "r2"]);
    expect(plan.held).toBe(1);
  });

  it("moves a replica whose create failed for capacity when another location can take it", () => {
    const plan = planPool({
      replicas: 2,
      strategy: ROLLING,
      slots: [slot("r1"), slot("r2", { ready: false, movable: true })],
      replacedTerminating: 0,
    });
    expect(plan).toMatchObject({ remove: [{ name: "r2", why: "capacity" }], add: 1 });
  });
});

describe("placement", () => {
  const locations = ["a", "b", "c"];
  const open = (count: number): Room => ({ count, limitedBy: "capacity" });
  const rooms = (entries: Record<string, Room>) => new Map(Object.entries(entries));

  it("spreads over the locations with room, fewest first, the list order breaking ties", () => {
    const placed = new Map([["a", 2]]);
    const room = rooms({ a: open(9), b: open(9), c: open(0) });
    expect(placeReplicas(4, { locations, strategy: "Spread", placed, room }).locations).toEqual(["b", "b", "a", "b"]);
  });

  it("packs into the first location with room, then the next", () => {
    const room = rooms({ a: open(0), b: open(1), c: open(5) });
    expect(placeReplicas(3, { locations, strategy: "Pack", placed: new Map(), room })).toEqual({
      locations: ["b", "c", "c"],
      noCapacity: 0,
      batched: 0,
    });
  });

  it("places no more than each location's room: the rest is pending for capacity", () => {
    const room = rooms({ a: open(20), b: open(12), c: open(0) });
    const placement = placeReplicas(128, { locations, strategy: "Spread", placed: new Map(), room });
    expect(placement.locations.filter((location) => location === "a")).toHaveLength(20);
    expect(placement.locations.filter((location) => location === "b")).toHaveLength(12);
    expect(placement).toMatchObject({ noCapacity: 96, batched: 0 });
  });

  it("holds back, not pending, what waits for a batch of a location without counts", () => {
    const room = rooms({ a: { count: 8, limitedBy: "batch" }, b: open(0), c: open(0) });
    expect(placeReplicas(128, { locations, strategy: "Spread", placed: new Map(), room })).toMatchObject({
      noCapacity: 0,
      batched: 120,
    });
  });
});

describe("room in a location", () => {
  const evidence = (extra: Partial<LocationEvidence>): LocationEvidence => ({
    availability: { available: true },
    holding: 0,
    starting: 0,
    full: false,
    failedBefore: false,
    ...extra,
  });

  it("is the cloud's count less the replicas still starting there", () => {
    expect(roomIn(evidence({ availability: { available: true, count: 32 }, starting: 5 }))).toEqual({
      count: 27,
      limitedBy: "capacity",
    });
    expect(roomIn(evidence({ availability: { available: true, count: 3 }, starting: 5 })).count).toBe(0);
  });

  it("is none where the cloud says no or a replica's create found no capacity lately", () => {
    expect(roomIn(evidence({ availability: { available: false } }))).toEqual({ count: 0, limitedBy: "capacity" });
    expect(roomIn(evidence({ availability: { available: true, count: 9 }, full: true })).count).toBe(0);
  });

  it("grows in batches where the cloud only says yes: at least 8, at most as many starting as hold a place", () => {
    expect(roomIn(evidence({}))).toEqual({ count: SLOW_START_BATCH, limitedBy: "batch" });
    expect(roomIn(evidence({ availability: undefined, starting: 3 })).count).toBe(SLOW_START_BATCH - 3);
    expect(roomIn(evidence({ holding: 16, starting: 4 })).count).toBe(12);
    // After a create found no capacity there, one batch at a time again.
    expect(roomIn(evidence({ holding: 32, failedBefore: true })).count).toBe(SLOW_START_BATCH);
  });

  it("never more than the capacity queue leaves: GpuVms waiting for the pair go first", () => {
    const counted = { availability: { available: true, count: 10 } };
    expect(roomIn(evidence({ ...counted, queued: 4 }))).toEqual({ count: 4, limitedBy: "capacity" });
    expect(roomIn(evidence({ ...counted, queued: 0 })).count).toBe(0);
    // The queue leaving more than the pool's own evidence changes nothing.
    expect(roomIn(evidence({ ...counted, starting: 3, queued: 12 })).count).toBe(7);
    expect(roomIn(evidence({ queued: undefined }))).toEqual({ count: SLOW_START_BATCH, limitedBy: "batch" });
  });
});

describe("capacity memory", () => {
  it("remembers a full location for the retry period, and that a create failed there", () => {
    let now = 1_000;
    const memory = new CapacityMemory(() => now);
    memory.markFull("ns/pool", "a", 500);
    expect(memory.isFull("ns/pool", "a")).toBe(true);
    now += 501;
    expect(memory.isFull("ns/pool", "a")).toBe(false);
    expect(memory.failedBefore("ns/pool", "a")).toBe(true);
    expect(memory.failedBefore("ns/pool", "b")).toBe(false);
  });

  it("keeps a replica waiting for capacity while its GpuVm tries again, until it holds a place or stalls otherwise", () => {
    const memory = new CapacityMemory();
    expect(memory.waits("ns/pool", "r1", false, false)).toBe(false);
    expect(memory.waits("ns/pool", "r1", true, false)).toBe(true);
    // Trying again (a create in flight): still waiting.
    expect(memory.waits("ns/pool", "r1", false, false)).toBe(true);
    expect(memory.waits("ns/pool", "r1", false, true)).toBe(false);
    expect(memory.waits("ns/pool", "r1", false, false)).toBe(false);
    expect(memory.waits("ns/pool", "r2", true, false)).toBe(true);
    memory.keepWaiting("ns/pool", new Set(["r1"]));
    expect(memory.waits("ns/pool", "r2", false, false)).toBe(false);
  });

  it("asks for an availability reading newer than the last change of the pool's replicas in a location", () => {
    let now = 1_000;
    const memory = new CapacityMemory(() => now);
    expect(memory.readingNotBefore("ns/pool", "a", 0, 4)).toBe(1_000);
    now = 2_000;
    expect(memory.readingNotBefore("ns/pool", "a", 0, 4)).toBe(1_000);
    // Two replicas began to hold their place: a reading from before may still count their capacity as free.
    now = 3_000;
    expect(memory.readingNotBefore("ns/pool", "a", 2, 2)).toBe(3_000);
  });
});

describe("revision and in-place changes", () => {
  const base = GpuVmPoolSpec.parse({
    template: { spec: { type: "a100.1x", image: "ubuntu22.04", sshPublicKey: SSH_KEY } },
    placement: { locations: ["us-east1-a"] },
  });
  const withTemplate = (spec: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    GpuVmPoolSpec.parse({
      template: { spec: { type: "a100.1x", image: "ubuntu22.04", sshPublicKey: SSH_KEY, ...spec } },
      placement: { locations: ["us-east1-a"] },
      ...extra,
    });

  it("changes with create-only fields, not with changeable ones or the scale", () => {
    const revision = revisionOf(base);
    expect(revision).toMatch(/^[0-9a-f]{10}$/);
    expect(revisionOf(withTemplate({ type: "a100.8x", powerState: "Stopped" }, { replicas: 5 }))).toBe(revision);
    expect(revisionOf(withTemplate({ image: "ubuntu22.04-nvidia-550" }))).not.toBe(revision);
    expect(revisionOf(withTemplate({ type: "a40.1x" }))).not.toBe(revision);
    expect(revisionOf(withTemplate({}, { diskTemplates: [{ name: "scratch", size: "10GiB" }] }))).not.toBe(revision);
  });

  const waitingSlot = { name: "p-abcde", location: "us-east1-a", revision: "r", recordedAt: "2026-11-27T00:00:00Z" };

  function member(spec: Record<string, unknown>, labels: Record<string, string> = {}): Member {
    return {
      name: "p-abcde",
      uid: "u",
      resourceVersion: "1",
      generation: 1,
      creationTimestamp: undefined,
      deletionTimestamp: undefined,
      labels,
      annotations: {},
      ownerReferences: [],
      spec,
      status: {},
    };
  }

  it("names what the template asks of a replica: nothing when it matches", () => {
    const matching = { type: "a100.1x", location: "us-east1-a", sshPublicKey: SSH_KEY, image: "ubuntu22.04" };
    expect(inPlaceChangeOf(base, member(matching))).toBeUndefined();
    // A create-only difference is no in-place change (the revision replaces the replica).
    expect(inPlaceChangeOf(withTemplate({ image: "ubuntu22.04-nvidia-550" }), member(matching))).toBeUndefined();
  });

  it("patches type and power state (disruptive) and labels or deletion policy (not)", () => {
    const matching = { type: "a100.1x", location: "us-east1-a", sshPublicKey: SSH_KEY, image: "ubuntu22.04" };
    const typeChange = inPlaceChangeOf(withTemplate({ type: "a100.2x" }), member(matching));
    expect(typeChange).toEqual({
      patch: { spec: { type: "a100.2x" } },
      disruptive: true,
      summary: "type a100.1x → a100.2x",
    });
    const quiet = GpuVmPoolSpec.parse({
      template: {
        metadata: { labels: { team: "ml" } },
        spec: { type: "a100.1x", image: "ubuntu22.04", sshPublicKey: SSH_KEY, deletionPolicy: "Orphan" },
      },
      placement: { locations: ["us-east1-a"] },
    });
    expect(inPlaceChangeOf(quiet, member(matching))).toEqual({
      patch: { metadata: { labels: { team: "ml" } }, spec: { deletionPolicy: "Orphan" } },
      disruptive: false,
      summary: "deletionPolicy Delete → Orphan, labels team",
    });
  });

  it("changes a replica's priority in place without disturbing it, and removes it with null", () => {
    const matching = { type: "a100.1x", location: "us-east1-a", sshPublicKey: SSH_KEY, image: "ubuntu22.04" };
    expect(inPlaceChangeOf(withTemplate({ priority: 20 }), member(matching))).toEqual({
      patch: { spec: { priority: 20 } },
      disruptive: false,
      summary: "priority none → 20",
    });
    expect(inPlaceChangeOf(withTemplate({ priority: 20 }), member({ ...matching, priority: 20 }))).toBeUndefined();
    expect(inPlaceChangeOf(base, member({ ...matching, priority: 20 }))).toEqual({
      patch: { spec: { priority: null } },
      disruptive: false,
      summary: "priority 20 → none",
    });
  });

  it("gives a replica the pool's disks by their own patch, after the disks it has, never as a template change", () => {
    const spec = withTemplate(
      { disks: [{ id: "disk-shared", mode: "read-only" }] },
      { diskTemplates: [{ name: "scratch", size: "200GiB" }] },
    );
    const shared = { id: "disk-shared", mode: "read-only" };
    const created = { type: "a100.1x", location: "us-east1-a", sshPublicKey: SSH_KEY, image: "ubuntu22.04" };
    const waiting = member({ ...created, disks: [shared] });
    // As created (and while its VM has no place): the template's disks, not the pool's; nothing to change.
    expect(desiredVm({ namespace: "ns", name: "p", uid: "u" }, spec, waitingSlot).spec.disks).toEqual([shared]);
    expect(hasPoolDisks(spec, waiting)).toBe(false);
    expect(inPlaceChangeOf(spec, waiting)).toBeUndefined();
    expect(poolDisksPatch(spec, waiting)).toEqual({
      spec: { disks: [shared, { diskRef: { name: "p-abcde-scratch" }, mode: "read-write" }] },
    });
    const complete = member({ ...created, ...poolDisksPatch(spec, waiting).spec });
    expect(hasPoolDisks(spec, complete)).toBe(true);
    expect(inPlaceChangeOf(spec, complete)).toBeUndefined();
    // A template disk dropped later is an ordinary change; the pool's disk stays.
    expect(inPlaceChangeOf(withTemplate({}, { diskTemplates: spec.diskTemplates }), complete)?.patch).toEqual({
      spec: { disks: [{ diskRef: { name: "p-abcde-scratch" }, mode: "read-write" }] },
    });
  });
});
