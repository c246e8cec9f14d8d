// CustomResourceDefinitions generated from the zod schemas of src/api: zod → OpenAPI 3.0 (input side, so
// defaults are kept and nothing becomes required because of a default) → structural schema (KEP-2335) → YAML.
// Output is deterministic: the same source always gives byte-identical files (see test/api/crd.test.ts).
import { stringify } from "yaml";
import { z } from "zod";
import { isRecord } from "../util/is-record.ts";
import { celString } from "./fields.ts";
import type { KindInfo, ScaleSubresource } from "./kind-info.ts";
import { KINDS } from "./kinds.ts";

/** A JSON/OpenAPI schema node as the CRD carries it. */
export interface SchemaNode {
  type?: string;
  description?: string;
  properties?: Record<string, SchemaNode>;
  items?: SchemaNode;
  additionalProperties?: SchemaNode | boolean;
  required?: string[];
  enum?: unknown[];
  default?: unknown;
  [keyword: string]: unknown;
}

export class SchemaConversionError extends Error {
  override name = "SchemaConversionError";
}

/** Keywords zod may emit that a structural schema cannot carry. */
const FORBIDDEN_KEYWORDS = ["anyOf", "oneOf", "allOf", "not", "$ref", "$defs", "definitions", "propertyNames"];
/** Keywords dropped without loss: annotations that the API server rejects or ignores. */
const DROPPED_KEYWORDS = ["$schema", "$id", "id", "title", "examples"];

/** Rewrite one node's own keywords (not its children) into structural form, in place. */
function normalizeKeywords(node: Record<string, unknown>, path: string): void {
  for (const keyword of FORBIDDEN_KEYWORDS) {
    if (keyword in node) {
      throw new SchemaConversionError(`${path || "<root>"}: '${keyword}' cannot be expressed in a structural schema`);
    }
  }
  for (const keyword of DROPPED_KEYWORDS) delete node[keyword];
  if ("const" in node) {
    node.enum = [node.const];
    delete node.const;
  }
  const extra = node.additionalProperties;
  if (extra === false) delete node.additionalProperties;
  if (extra === true || (isRecord(extra) && Object.keys(extra).length === 0)) {
    delete node.additionalProperties;
    node["x-kubernetes-preserve-unknown-fields"] = true;
  }
  // zod bounds every integer by the safe-integer range; the API server needs no such noise.
  if (node.maximum === Number.MAX_SAFE_INTEGER) delete node.maximum;
  if (node.minimum === Number.MIN_SAFE_INTEGER) delete node.minimum;
  const enumValues = Array.isArray(node.enum) ? node.enum : undefined;
  if (node.type === "number" && enumValues?.every((value) => Number.isInteger(value))) node.type = "integer";
  if (node.type === undefined && enumValues !== undefined && enumValues.length > 0) node.type = typeof enumValues[0];
  // A format is checked by the API server; zod's equivalent regex only makes the schema unreadable.
  if (typeof node.format === "string" && typeof node.pattern === "string") delete node.pattern;
  if (typeof node.pattern === "string") replacePattern(node, node.pattern, path);
}

/**
 * The API server reports an OpenAPI `pattern` with the raw expression ("should match '^([1-9][0-9]*)…$'"). Every
 * pattern is said by a CEL rule with a message instead (`matching()` in fields.ts adds it); the pattern goes.
 */
function replacePattern(node: Record<string, unknown>, pattern: string, path: string): void {
  const rules = Array.isArray(node["x-kubernetes-validations"]) ? node["x-kubernetes-validations"] : [];
  const said = rules.some((rule) => isRecord(rule) && rule.rule === `self.matches(${celString(pattern)})`);
  if (!said) {
    throw new SchemaConversionError(
      `${path || "<root>"}: pattern ${pattern} has no rule that says what is expected; build the field with matching() from src/api/fields.ts`,
    );
  }
  delete node.pattern;
}

/**
 * Turn zod's OpenAPI output into a structural schema: no const, no combinators, no `additionalProperties:
 * false`, integer enums typed integer, zod's safe-integer bounds and long format regexes dropped, keywords in
 * alphabetical order (properties keep their declared order).
 */
