import { ApiException } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { createMergePatch, jsonEqual, statusOf, toKubeApiError } from "../../src/runtime/status.ts";

describe("the HTTP status of a failure", () => {
  it("is kept through our own wrapping: a 404 behind a KubeClient method is a 404 (Cluster API not served)", () => {
    const body = JSON.stringify({ kind: "Status", reason: "NotFound", message: "the server could not find it" });
    const raw = new ApiException(404, "HTTP-Code: 404", body, {});
    expect(statusOf(raw)).toBe(404);
    const wrapped = toKubeApiError(raw, "list clusters.cluster.x-k8s.io in default");
    expect(wrapped.message).toBe("list clusters.cluster.x-k8s.io in default: 404 the server could not find it");
    expect(statusOf(wrapped)).toBe(404);
    expect(statusOf(new Error("connection refused"))).toBeUndefined();
  });
});

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
