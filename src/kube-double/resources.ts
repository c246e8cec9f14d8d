// The resources the double serves: a fixed set of built-in kinds plus one entry per served version of
// every registered CustomResourceDefinition.
import { EVENT_COLUMNS } from "./events.ts";
import { scalePathsOf } from "./scale-paths.ts";
import { checkSchemaCompiles } from "./schema.ts";
import type { StatusCause } from "./status.ts";
import { isRecord, type JsonSchema, type KubeObject, type PrinterColumn, type ResourceType } from "./types.ts";

function builtin(
  fields: Omit<ResourceType, "listKind" | "custom" | "schema" | "shortNames" | "categories" | "statusSubresource"> &
    Partial<ResourceType>,
): ResourceType {
  return {
    listKind: `${fields.kind}List`,
    custom: false,
    schema: undefined,
    shortNames: [],
    categories: [],
    statusSubresource: false,
    ...fields,
  };
}

/** The DATA column of Secrets and ConfigMaps: how many keys `data` (and `binaryData`) hold. */
function countData(object: KubeObject): number {
  const keys = (value: unknown): number => (isRecord(value) ? Object.keys(value).length : 0);
  return keys(object.data) + keys(object.binaryData);
}

export const BUILTIN_TYPES: readonly ResourceType[] = [
  builtin({
    group: "",
    version: "v1",
    kind: "Namespace",
    plural: "namespaces",
    singular: "namespace",
    shortNames: ["ns"],
    namespaced: false,
    statusSubresource: true,
    fieldShape: { atomic: [], alwaysPresent: [["spec"], ["status"]] },
    printerColumns: [{ name: "Status", type: "string", jsonPath: ".status.phase" }],
  }),
  builtin({
    group: "",
    version: "v1",
    kind: "Secret",
    plural: "secrets",
    singular: "secret",
    namespaced: true,
    printerColumns: [
      { name: "Type", type: "string", jsonPath: ".type" },
      { name: "Data", type: "integer", jsonPath: ".data", compute: countData },
    ],
  }),
  builtin({
    group: "",
    version: "v1",
    kind: "ConfigMap",
    plural: "configmaps",
    singular: "configmap",
    shortNames: ["cm"],
    namespaced: true,
    printerColumns: [{ name: "Data", type: "integer", jsonPath: ".data", compute: countData }],
  }),
  builtin({
    group: "",
    version: "v1",
    kind: "Event",
    plural: "events",
    singular: "event",
    shortNames: ["ev"],
    namespaced: true,
    printerColumns: EVENT_COLUMNS,
    completeColumns: true,
    fieldShape: { atomic: [["involvedObject"], ["related"]], alwaysPresent: [["source"]] },
  }),
  builtin({
    group: "events.k8s.io",
    version: "v1",
    kind: "Event",
    plural: "events",
    singular: "event",
    shortNames: ["ev"],
    namespaced: true,
    printerColumns: EVENT_COLUMNS,
    completeColumns: true,
    fieldShape: { atomic: [["regarding"], ["related"]], alwaysPresent: [["deprecatedSource"]] },
  }),
  builtin({
    group: "coordination.k8s.io",
    version: "v1",
    kind: "Lease",
    plural: "leases",
    singular: "lease",
    namespaced: true,
    fieldShape: { atomic: [], alwaysPresent: [["spec"]] },
    printerColumns: [{ name: "Holder", type: "string", jsonPath: ".spec.holderIdentity" }],
  }),
  builtin({
    group: "apiextensions.k8s.io",
    version: "v1",
    kind: "CustomResourceDefinition",
    plural: "customresourcedefinitions",
    singular: "customresourcedefinition",
    shortNames: ["crd", "crds"],
    namespaced: false,
    statusSubresource: true,
    printerColumns: [{ name: "Created At", type: "date", jsonPath: ".metadata.creationTimestamp" }],
  }),
];

export const CRD_TYPE = BUILTIN_TYPES.find((type) => type.plural === "customresourcedefinitions") as ResourceType;
export const NAMESPACE_TYPE = BUILTIN_TYPES.find((type) => type.plural === "namespaces") as ResourceType;

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : [];
}

