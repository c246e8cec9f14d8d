import { describe, expect, it } from "vitest";
import { cloneJson, sameJson } from "../../src/util/json-values.ts";

const status = () => ({
  id: "vm-1",
  hourlyPriceUSD: 1.1,
  attachedDisks: [{ id: "d-1", mode: "read-write" }],
  conditions: [{ type: "Ready", status: "True", observedGeneration: 2 }],
  createOnlyDigests: { image: "0123", sshPublicKey: "4567" },
  paused: false,
  nothing: null,
});

describe("cloneJson", () => {
  it("copies every object and array, so that changing the copy leaves the original as it was", () => {
    const original = status();
    const copy = cloneJson(original);
    expect(copy).toEqual(original);
    copy.attachedDisks[0] = { id: "d-2", mode: "read-only" };
    for (const condition of copy.conditions) condition.status = "False";
    copy.createOnlyDigests.image = "89ab";
    expect(original).toEqual(status());
  });

  it("keeps what is not plain data as it is", () => {
    const when = new Date(0);
    expect(cloneJson({ when }).when).toBe(when);
  });
});

describe("sameJson", () => {
  it("compares as JSON would serialize: key order and undefined values do not count", () => {
    expect(sameJson(status(), cloneJson(status()))).toBe(true);
    const { id, ...rest } = status();
    expect(sameJson({ ...rest, id }, status())).toBe(true);
    expect(sameJson({ ...status(), lastError: undefined }, status())).toBe(true);
    expect(sameJson(status(), { ...status(), lastError: undefined })).toBe(true);
  });

  it("sees every difference: a value, a type, a missing key, an array's length or order", () => {
    const differences: Record<string, unknown>[] = [
      { ...status(), id: "vm-2" },
      { ...status(), hourlyPriceUSD: "1.1" },
      { ...status(), paused: undefined },
      { ...status(), nothing: {} },
      { ...status(), lastError: "x" },
      { ...status(), attachedDisks: [] },
      { ...status(), attachedDisks: [{ id: "d-1" }] },
      { ...status(), conditions: [{ type: "Ready", status: "True", observedGeneration: 3 }] },
      { ...status(), createOnlyDigests: ["0123", "4567"] },
    ];
    for (const changed of differences) {
      expect(sameJson(changed, status()), JSON.stringify(changed)).toBe(false);
      expect(sameJson(status(), changed), JSON.stringify(changed)).toBe(false);
    }
    expect(sameJson([1, 2], [2, 1])).toBe(false);
    expect(sameJson(null, {})).toBe(false);
  });
});
