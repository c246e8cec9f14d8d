import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { z } from "zod";
import { crdOf, generateCrds, SchemaConversionError, structuralSchemaOf, toStructural } from "../../src/api/crd.ts";
import { KINDS } from "../../src/api/kinds.ts";
import { generateCrdReference } from "../../src/api/reference-doc.ts";
import { crdViolations, qualityViolations, structuralViolations } from "../../src/api/structural.ts";
import { VM_TYPES } from "../../src/cloud/wire.ts";

const ROOT = join(import.meta.dirname, "../..");

type Crd = ReturnType<typeof crdOf>;
const crdByKind = new Map(KINDS.map((info) => [info.kind, crdOf(info)]));
function crd(kind: string): Crd {
  const found = crdByKind.get(kind);
  if (found === undefined) throw new Error(`no CRD for ${kind}`);
  return found;
}
function versionOf(kind: string) {
  const version = crd(kind).spec.versions[0];
  if (version === undefined) throw new Error(`no version for ${kind}`);
  return version;
}
function rulesOf(kind: string, part: "spec" | "status" = "spec"): { rule: string; message: string }[] {
  const node = versionOf(kind).schema.openAPIV3Schema.properties?.[part];
  return (node?.["x-kubernetes-validations"] as { rule: string; message: string }[] | undefined) ?? [];
}

describe("generated files", () => {
  it("crds/ matches the zod source (run `npm run generate` when this fails)", async () => {
    for (const file of generateCrds()) {
      const onDisk = await readFile(join(ROOT, "crds", file.fileName), "utf8").catch(() => "<missing>");
      expect(onDisk, `crds/${file.fileName} is stale`).toBe(file.yaml);
    }
  });

  it("docs/crd-reference.md matches the zod source", async () => {
    const onDisk = await readFile(join(ROOT, "docs/crd-reference.md"), "utf8").catch(() => "<missing>");
    expect(onDisk, "docs/crd-reference.md is stale").toBe(generateCrdReference());
  });

  it("is deterministic and names one file per kind", () => {
    const first = generateCrds();
    expect(generateCrds()).toEqual(first);
    expect(first.map((file) => file.fileName)).toEqual([
      "gpucloud.dev_gpuvms.yaml",
      "gpucloud.dev_gpudisks.yaml",
      "gpucloud.dev_gpunetworks.yaml",
      "gpucloud.dev_gpufirewallrules.yaml",
      "gpucloud.dev_gpuvmpools.yaml",
      "gpucloud.dev_gpubudgets.yaml",
      "gpucloud.dev_gpucloudclaims.yaml",
      "infrastructure.cluster.x-k8s.io_gpuclusters.yaml",
      "infrastructure.cluster.x-k8s.io_gpumachines.yaml",
      "infrastructure.cluster.x-k8s.io_gpumachinetemplates.yaml",
    ]);
    expect(first.map((file) => parse(file.yaml))).toEqual(KINDS.map((info) => crdOf(info)));
  });
});