function text(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

function printerColumnsOf(value: unknown): PrinterColumn[] {
  if (!Array.isArray(value)) return [];
  return value.filter(isRecord).flatMap((column) => {
    const name = text(column.name);
    const jsonPath = text(column.jsonPath);
    if (name === undefined || jsonPath === undefined) return [];
    return [
      {
        name,
        jsonPath,
        type: text(column.type) ?? "string",
        ...(text(column.description) === undefined ? {} : { description: text(column.description) as string }),
        ...(typeof column.priority === "number" ? { priority: column.priority } : {}),
        ...(text(column.format) === undefined ? {} : { format: text(column.format) as string }),
      },
    ];
  });
}

/**
 * Read the served versions of a CRD. Returns the resource types, or the causes that make the CRD
 * invalid (field paths as Kubernetes names them).
 */
export function typesFromCrd(crd: KubeObject): { types: ResourceType[]; causes: StatusCause[] } {
  const causes: StatusCause[] = [];
  const required = (field: string): StatusCause => ({ reason: "FieldValueRequired", message: "Required value", field });
  const spec = isRecord(crd.spec) ? crd.spec : {};
  const names = isRecord(spec.names) ? spec.names : {};
  const group = text(spec.group);
  const plural = text(names.plural);
  const kind = text(names.kind);
  if (group === undefined) causes.push(required("spec.group"));
  if (plural === undefined) causes.push(required("spec.names.plural"));
  if (kind === undefined) causes.push(required("spec.names.kind"));
  if (spec.scope !== "Namespaced" && spec.scope !== "Cluster") {
    causes.push({
      reason: "FieldValueNotSupported",
      message: 'Unsupported value: supported values: "Cluster", "Namespaced"',
      field: "spec.scope",
    });
  }
  if (group !== undefined && plural !== undefined && crd.metadata.name !== `${plural}.${group}`) {
    causes.push({
      reason: "FieldValueInvalid",
      message: `Invalid value: must be spec.names.plural+"."+spec.group`,
      field: "metadata.name",
    });
  }
  const versions = Array.isArray(spec.versions) ? spec.versions.filter(isRecord) : [];
  if (versions.length === 0) causes.push(required("spec.versions"));
  const types: ResourceType[] = [];
  versions.forEach((version, index) => {
    const versionName = text(version.name);
    if (versionName === undefined) {
      causes.push(required(`spec.versions[${index}].name`));
      return;
    }
    const schemaHolder = isRecord(version.schema) ? version.schema : {};
    const schema = isRecord(schemaHolder.openAPIV3Schema) ? (schemaHolder.openAPIV3Schema as JsonSchema) : undefined;
    if (schema === undefined) {
      causes.push(required(`spec.versions[${index}].schema.openAPIV3Schema`));
      return;
    }
    const compileError = checkSchemaCompiles(schema);
    if (compileError !== undefined) {
      causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: ${compileError}`,
        field: `spec.versions[${index}].schema.openAPIV3Schema`,
      });
      return;
    }
    if (version.served === false || group === undefined || plural === undefined || kind === undefined) return;
    const subresources = isRecord(version.subresources) ? version.subresources : {};
    const scaleProblems: string[] = [];
    const scale = scalePathsOf(subresources, scaleProblems);
    for (const problem of scaleProblems) {
      causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: ${problem}`,
        field: `spec.versions[${index}]`,
      });
    }
    types.push({
      group,
      version: versionName,
      kind,
      listKind: text(names.listKind) ?? `${kind}List`,
      plural,
      singular: text(names.singular) ?? kind.toLowerCase(),
      shortNames: strings(names.shortNames),
      categories: strings(names.categories),
      namespaced: spec.scope === "Namespaced",
      statusSubresource: isRecord(subresources.status),
      ...(scale !== undefined ? { scale } : {}),
      schema,
      printerColumns: printerColumnsOf(version.additionalPrinterColumns),
      custom: true,
    });
  });
  return { types, causes };
}

/** Every `x-kubernetes-validations` rule and messageExpression in a schema, for load-time reporting of unsupported ones. */
export function rulesOf(schema: unknown): string[] {
  if (Array.isArray(schema)) return schema.flatMap(rulesOf);
  if (!isRecord(schema)) return [];
  const own = Array.isArray(schema["x-kubernetes-validations"])
    ? schema["x-kubernetes-validations"].flatMap((rule) =>
        isRecord(rule)
          ? [rule.rule, rule.messageExpression].filter((expression) => typeof expression === "string")
          : [],
      )
    : [];
  return [
    ...own,
    ...Object.entries(schema).flatMap(([key, value]) => (key === "x-kubernetes-validations" ? [] : rulesOf(value))),
  ];
}

/** Resource types by group/version/plural, with CRD-provided ones added and removed at run time. */
export class ResourceRegistry {
  #types = new Map<string, ResourceType>();
  #crdTypes = new Map<string, ResourceType[]>();

  constructor() {
    for (const type of BUILTIN_TYPES) this.#types.set(this.#key(type.group, type.version, type.plural), type);
  }

  #key(group: string, version: string, plural: string): string {
    return `${group}/${version}/${plural}`;
  }

  find(group: string, version: string, plural: string): ResourceType | undefined {
    return this.#types.get(this.#key(group, version, plural));
  }

  all(): ResourceType[] {
    return [...this.#types.values()];
  }

  /** Group names in a stable order, each with its versions (preferred first). */
  groups(): { name: string; versions: string[] }[] {
    const groups = new Map<string, string[]>();
    for (const type of this.#types.values()) {
      if (type.group === "") continue;
      const versions = groups.get(type.group) ?? [];
      if (!versions.includes(type.version)) versions.push(type.version);
      groups.set(type.group, versions);
    }
    return [...groups.entries()].map(([name, versions]) => ({ name, versions }));
  }

  setCrd(crdName: string, types: ResourceType[]): void {
    this.removeCrd(crdName);
    for (const type of types) this.#types.set(this.#key(type.group, type.version, type.plural), type);
    this.#crdTypes.set(crdName, types);
  }

  removeCrd(crdName: string): void {
    for (const type of this.#crdTypes.get(crdName) ?? [])
      this.#types.delete(this.#key(type.group, type.version, type.plural));
    this.#crdTypes.delete(crdName);
  }
}
