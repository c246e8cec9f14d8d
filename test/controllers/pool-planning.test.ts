// The pure parts of the GpuVmPool controller: the plan of a pass (scale, capacity moves, rolling replacement and
// in-place changes within maxUnavailable/maxSurge), the removal order, placement, the revision and in-place diff.
import { describe, expect, it } from "vitest";
import { GpuVmPoolSpec } from "../../src/api/gpu-vm-pool.ts";
import { inPlaceChangeOf, type Member, revisionOf } from "../../src/controllers/pool-members.ts";
import { placeReplicas } from "../../src/controllers/pool-placement.ts";
import { planPool, type SlotState } from "../../src/controllers/pool-rollout.ts";
import { removalOrder } from "../../src/controllers/pool-scale-down.ts";
import { SSH_KEY } from "./harness.ts";

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
  it("spreads over the locations with capacity, fewest first, the list order breaking ties", () => {
    const placed = new Map([["a", 2]]);
    expect(placeReplicas(4, { locations, strategy: "Spread", placed, full: new Set(["c"]) })).toEqual([
      "b",
      "b",
      "a",
      "b",
    ]);
  });

  it("packs into the first location with capacity", () => {
    expect(placeReplicas(2, { locations, strategy: "Pack", placed: new Map(), full: new Set(["a"]) })).toEqual([
      "b",
      "b",
    ]);
  });

  it("places nothing when every location is full", () => {
    expect(placeReplicas(2, { locations, strategy: "Spread", placed: new Map(), full: new Set(locations) })).toEqual([
      undefined,
      undefined,
    ]);
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
});
