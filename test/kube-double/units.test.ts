// Pure pieces of the double: the CEL subset, selectors, the printer-column JSONPath subset and patches.
import { describe, expect, it } from "vitest";
import { evaluateRule, isSupportedRule } from "../../src/kube-double/cel.ts";
import { evaluateJsonPath } from "../../src/kube-double/jsonpath.ts";
import { applyJsonPatch, applyMergePatch } from "../../src/kube-double/patch.ts";
import {
  matchesFields,
  matchesLabels,
  parseFieldSelector,
  parseLabelSelector,
} from "../../src/kube-double/selectors.ts";
import { ApiError } from "../../src/kube-double/status.ts";
import { humanAge } from "../../src/kube-double/table.ts";

describe("CEL subset", () => {
  it.each([
    { rule: "self == oldSelf", self: "a", old: "a", want: true },
    { rule: "self == oldSelf", self: "a", old: "b", want: false },
    { rule: "has(self.x) != has(self.y)", self: { x: 1 }, old: undefined, want: true },
    { rule: "has(self.x) != has(self.y)", self: { x: 1, y: 2 }, old: undefined, want: false },
    { rule: "!has(oldSelf.id) || (has(self.id) && self.id == oldSelf.id)", self: {}, old: { id: "a" }, want: false },
    { rule: "!has(oldSelf.id) || (has(self.id) && self.id == oldSelf.id)", self: { id: "b" }, old: {}, want: true },
    { rule: "[has(self.a), has(self.b)].filter(x, x).size() == 1", self: { a: 1 }, old: undefined, want: true },
    { rule: "[has(self.a), has(self.b)].filter(x, x).size() == 1", self: {}, old: undefined, want: false },
    {
      rule: "self.all(p, !p.contains('-') || int(p.substring(0, p.indexOf('-'))) <= int(p.substring(p.indexOf('-') + 1)))",
      self: ["22", "80-90"],
      old: undefined,
      want: true,
    },
    {
      rule: "self.all(p, !p.contains('-') || int(p.substring(0, p.indexOf('-'))) <= int(p.substring(p.indexOf('-') + 1)))",
      self: ["90-80"],
      old: undefined,
      want: false,
    },
    {
      rule: "(int(self.size.substring(0, self.size.size() - 3)) * (self.size.endsWith('TiB') ? 1024 : 1)) <= 10240",
      self: { size: "10TiB" },
      old: undefined,
      want: true,
    },
    {
      rule: "(int(self.size.substring(0, self.size.size() - 3)) * (self.size.endsWith('TiB') ? 1024 : 1)) <= 10240",
      self: { size: "11TiB" },
      old: undefined,
      want: false,
    },
    {
      rule: "self.x > 2 && self.name.startsWith('gpu') && 'b' in self.tags",
      self: { x: 3, name: "gpu-1", tags: ["a", "b"] },
      old: undefined,
      want: true,
    },
    { rule: "self.missing == 1", self: {}, old: undefined, want: false },
    { rule: "self.missing == 1 || self.x == 2", self: { x: 2 }, old: undefined, want: true },
    { rule: "self.missing == 1 && self.x == 3", self: { x: 2 }, old: undefined, want: false },
  ])("$rule on $self → $want", ({ rule, self, old, want }) => {
    expect(evaluateRule(rule, self, old)).toBe(want);
  });

  it("reports expressions outside the subset as unsupported instead of failing them", () => {
    expect(evaluateRule("self.quantity().isGreaterThan(1)", { a: 1 })).toBe("unsupported");
    expect(evaluateRule("self.x @ 1", { x: 1 })).toBe("unsupported");
    expect(isSupportedRule("has(self.a) != has(self.b)")).toBe(true);
    expect(isSupportedRule("url(self.u).getHost() == 'x'")).toBe(false);
  });
});

describe("selectors", () => {
  const labels = { app: "web", tier: "front" };
  it.each([
    ["app=web", true],
    ["app==web,tier=front", true],
    ["app!=web", false],
    ["app in (web, api)", true],
    ["app notin (web)", false],
    ["tier", true],
    ["!tier", false],
    ["missing notin (x)", true],
    ["", true],
  ])("%s → %s", (selector, want) => {
    expect(matchesLabels(parseLabelSelector(selector), labels)).toBe(want);
  });

  it("refuses malformed selectors with a 400", () => {
    expect(() => parseLabelSelector("app in (a")).toThrow(ApiError);
    expect(() => parseLabelSelector("bad key=1")).toThrow(/invalid label key|unable to parse/);
    expect(() => parseFieldSelector("metadata.name")).toThrow(ApiError);
  });

  it("matches field selectors on metadata", () => {
    const object = { metadata: { name: "a", namespace: "n" } };
    expect(matchesFields(parseFieldSelector("metadata.name=a,metadata.namespace==n"), object)).toBe(true);
    expect(matchesFields(parseFieldSelector("metadata.name!=a"), object)).toBe(false);
  });
});

describe("printer-column JSONPath", () => {
  const object = {
    spec: { disks: [{ size: "1TiB" }] },
    status: {
      conditions: [
        { type: "Synced", status: "False" },
        { type: "Ready", status: "True" },
      ],
    },
  };
  it("selects fields, indexes and filtered list items", () => {
    expect(evaluateJsonPath(object, ".spec.disks[0].size")).toEqual(["1TiB"]);
    expect(evaluateJsonPath(object, '.status.conditions[?(@.type=="Ready")].status')).toEqual(["True"]);
    expect(evaluateJsonPath(object, ".status.missing")).toEqual([]);
    expect(
      evaluateJsonPath({ status: { attachedTo: [{ vmId: "a" }, { vmId: "b" }] } }, ".status.attachedTo[*].vmId"),
    ).toEqual(["a", "b"]);
    expect(evaluateJsonPath({ status: { attachedTo: [] } }, ".status.attachedTo[*].vmId")).toEqual([]);
  });

  it("formats ages like kubectl", () => {
    const now = Date.parse("2026-11-21T12:00:00Z");
    expect(humanAge("2026-11-21T11:59:30Z", now)).toBe("30s");
    expect(humanAge("2026-11-21T11:55:00Z", now)).toBe("5m");
    expect(humanAge("2026-11-21T10:00:00Z", now)).toBe("120m");
    expect(humanAge("2026-11-20T12:00:00Z", now)).toBe("24h");
    expect(humanAge("2026-11-01T12:00:00Z", now)).toBe("20d");
  });
});

describe("patches", () => {
  it("merge-patches maps and deletes on null", () => {
    expect(applyMergePatch({ a: 1, b: { c: 2, d: 3 } }, { b: { c: null, e: 4 }, f: [1] })).toEqual({
      a: 1,
      b: { d: 3, e: 4 },
      f: [1],
    });
  });

  it("applies JSON patch operations and fails a test op with 422", () => {
    const document = { spec: { list: [1, 2] } };
    expect(
      applyJsonPatch(document, [
        { op: "add", path: "/spec/list/-", value: 3 },
        { op: "move", from: "/spec/list", path: "/moved" },
      ]),
    ).toEqual({ spec: {}, moved: [1, 2, 3] });
    expect(document.spec.list).toEqual([1, 2]);
    expect(() => applyJsonPatch(document, [{ op: "test", path: "/spec/list/0", value: 9 }])).toThrow(
      expect.objectContaining({ code: 422 }),
    );
    expect(() => applyJsonPatch(document, [{ op: "remove", path: "/nope" }])).toThrow(ApiError);
    expect(() => applyJsonPatch(document, { op: "add" })).toThrow(expect.objectContaining({ code: 400 }));
  });
});
