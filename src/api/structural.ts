// Checks for generated (or hand-written) CRDs: the structural-schema rules of apiextensions.k8s.io/v1
// (KEP-2335), plus this project's quality rules (a description on every field, bounds on every list and
// string so that CEL cost estimation passes). Used by test/api and by .ci/check-manifests.ts.
import { isRecord } from "../util/is-record.ts";

/** Keywords an apiextensions v1 schema may carry (JSONSchemaProps), besides the x-kubernetes-* extensions. */
const ALLOWED_KEYWORDS = new Set([
  "description",
  "type",
  "format",
  "title",
  "default",
  "maximum",
  "exclusiveMaximum",
  "minimum",
  "exclusiveMinimum",
  "maxLength",
  "minLength",
  "pattern",
  "maxItems",
  "minItems",
  "uniqueItems",
  "multipleOf",
  "enum",
  "maxProperties",
  "minProperties",
  "required",
  "items",
  "allOf",
  "oneOf",
  "anyOf",
  "not",
  "properties",
  "additionalProperties",
  "nullable",
  "example",
  "externalDocs",
]);
/** The `x-kubernetes-*` extensions a CRD schema may carry. */
export const KUBERNETES_EXTENSIONS: readonly string[] = [
  "x-kubernetes-preserve-unknown-fields",
  "x-kubernetes-embedded-resource",
  "x-kubernetes-int-or-string",
  "x-kubernetes-list-map-keys",
  "x-kubernetes-list-type",
  "x-kubernetes-map-type",
  "x-kubernetes-validations",
];
const EXTENSIONS = new Set(KUBERNETES_EXTENSIONS);
const TYPES = new Set(["object", "array", "string", "integer", "number", "boolean"]);
const COMBINATORS = ["allOf", "oneOf", "anyOf", "not"];

function childEntries(node: Record<string, unknown>, path: string): [string, unknown][] {
  const children: [string, unknown][] = [];
  if (isRecord(node.properties)) {
    for (const [name, child] of Object.entries(node.properties)) children.push([`${path}.${name}`, child]);
  }
  if (node.items !== undefined) children.push([`${path}[]`, node.items]);
  if (isRecord(node.additionalProperties)) children.push([`${path}{}`, node.additionalProperties]);
  return children;
}

function keywordViolations(schema: Record<string, unknown>, path: string): string[] {
  const problems: string[] = [];
  for (const key of Object.keys(schema)) {
    if (!ALLOWED_KEYWORDS.has(key) && !EXTENSIONS.has(key)) problems.push(`${path}: keyword '${key}' is not allowed`);
  }
  for (const key of ["$ref", "$defs", "definitions", "const", "propertyNames", "patternProperties", "dependencies"]) {
    if (key in schema) problems.push(`${path}: '${key}' is forbidden in a structural schema`);
  }
  for (const key of COMBINATORS.filter((combinator) => combinator in schema)) {
    problems.push(`${path}: '${key}' is not emitted by this project (typed combinators are forbidden)`);
  }
  if (schema.uniqueItems === true) problems.push(`${path}: uniqueItems: true is forbidden (use list type set)`);
  return problems;
}

function typeViolations(schema: Record<string, unknown>, path: string): string[] {
  const untypedAllowed =
    schema["x-kubernetes-int-or-string"] === true || schema["x-kubernetes-preserve-unknown-fields"] === true;
  if (schema.type === undefined) return untypedAllowed ? [] : [`${path}: every node needs a type`];
  if (typeof schema.type !== "string" || !TYPES.has(schema.type)) {
    return [`${path}: type '${String(schema.type)}' is not one of ${[...TYPES].join(", ")}`];
  }
  return [];
}

function shapeViolations(schema: Record<string, unknown>, path: string): string[] {
  const problems: string[] = [];
  if (schema.additionalProperties === false) problems.push(`${path}: additionalProperties: false is forbidden`);
  if (schema.additionalProperties !== undefined && schema.properties !== undefined) {
    problems.push(`${path}: additionalProperties and properties are mutually exclusive`);
  }
  if (schema.properties !== undefined && schema.type !== "object")
    problems.push(`${path}: properties need type object`);
  if (schema.items !== undefined && schema.type !== "array") problems.push(`${path}: items need type array`);
  if (schema.items !== undefined && !isRecord(schema.items)) problems.push(`${path}: items must be one schema`);
  if (schema.type === "array" && schema.items === undefined) problems.push(`${path}: an array needs items`);
  const properties = isRecord(schema.properties) ? schema.properties : {};
  const required: unknown[] = Array.isArray(schema.required) ? schema.required : [];
  for (const name of required.filter((name) => typeof name !== "string" || !(name in properties))) {
    problems.push(`${path}: required '${String(name)}' is not a property`);
  }
  return problems;
}

/**
 * Violations of the structural-schema rules. This project emits no combinators at all (stricter than the API
 * server, which allows untyped ones), so any allOf/anyOf/oneOf/not is reported.
 */
export function structuralViolations(schema: unknown, path = "<root>"): string[] {
  if (!isRecord(schema)) return [`${path}: not a schema object`];
  const problems = [
    ...keywordViolations(schema, path),
    ...typeViolations(schema, path),
    ...shapeViolations(schema, path),
    ...listTypeViolations(schema, path),
    ...validationRuleViolations(schema, path),
  ];
  for (const [childPath, child] of childEntries(schema, path)) problems.push(...structuralViolations(child, childPath));
  return problems;
}

