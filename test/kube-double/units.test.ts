// Pure pieces of the double: the CEL subset, selectors, the printer-column JSONPath subset and patches.
import { describe, expect, it } from "vitest";
import { evaluateExpression, evaluateRule, isSupportedRule } from "../../src/kube-double/cel.ts";
import { evaluateJsonPath } from "../../src/kube-double/jsonpath.ts";
import { applyJsonPatch, applyMergePatch } from "../../src/kube-double/patch.ts";
import { admitCustomResource } from "../../src/kube-double/schema.ts";
import {
  matchesFields,
  matchesLabels,
  parseFieldSelector,
  parseLabelSelector,
} from "../../src/kube-double/selectors.ts";
import { ApiError } from "../../src/kube-double/status.ts";
import { humanAge, tableRow } from "../../src/kube-double/table.ts";
import type { ResourceType } from "../../src/kube-double/types.ts";

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
    { rule: "self.missing == 1", self: {}, old: undefined, want: { error: "no such key: missing" } },
    {
      rule: "int(self.size) > 1",
      self: { size: "1TB" },
      old: undefined,
      want: { error: "type conversion error from 'string' to 'int'" },
    },
    { rule: "self.missing == 1 || self.x == 2", self: { x: 2 }, old: undefined, want: true },
    { rule: "self.missing == 1 && self.x == 3", self: { x: 2 }, old: undefined, want: false },
  ])("$rule on $self → $want", ({ rule, self, old, want }) => {
    expect(evaluateRule(rule, self, old)).toEqual(want);
  });

  it.each([
    ["isCIDR('10.0.0.0/16')", true],
    ["isCIDR('10.0.0.0/33')", false],
    ["isCIDR('010.0.0.0/8')", false],
    ["isCIDR('::ffff:1.2.3.4/120')", false],
    ["isCIDR('fd00::/8')", true],
    ["cidr('10.0.0.1/8') == cidr('10.0.0.1/8').masked()", false],
    ["cidr('10.0.0.0/8') == cidr('10.0.0.0/8').masked()", true],
    ["string(cidr('192.168.7.77/20').masked())", "192.168.0.0/20"],
    ["string(cidr('2001:db8:0:0:1::1/64').masked())", "2001:db8::/64"],
    ["cidr('10.0.0.0/8').prefixLength()", 8],
    ["cidr('10.0.0.0/8').containsIP('10.1.2.3')", true],
    ["cidr('10.0.0.0/8').containsCIDR('11.0.0.0/16')", false],
    ["cidr('10.0.0.0/8').ip().family()", 4],
    ["ip('::1').isLoopback()", true],
    ["isIP('1.2.3')", false],
    ["'host bits are set: use %s'.format([string(cidr('10.0.0.1/8').masked())])", "host bits are set: use 10.0.0.0/8"],
    ["'%d of %s'.format([3, 'x'])", "3 of x"],
  ])("the IP/CIDR libraries and format(): %s → %s", (expression, want) => {
    expect(evaluateExpression(expression, {})).toEqual({ value: want });
  });

  it("reports a CIDR that does not parse as an evaluation error, like the cidr library", () => {
    expect(evaluateRule("cidr(self) == cidr(self).masked()", "10.0.0.0/33")).toEqual({
      error: expect.stringContaining("network address parse error"),
    });
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

  it("reads a key with escaped dots in brackets, as Cluster API's columns write a label", () => {
    const labelled = { metadata: { labels: { "cluster.x-k8s.io/cluster-name": "gpu" } } };
    expect(evaluateJsonPath(labelled, ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']")).toEqual(["gpu"]);
    expect(
      evaluateJsonPath({ status: { capacity: { "nvidia.com/gpu": "8" } } }, ".status.capacity['nvidia\\.com/gpu']"),
    ).toEqual(["8"]);
  });

  it("formats ages like kubectl", () => {
    const now = Date.parse("2026-11-21T12:00:00Z");
    expect(humanAge("2026-11-21T11:59:30Z", now)).toBe("30s");
    expect(humanAge("2026-11-21T11:55:00Z", now)).toBe("5m");
    expect(humanAge("2026-11-21T10:00:00Z", now)).toBe("120m");
    expect(humanAge("2026-11-20T12:00:00Z", now)).toBe("24h");
    expect(humanAge("2026-11-01T12:00:00Z", now)).toBe("20d");
    // Past two years: years and days, as HumanDuration does (kube-apiserver printed 6y327d for this one).
    expect(humanAge("2020-01-01T00:00:00Z", Date.parse("2026-11-22T19:50:00Z"))).toBe("6y327d");
    expect(humanAge("2016-01-01T00:00:00Z", now)).toBe("10y");
  });

  it("fills cells as kube-apiserver's table convertor does (compared on v1.37)", () => {
    const type = {
      printerColumns: [
        { name: "Arr", type: "string", jsonPath: ".spec.arr" },
        { name: "ArrStar", type: "string", jsonPath: ".spec.arr[*]" },
        { name: "Num", type: "string", jsonPath: ".spec.num" },
        { name: "Float", type: "string", jsonPath: ".spec.flt" },
        { name: "Bool", type: "string", jsonPath: ".spec.flag" },
        { name: "Obj", type: "string", jsonPath: ".spec.obj" },
        { name: "Empty", type: "string", jsonPath: ".spec.empty" },
        { name: "IntCol", type: "integer", jsonPath: ".spec.num" },
        { name: "IntStr", type: "integer", jsonPath: ".spec.str" },
        { name: "NumCol", type: "number", jsonPath: ".spec.flt" },
        { name: "BoolCol", type: "boolean", jsonPath: ".spec.flag" },
        { name: "ObjName", type: "string", jsonPath: ".spec.objs[*].name" },
        { name: "Date", type: "date", jsonPath: ".spec.when" },
      ],
    } as unknown as ResourceType;
    const object = {
      metadata: { name: "c1" },
      spec: {
        arr: ["tcp", "udp"],
        num: 3,
        flt: 1.5,
        flag: true,
        obj: { z: 1, a: "b" },
        empty: [],
        str: "7",
        objs: [{ name: "x" }, { name: "y" }],
        when: "not a time",
      },
    };
    // A list prints as JSON and `[*]` shows its first item only: display forms belong in status fields.
    expect(tableRow(type, object, "None").cells).toEqual([
      "c1",
      '["tcp","udp"]',
      "tcp",
      "3",
      "1.5",
      "true",
      '{"a":"b","z":1}',
      "[]",
      3,
      null,
      1.5,
      true,
      "x",
      "<invalid>",
    ]);
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

describe("custom resource validation wording (kube-apiserver's, compared on v1.37)", () => {
  const type = {
    group: "example.dev",
    version: "v1",
    kind: "Gadget",
    schema: {
      type: "object",
      properties: {
        spec: {
          type: "object",
          properties: {
            size: {
              type: "string",
              maxLength: 8,
              "x-kubernetes-validations": [{ rule: "self.size() > 1", message: "too short" }],
            },
            color: { type: "string", enum: ["red", "blue"] },
            code: { type: "string", maxLength: 8 },
          },
          "x-kubernetes-validations": [
            { rule: "int(self.code) > 0", message: "code is a positive number" },
            {
              rule: "!has(self.color) || self.color != 'blue'",
              message: "not blue",
              messageExpression: "'not ' + self.color",
            },
          ],
        },
      },
    },
  } as unknown as ResourceType;
  const causesOf = (spec: Record<string, unknown>): string[] => {
    try {
      admitCustomResource(
        type,
        { apiVersion: "example.dev/v1", kind: "Gadget", metadata: { name: "g" }, spec },
        {
          strict: false,
          old: undefined,
        },
      );
    } catch (error) {
      if (error instanceof ApiError) return (error.details?.causes ?? []).map((c) => `${c.field}: ${c.message}`);
      throw error;
    }
    return [];
  };

  it("shows the value of a scalar, omits it for an object, and evaluates messageExpression", () => {
    expect(causesOf({ size: "x", code: "1", color: "blue" }).sort()).toEqual([
      'spec.size: Invalid value: "x": too short',
      "spec: Invalid value: not blue",
    ]);
  });

  it("words an evaluation error as the API server does (the schema type as the value)", () => {
    expect(causesOf({ size: "xx", code: "A1" })).toEqual([
      "spec: Invalid value: \"object\": type conversion error from 'string' to 'int' evaluating rule: code is a positive number",
    ]);
  });

  it("runs no CEL rule when a type, enum, bound or required field is wrong, and says so", () => {
    expect(causesOf({ size: "x", code: "toolongvalue", color: "green" }).sort()).toEqual([
      "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
      "spec.code: Too long: may not be more than 8 bytes",
      'spec.color: Unsupported value: "green": supported values: "red", "blue"',
    ]);
  });
});