export function toStructural(input: unknown, path = ""): SchemaNode {
  if (!isRecord(input)) throw new SchemaConversionError(`${path || "<root>"}: schema node is not an object`);
  const node: Record<string, unknown> = { ...input };
  normalizeKeywords(node, path);
  if (isRecord(node.properties)) {
    const properties: Record<string, SchemaNode> = {};
    for (const [name, child] of Object.entries(node.properties)) {
      properties[name] = toStructural(child, `${path}.${name}`);
    }
    node.properties = properties;
  }
  if (Array.isArray(node.items)) throw new SchemaConversionError(`${path}: tuple 'items' is not structural`);
  if (node.items !== undefined) node.items = toStructural(node.items, `${path}[]`);
  if (isRecord(node.additionalProperties)) {
    node.additionalProperties = toStructural(node.additionalProperties, `${path}{}`);
  }
  const sorted: SchemaNode = {};
  for (const key of Object.keys(node).sort()) sorted[key] = node[key];
  return sorted;
}

/** The structural schema of one zod schema (a spec or a status). */
export function structuralSchemaOf(schema: z.ZodType): SchemaNode {
  return toStructural(z.toJSONSchema(schema, { target: "openapi-3.0", io: "input", unrepresentable: "throw" }));
}

/** The `openAPIV3Schema` of a kind. */
export function openApiSchemaOf(info: KindInfo): SchemaNode {
  return {
    description: info.description,
    properties: {
      apiVersion: {
        description: "APIVersion defines the versioned schema of this representation of an object.",
        type: "string",
      },
      kind: {
        description: "Kind is a string value representing the REST resource this object represents.",
        type: "string",
      },
      // Only name and generateName may be constrained under metadata; the API server owns the rest.
      metadata: { type: "object" },
      spec: structuralSchemaOf(info.specSchema),
      status: structuralSchemaOf(info.statusSchema),
    },
    required: ["spec"],
    type: "object",
  };
}

export interface CustomResourceDefinition {
  apiVersion: "apiextensions.k8s.io/v1";
  kind: "CustomResourceDefinition";
  metadata: { name: string; labels: Record<string, string> };
  spec: {
    group: string;
    names: {
      kind: string;
      listKind: string;
      plural: string;
      singular: string;
      shortNames: string[];
      categories?: string[];
    };
    scope: "Namespaced";
    versions: {
      name: string;
      served: boolean;
      storage: boolean;
      additionalPrinterColumns: {
        name: string;
        type: string;
        jsonPath: string;
        description: string;
        priority?: number;
      }[];
      schema: { openAPIV3Schema: SchemaNode };
      subresources: { status: Record<string, never>; scale?: ScaleSubresource };
    }[];
  };
}

export function crdOf(info: KindInfo): CustomResourceDefinition {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: {
      name: `${info.plural}.${info.group}`,
      labels: { "app.kubernetes.io/part-of": "gpuvm-operator", ...info.crdLabels },
    },
    spec: {
      group: info.group,
      names: {
        kind: info.kind,
        listKind: info.listKind,
        plural: info.plural,
        singular: info.singular,
        shortNames: [...info.shortNames],
        ...(info.categories.length > 0 ? { categories: [...info.categories] } : {}),
      },
      scope: "Namespaced",
      versions: [
        {
          name: info.version,
          served: true,
          storage: true,
          additionalPrinterColumns: info.printerColumns.map((column) => ({ ...column })),
          schema: { openAPIV3Schema: openApiSchemaOf(info) },
          subresources: { status: {}, ...(info.scale !== undefined ? { scale: { ...info.scale } } : {}) },
        },
      ],
    },
  };
}

export function crdFileName(info: KindInfo): string {
  return `${info.group}_${info.plural}.yaml`;
}

/** The API groups of the generated CRDs (the file names of crds/ start with one of them). */
export function crdGroups(): string[] {
  return [...new Set(KINDS.map((info) => info.group))];
}

const HEADER = "# Generated by `npm run generate` from src/api. Do not edit by hand.\n";

/** One YAML file per kind, for crds/. Deterministic. */
export function generateCrds(): { fileName: string; yaml: string }[] {
  return KINDS.map((info) => ({
    fileName: crdFileName(info),
    yaml: HEADER + stringify(crdOf(info), { lineWidth: 0, aliasDuplicateObjects: false }),
  }));
}