function listTypeViolations(schema: Record<string, unknown>, path: string): string[] {
  const listType = schema["x-kubernetes-list-type"];
  if (listType === undefined) return [];
  if (schema.type !== "array") return [`${path}: x-kubernetes-list-type needs type array`];
  if (listType !== "atomic" && listType !== "set" && listType !== "map") return [`${path}: unknown list type`];
  if (listType !== "map") return [];
  const keys = schema["x-kubernetes-list-map-keys"];
  const items = schema.items;
  if (!Array.isArray(keys) || keys.length === 0) return [`${path}: a map list needs x-kubernetes-list-map-keys`];
  if (!isRecord(items)) return [];
  const required: unknown[] = Array.isArray(items.required) ? items.required : [];
  const properties = isRecord(items.properties) ? items.properties : {};
  const isDefaulted = (key: unknown) => {
    const property = properties[String(key)];
    return isRecord(property) && "default" in property;
  };
  return keys
    .filter((key) => !required.includes(key) && !isDefaulted(key))
    .map((key) => `${path}: map key '${String(key)}' must be required or defaulted`);
}

function validationRuleViolations(schema: Record<string, unknown>, path: string): string[] {
  const rules = schema["x-kubernetes-validations"];
  if (rules === undefined) return [];
  if (!Array.isArray(rules)) return [`${path}: x-kubernetes-validations must be a list`];
  const problems: string[] = [];
  for (const rule of rules) {
    if (!isRecord(rule) || typeof rule.rule !== "string" || rule.rule.trim() === "") {
      problems.push(`${path}: a validation rule needs a non-empty 'rule'`);
      continue;
    }
    if (typeof rule.message !== "string" || rule.message === "")
      problems.push(`${path}: rule '${rule.rule}' needs a message`);
    if (rule.rule.includes(".split("))
      problems.push(`${path}: rule '${rule.rule}' uses split(), avoid it (older CEL libraries)`);
    const field = typeof rule.fieldPath === "string" ? rule.fieldPath : undefined;
    if (field !== undefined && isRecord(schema.properties) && !(field.replace(/^\./, "") in schema.properties)) {
      problems.push(`${path}: fieldPath '${field}' is not a property`);
    }
  }
  return problems;
}

/**
 * Quality rules beyond the API server's: every field (except the root metadata) has a description, every list
 * has maxItems and every string a bound (maxLength, enum or format) so that CEL cost estimation passes.
 */
export function qualityViolations(schema: unknown, path = "<root>"): string[] {
  if (!isRecord(schema)) return [`${path}: not a schema object`];
  const problems: string[] = [];
  const isRootMetadata = path === "<root>.metadata";
  if (path !== "<root>" && !isRootMetadata && (typeof schema.description !== "string" || schema.description === "")) {
    problems.push(`${path}: missing description`);
  }
  if (schema.type === "array" && typeof schema.maxItems !== "number") problems.push(`${path}: list without maxItems`);
  if (
    schema.type === "string" &&
    !path.startsWith("<root>.apiVersion") &&
    !path.startsWith("<root>.kind") &&
    typeof schema.maxLength !== "number" &&
    !Array.isArray(schema.enum)
  ) {
    problems.push(`${path}: string without maxLength or enum`);
  }
  for (const [childPath, child] of childEntries(schema, path)) problems.push(...qualityViolations(child, childPath));
  return problems;
}

function versionViolations(version: Record<string, unknown>): string[] {
  const name = String(version.name);
  const problems: string[] = [];
  if (!isRecord(version.subresources) || !isRecord(version.subresources.status)) {
    problems.push(`${name}: status subresource not enabled`);
  }
  const columns: unknown[] = Array.isArray(version.additionalPrinterColumns) ? version.additionalPrinterColumns : [];
  for (const column of columns) {
    if (!isRecord(column) || typeof column.jsonPath !== "string" || !column.jsonPath.startsWith(".")) {
      problems.push(`${name}: printer column ${JSON.stringify(column)} needs a jsonPath starting with '.'`);
    }
  }
  const schema = isRecord(version.schema) ? version.schema.openAPIV3Schema : undefined;
  if (!isRecord(schema)) return [...problems, `${name}: no openAPIV3Schema`];
  const metadata = isRecord(schema.properties) ? schema.properties.metadata : undefined;
  const metadataFields = isRecord(metadata) && isRecord(metadata.properties) ? Object.keys(metadata.properties) : [];
  if (metadataFields.some((field) => field !== "name" && field !== "generateName")) {
    problems.push(`${name}: metadata may only constrain name and generateName`);
  }
  problems.push(...structuralViolations(schema).map((problem) => `${name}: ${problem}`));
  return problems;
}

/** Checks of a whole CustomResourceDefinition document: envelope, names, versions, schema rules. */
export function crdViolations(document: unknown): string[] {
  if (!isRecord(document)) return ["CRD document is not an object"];
  const name = isRecord(document.metadata) ? String(document.metadata.name) : "<unnamed>";
  const problems: string[] = [];
  if (document.apiVersion !== "apiextensions.k8s.io/v1") problems.push("apiVersion must be apiextensions.k8s.io/v1");
  if (document.kind !== "CustomResourceDefinition") problems.push("kind must be CustomResourceDefinition");
  const spec = isRecord(document.spec) ? document.spec : {};
  const names = isRecord(spec.names) ? spec.names : {};
  if (name !== `${String(names.plural)}.${String(spec.group)}`) problems.push("metadata.name must be <plural>.<group>");
  const versions = (Array.isArray(spec.versions) ? spec.versions : []).filter(isRecord);
  if (versions.length === 0) problems.push("no versions");
  if (versions.length > 0 && versions.filter((version) => version.storage === true).length !== 1) {
    problems.push("exactly one version must be the storage version");
  }
  for (const version of versions) problems.push(...versionViolations(version));
  return problems.map((problem) => `${name}: ${problem}`);
}
