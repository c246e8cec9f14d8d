import { describe, expect, it } from "vitest";
import { createMergePatch, jsonEqual } from "../../src/runtime/status.ts";

describe("status comparison and merge patches", () => {
  it("compares JSON deeply, ignoring key order only", () => {
    expect(jsonEqual({ a: 1, b: { c: [1, { d: 2 }] } }, { b: { c: [1, { d: 2 }] }, a: 1 })).toBe(true);
    expect(jsonEqual({ list: [1, 2] }, { list: [2, 1] })).toBe(false);
    expect(jsonEqual({ a: 1 }, { a: 1, b: null })).toBe(false);
    expect(jsonEqual({ a: "1" }, { a: 1 })).toBe(false);
    // Undefined fields do not exist on the wire.
    expect(jsonEqual({ a: 1, message: undefined }, { a: 1 })).toBe(true);
  });

  it("builds the smallest RFC 7386 patch, with null for removed keys and whole arrays", () => {
    const from = { phase: "Creating", conditions: [{ type: "Ready", status: "False" }], nested: { keep: 1, drop: 2 } };
    const to = { conditions: [{ type: "Ready", status: "True" }], nested: { keep: 1 }, externalName: "vm-1" };
    expect(createMergePatch(from, to)).toEqual({
      phase: null,
      conditions: [{ type: "Ready", status: "True" }],
      nested: { drop: null },
      externalName: "vm-1",
    });
    expect(createMergePatch({ b: 1, a: [1] }, { a: [1], b: 1 })).toBeUndefined();
  });

  it("reads undefined fields as absent and compares what JSON would carry (Dates, non-finite numbers)", () => {
    expect(createMergePatch({ a: 1, b: 2 }, { a: 1, b: undefined })).toEqual({ b: null });
    expect(createMergePatch({ a: 1, b: undefined }, { a: 1 })).toBeUndefined();
    expect(createMergePatch({ a: 1 }, { a: 1, b: undefined })).toBeUndefined();
    const at = "2026-01-01T00:00:00.000Z";
    expect(createMergePatch({ at }, { at: new Date(at) })).toBeUndefined();
    expect(createMergePatch({ n: null }, { n: Number.NaN })).toBeUndefined();
    const patch = createMergePatch(
      { nested: { keep: 1, gone: 2 }, list: [1] },
      { nested: { keep: 1, added: { deep: "x", skipped: undefined } }, list: [1, 2] },
    );
    // On the wire: no undefined anywhere, removed keys null.
    expect(JSON.parse(JSON.stringify(patch))).toEqual({ nested: { gone: null, added: { deep: "x" } }, list: [1, 2] });
    expect(jsonEqual({ at: new Date(at) }, { at })).toBe(true);
  });
});
