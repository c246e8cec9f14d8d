// What each action does to the ledger (a stopped VM bills nothing, so a STOP releases and a START reserves; a type
// change of a running VM reserves the new type through its STOP, UPDATE and START), and the objects as the ledger
// and the capacity queue see them.
import { describe, expect, it } from "vitest";
import {
  capacityWaiterOf,
  diskLedgerStep,
  effectivePriority,
  subjectOf,
  vmLedgerStep,
} from "../../src/admission/actions.ts";
import type { Budget } from "../../src/admission/ledger.ts";
import { DEFAULT_PRICES } from "../../src/admission/prices.ts";

const budget = (name: string, spec: Budget["spec"]): Budget => ({
  namespace: "team",
  name,
  resourceVersion: "1",
  spec,
  entries: {},
  waiting: {},
  conditions: [],
  malformed: 0,
});

describe("ledger steps", () => {
  it.each([
    [
      { action: "create", type: "a100-80gb.8x" } as const,
      { step: "reserve", need: { micros: 14_480_000, gpus: 8, gpuModel: "a100-80gb", purpose: "Create" } },
    ],
    [
      { action: "start", type: "a40.2x" } as const,
      { step: "reserve", need: { micros: 2_200_000, gpus: 2, gpuModel: "a40", purpose: "Start" } },
    ],
    [
      { action: "changeType", to: "a40.4x", running: true } as const,
      { step: "reserve", need: { micros: 4_400_000, gpus: 4, gpuModel: "a40", purpose: "TypeChange" } },
    ],
    [{ action: "changeType", to: "a40.4x", running: false } as const, { step: "none" }],
    [{ action: "stop" } as const, { step: "release" }],
    [{ action: "gone" } as const, { step: "release" }],
  ])("VM %j → %j", (action, step) => {
    expect(vmLedgerStep(action, DEFAULT_PRICES)).toEqual(step);
  });

  it("prices disks by their new size, and asks the most a budget holds for a type it cannot price", () => {
    expect(diskLedgerStep({ action: "create", sizeBytes: 1e12 }, DEFAULT_PRICES)).toEqual({
      step: "reserve",
      need: { micros: 130_000, gpus: 0, purpose: "DiskCreate" },
    });
    expect(diskLedgerStep({ action: "grow", sizeBytes: 2e12 }, DEFAULT_PRICES)).toMatchObject({
      need: { micros: 260_000, purpose: "DiskGrow" },
    });
    expect(diskLedgerStep({ action: "gone" }, DEFAULT_PRICES)).toEqual({ step: "release" });
    expect(vmLedgerStep({ action: "create", type: "h100.8x" }, DEFAULT_PRICES)).toMatchObject({
      need: { micros: 10_000_000_000_000 },
    });
  });
});

describe("objects", () => {
  const metadata = {
    name: "trainer",
    namespace: "team",
    uid: "u1",
    labels: { tier: "batch" },
    creationTimestamp: "2026-11-28T10:00:00Z",
  };

  it("caps a subject's priority by every budget that covers it", () => {
    const subject = subjectOf("GpuVm", metadata, { priority: 500 });
    expect(subject).toEqual({
      kind: "GpuVm",
      namespace: "team",
      name: "trainer",
      uid: "u1",
      labels: { tier: "batch" },
      priority: 500,
    });
    expect(subjectOf("GpuVm", metadata, {}).priority).toBe(0);
    const budgets = [
      budget("all", { maxHourlyUSD: 10, maxPriority: 100 }),
      budget("batch", { maxHourlyUSD: 10, maxPriority: 10, selector: { matchLabels: { tier: "batch" } } }),
      budget("other", { maxHourlyUSD: 10, maxPriority: -5, selector: { matchLabels: { tier: "web" } } }),
    ];
    expect(effectivePriority(subject, budgets)).toBe(10);
  });

  it("makes a capacity waiter of a GpuVm waiting for capacity, from what the object says", () => {
    const waiting = {
      metadata,
      spec: { type: "a40.1x", locations: ["us-east1-a", "eu-iceland1-a"] },
      status: {
        locationIndex: 1,
        conditions: [
          { type: "Ready", status: "False", reason: "CapacityUnavailable" },
          { type: "Stalled", status: "True", reason: "CapacityUnavailable" },
        ],
      },
    };
    expect(capacityWaiterOf(waiting, "team/trainer", 7)).toEqual({
      key: "team/trainer",
      uid: "u1",
      type: "a40.1x",
      locations: ["us-east1-a", "eu-iceland1-a"],
      locationIndex: 1,
      priority: 7,
      sinceMs: Date.parse("2026-11-28T10:00:00Z"),
    });
    const creating = { ...waiting, status: { conditions: [{ type: "Ready", status: "False", reason: "Creating" }] } };
    expect(capacityWaiterOf(creating, "team/trainer", 0)).toBeUndefined();
    // Still walking its locations (the next one is tried at once): not waiting yet.
    const walking = { ...waiting, status: { ...waiting.status, conditions: waiting.status.conditions.slice(0, 1) } };
    expect(capacityWaiterOf(walking, "team/trainer", 0)).toBeUndefined();
    // Its create intent is written (its create goes now), or it has a VM: it left the queue.
    const sending = { ...waiting, status: { ...waiting.status, createPending: { cloudName: "team-trainer" } } };
    expect(capacityWaiterOf(sending, "team/trainer", 0)).toBeUndefined();
    expect(capacityWaiterOf({ ...waiting, status: { ...waiting.status, id: "vm-1" } }, "k", 0)).toBeUndefined();
    const fixed = { ...waiting, spec: { type: "a40.1x", location: "us-east1-a" }, status: waiting.status };
    expect(capacityWaiterOf(fixed, "k", 0)?.locations).toEqual(["us-east1-a"]);
  });
});