describe("CRD rules", () => {
  it.each(KINDS.map((info) => [info.kind]))("%s is a valid structural CRD", (kind) => {
    const document = parse(generateCrds()[KINDS.findIndex((info) => info.kind === kind)]?.yaml ?? "");
    expect(crdViolations(document)).toEqual([]);
  });

  it.each(KINDS.map((info) => [info.kind]))("%s describes every field and bounds every list and string", (kind) => {
    expect(qualityViolations(versionOf(kind).schema.openAPIV3Schema)).toEqual([]);
  });

  it("names, short names, category, scope and status subresource", () => {
    const names = KINDS.map((info) => crd(info.kind).spec.names);
    expect(names.map((n) => [n.kind, n.plural, n.singular, n.shortNames, n.listKind])).toEqual([
      ["GpuVm", "gpuvms", "gpuvm", ["gvm"], "GpuVmList"],
      ["GpuDisk", "gpudisks", "gpudisk", ["gdisk"], "GpuDiskList"],
      ["GpuNetwork", "gpunetworks", "gpunetwork", ["gnet"], "GpuNetworkList"],
      ["GpuFirewallRule", "gpufirewallrules", "gpufirewallrule", ["gfw"], "GpuFirewallRuleList"],
      ["GpuVmPool", "gpuvmpools", "gpuvmpool", ["gpool"], "GpuVmPoolList"],
      ["GpuBudget", "gpubudgets", "gpubudget", ["gbudget"], "GpuBudgetList"],
      ["GpuCloudClaim", "gpucloudclaims", "gpucloudclaim", ["gclaim"], "GpuCloudClaimList"],
      ["GpuCluster", "gpuclusters", "gpucluster", ["gcluster"], "GpuClusterList"],
      ["GpuMachine", "gpumachines", "gpumachine", ["gmachine"], "GpuMachineList"],
      ["GpuMachineTemplate", "gpumachinetemplates", "gpumachinetemplate", ["gmt"], "GpuMachineTemplateList"],
    ]);
    const categoriesOf: Record<string, string[] | undefined> = {
      // The operator's own records are not what `kubectl get gpucloud` lists.
      GpuCloudClaim: undefined,
      // Cluster API's kinds are in its category too (`kubectl get cluster-api`); a template is no resource.
      GpuCluster: ["cluster-api", "gpucloud"],
      GpuMachine: ["cluster-api", "gpucloud"],
      GpuMachineTemplate: ["cluster-api"],
    };
    for (const info of KINDS) {
      const document = crd(info.kind);
      const group = info.kind.match(/^Gpu(Cluster|Machine)/) ? "infrastructure.cluster.x-k8s.io" : "gpucloud.dev";
      expect(document.spec.group).toBe(group);
      expect(document.metadata.name).toBe(`${info.plural}.${group}`);
      expect(document.spec.names.categories).toEqual(
        info.kind in categoriesOf ? categoriesOf[info.kind] : ["gpucloud"],
      );
      expect(document.spec.scope).toBe("Namespaced");
      expect(versionOf(info.kind)).toMatchObject({
        name: "v1alpha1",
        served: true,
        storage: true,
        subresources: { status: {} },
      });
    }
  });

  it("says every pattern in words: no OpenAPI pattern (printed raw by the API server), a CEL rule with a message", () => {
    const patterns: string[] = [];
    const matchesRules: string[] = [];
    for (const info of KINDS) {
      JSON.stringify(crdOf(info), (key, value: unknown) => {
        if (key === "pattern") patterns.push(String(value));
        if (key === "rule" && typeof value === "string" && value.startsWith("self.matches(")) matchesRules.push(value);
        return value;
      });
    }
    expect(patterns).toEqual([]);
    expect(matchesRules.length).toBeGreaterThan(20);
    // A zod regex without such a rule is refused by the generator.
    expect(() =>
      structuralSchemaOf(
        z.object({
          code: z
            .string()
            .max(8)
            .regex(/^[A-Z]+$/),
        }),
      ),
    ).toThrow(/pattern \^\[A-Z\]\+\$ has no rule that says what is expected; build the field with matching\(\)/);
  });

  it("checks a disk size's range, growth and a port range only on well-formed values (one error per mistake)", () => {
    const sizeRules = rulesOf("GpuDisk").filter((rule) => rule.rule.includes("self.size.substring"));
    expect(sizeRules.map((rule) => rule.message).sort()).toEqual([
      "a persistent-ssd disk is at most 10TiB",
      "a shared-volume disk is 1TiB to 1000TiB in whole TiB",
      "size can only grow",
    ]);
    for (const rule of sizeRules) expect(rule.rule).toMatch(/^!self\.size\.matches\(/);
  });

  it("refuses a CIDR with host bits set and names the network address (cidr library, format() for the cost)", () => {
    const cidr = versionOf("GpuNetwork").schema.openAPIV3Schema.properties?.spec?.properties?.cidr;
    expect(cidr?.["x-kubernetes-validations"]).toEqual([
      { rule: expect.stringMatching(/^self\.matches\(/), message: "must be an IPv4 CIDR such as 10.0.0.0/16" },
      expect.objectContaining({
        rule: expect.stringContaining("cidr(self) == cidr(self).masked()"),
        messageExpression: "'host bits are set: use %s'.format([string(cidr(self).masked())])",
      }),
    ]);
  });

  it("printer columns cover what kubectl get must show", () => {
    const columns = (kind: string) =>
      versionOf(kind).additionalPrinterColumns.map((column) => column.name.toUpperCase());
    expect(columns("GpuVm")).toEqual(
      expect.arrayContaining(["TYPE", "LOCATION", "STATE", "PUBLIC-IP", "READY", "REASON", "$/HOUR", "AGE"]),
    );
    expect(columns("GpuDisk")).toEqual(
      expect.arrayContaining(["SIZE", "TYPE", "LOCATION", "ATTACHED", "READY", "REASON", "AGE"]),
    );
    expect(columns("GpuNetwork")).toEqual(expect.arrayContaining(["CIDR", "READY", "REASON", "AGE"]));
    expect(columns("GpuFirewallRule")).toEqual(
      expect.arrayContaining(["DIRECTION", "ACTION", "PROTOCOLS", "STATE", "READY", "REASON", "AGE"]),
    );
    expect(columns("GpuVmPool")).toEqual(
      expect.arrayContaining(["DESIRED", "READY", "UP-TO-DATE", "LOCATIONS", "$/HOUR", "REASON", "AGE"]),
    );
    const ready = versionOf("GpuVm").additionalPrinterColumns.find((column) => column.name === "Ready");
    expect(ready?.jsonPath).toBe('.status.conditions[?(@.type=="Ready")].status');
  });

  it("reads like kubectl's own columns: display forms from status, Synced next to Ready", () => {
    const path = (kind: string, name: string) =>
      versionOf(kind).additionalPrinterColumns.find((column) => column.name === name)?.jsonPath;
    // A column shows the first value of its JSONPath, and a list as JSON: display forms live in status.
    expect(path("GpuVm", "State")).toBe(".status.printableState");
    expect(path("GpuFirewallRule", "Protocols")).toBe(".status.printableProtocols");
    expect(path("GpuDisk", "Attached")).toBe(".status.printableAttachedTo");
    for (const kind of ["GpuVm", "GpuDisk", "GpuNetwork", "GpuFirewallRule"]) {
      const names = versionOf(kind).additionalPrinterColumns.map((column) => column.name);
      expect(names.indexOf("Synced"), kind).toBe(names.indexOf("Ready") + 1);
      expect(path(kind, "Synced")).toBe('.status.conditions[?(@.type=="Synced")].status');
    }
    for (const info of KINDS) {
      for (const column of versionOf(info.kind).additionalPrinterColumns) {
        expect(column.jsonPath, `${info.kind} ${column.name}`).not.toMatch(/\[\*\]/);
      }
    }
  });

  it("carries the immutability and one-of CEL rules", () => {
    const messages = (kind: string) => rulesOf(kind).map((rule) => rule.message);
    // The managed kinds (the pool, the budget and the claims are not cloud resources).
    const managed = ["GpuVm", "GpuDisk", "GpuNetwork", "GpuFirewallRule"];
    for (const info of KINDS.filter((kind) => managed.includes(kind.kind))) {
      expect(messages(info.kind)).toEqual(
        expect.arrayContaining(["cloudName cannot change once set", "id cannot change once set"]),
      );
    }
    expect(messages("GpuVm")).toEqual(
      expect.arrayContaining([
        "set location or locations, not both",
        "set sshPublicKey or sshPublicKeySecretRef, not both",
        "location is immutable",
        "image is immutable: the cloud takes it only when it creates the VM; create a new GpuVm with the new value (or delete and re-create this one)",
        "sshPublicKeySecretRef is immutable: the cloud takes it only when it creates the VM; create a new GpuVm with the new value (or delete and re-create this one)",
      ]),
    );
    expect(messages("GpuDisk")).toEqual(
      expect.arrayContaining(["location is immutable", "type is immutable", "size can only grow"]),
    );
    expect(messages("GpuNetwork")).toEqual([
      "cloudName cannot change once set",
      "id cannot change once set",
      "cidr is immutable",
    ]);
    expect(messages("GpuFirewallRule")).toEqual(
      expect.arrayContaining([
        "direction is immutable",
        "action is immutable",
        "set exactly one of networkRef and networkId",
      ]),
    );
    const family = rulesOf("GpuVm").find((rule) => rule.message.startsWith("type can only change within its family"));
    expect(family?.rule).toBe(
      "self.type.substring(0, self.type.lastIndexOf('.')) == oldSelf.type.substring(0, oldSelf.type.lastIndexOf('.'))",
    );
  });

  it("the VM family rule agrees with the type list: families are the part before the last dot", () => {
    const families = new Set(VM_TYPES.map((type) => type.substring(0, type.lastIndexOf("."))));
    expect([...families]).toEqual(["a40", "a100", "a100-80gb", "l40s-48gb"]);
  });

  it("conditions are a map list keyed by type and the operation history is bounded", () => {
    const status = versionOf("GpuDisk").schema.openAPIV3Schema.properties?.status;
    expect(status?.properties?.conditions).toMatchObject({
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["type"],
    });
    expect(status?.properties?.operations?.maxItems).toBe(10);
    expect(status?.properties?.locationIndex?.type).toBe("integer");
    expect(versionOf("GpuVm").schema.openAPIV3Schema.properties?.status?.properties?.hourlyPriceUSD?.type).toBe(
      "number",
    );
  });

  it("keeps defaults and turns integer literals into integer enums", () => {
    const spec = versionOf("GpuDisk").schema.openAPIV3Schema.properties?.spec?.properties;
    expect(spec?.blockSize).toMatchObject({ type: "integer", enum: [512, 4096], default: 4096 });
    expect(spec?.type?.default).toBe("persistent-ssd");
    expect(spec?.deletionPolicy?.default).toBe("Delete");
    expect(versionOf("GpuNetwork").schema.openAPIV3Schema.properties?.spec?.properties?.cidr?.default).toBe(
      "10.0.0.0/16",
    );
  });
});

describe("structural conversion", () => {
  it("refuses schemas that need a typed union", () => {
    expect(() => structuralSchemaOf(z.object({ value: z.union([z.string(), z.number()]) }))).toThrow(
      SchemaConversionError,
    );
  });

  it("rewrites const, additionalProperties and zod's integer bounds", () => {
    const converted = toStructural({
      type: "object",
      additionalProperties: false,
      properties: {
        fixed: { const: "x" },
        count: { type: "integer", minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER },
      },
    });
    expect(converted).toEqual({
      properties: { fixed: { enum: ["x"], type: "string" }, count: { type: "integer" } },
      type: "object",
    });
  });

  it("the checker reports broken schemas (so a passing check means something)", () => {
    const problems = structuralViolations({
      type: "object",
      properties: {
        untyped: { description: "no type" },
        both: { type: "object", properties: { a: { type: "string" } }, additionalProperties: { type: "string" } },
        union: { anyOf: [{ type: "string" }, { type: "integer" }] },
        unique: { type: "array", items: { type: "string" }, uniqueItems: true },
        list: {
          type: "array",
          items: { type: "object", properties: { k: { type: "string" } } },
          "x-kubernetes-list-type": "map",
          "x-kubernetes-list-map-keys": ["k"],
        },
      },
      required: ["missing"],
    });
    expect(problems).toEqual(
      expect.arrayContaining([
        "<root>.untyped: every node needs a type",
        "<root>.both: additionalProperties and properties are mutually exclusive",
        "<root>.union: 'anyOf' is not emitted by this project (typed combinators are forbidden)",
        "<root>.unique: uniqueItems: true is forbidden (use list type set)",
        "<root>.list: map key 'k' must be required or defaulted",
        "<root>: required 'missing' is not a property",
      ]),
    );
    expect(qualityViolations({ type: "object", properties: { bare: { type: "string" } } })).toEqual([
      "<root>.bare: missing description",
      "<root>.bare: string without maxLength or enum",
    ]);
  });
});
