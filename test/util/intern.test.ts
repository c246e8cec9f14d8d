import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { StringInterner } from "../../src/util/intern.ts";

/** A full collection, for the heap figures below (V8 exposes gc() to a context created after the flag). */
function collectGarbage(): void {
  setFlagsFromString("--expose-gc");
  (runInNewContext("gc") as () => void)();
}

function parsedVms(count: number): unknown[] {
  return Array.from({ length: count }, (_, index) =>
    JSON.parse(
      JSON.stringify({
        id: `vm-${index}`,
        project_id: "6a3c5d2e-0000-4000-8000-000000000001",
        location: "us-east1-a",
        state: "STATE_RUNNING",
        disks: [{ type: "persistent-ssd", mode: "read-write", location: "us-east1-a" }],
        labels: ["gpucloud.dev/finalizer", "the cloud resource matches the spec"],
      }),
    ),
  );
}

describe("StringInterner", () => {
  it("gives back the copy it saw before and keeps values unchanged", () => {
    const interner = new StringInterner();
    expect(interner.intern("us-east1-a")).toBe("us-east1-a");
    expect(interner.hits).toBe(0);
    expect(interner.intern(["us-east1", "a"].join("-"))).toBe("us-east1-a");
    expect(interner.hits).toBe(1);
    const value = { a: "x", nested: { list: ["x", 1, null, { b: "x" }] }, n: 2, t: true };
    expect(interner.internDeep(value)).toEqual({ a: "x", nested: { list: ["x", 1, null, { b: "x" }] }, n: 2, t: true });
    expect(interner.hits).toBe(3); // the first "x" is new, the other two are found
  });

  it("leaves long strings and frozen values alone", () => {
    const interner = new StringInterner({ maxLength: 4 });
    interner.intern("long string");
    interner.intern("long string");
    expect(interner.hits).toBe(0);
    const frozen = Object.freeze({ a: "x" });
    expect(() => interner.internDeep(frozen)).not.toThrow();
    expect(interner.size).toBe(0);
  });

  it("stays bounded at two generations, and keeps what is seen again across them", () => {
    const interner = new StringInterner({ maxEntries: 100 });
    for (let index = 0; index < 10_000; index++) {
      interner.intern(`unique-${index}`);
      if (index % 50 === 0) interner.intern("common");
    }
    expect(interner.size).toBeLessThanOrEqual(200);
    const hits = interner.hits;
    interner.intern("common");
    expect(interner.hits).toBe(hits + 1);
    interner.intern("unique-5");
    expect(interner.hits).toBe(hits + 1);
  });

  it("makes 10,000 parsed objects hold one copy of their common strings (live heap)", () => {
    const liveHeapOf = (intern: boolean): number => {
      collectGarbage();
      const before = process.memoryUsage().heapUsed;
      const interner = new StringInterner();
      const vms = parsedVms(10_000);
      if (intern) for (const vm of vms) interner.internDeep(vm);
      collectGarbage();
      const held = process.memoryUsage().heapUsed - before;
      expect(vms).toHaveLength(10_000); // alive until measured
      return held;
    };
    const plain = liveHeapOf(false);
    const interned = liveHeapOf(true);
    // Eight repeated strings of 10-36 characters per object: about 300 bytes each, 3 MB for 10,000.
    expect(plain - interned).toBeGreaterThan(1_500_000);
  });
});
