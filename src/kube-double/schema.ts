// Custom resource schema handling like the apiextensions server: pruning of unknown fields (or a strict
// decoding error), defaulting, OpenAPI validation with ajv and CEL `x-kubernetes-validations` rules.

import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import addFormats from "ajv-formats";
import { evaluateRule, referencesOldSelf } from "./cel.ts";
import { scaleCauses } from "./scale.ts";
import { badRequest, invalid, type StatusCause } from "./status.ts";
import { deepClone, isRecord, type JsonSchema, type KubeObject, type ResourceType } from "./types.ts";

const ROOT_FIELDS = new Set(["apiVersion", "kind", "metadata"]);

function createAjv(): Ajv {
  const ajv = new Ajv({ strict: false, allErrors: true, logger: false });
  addFormats.default(ajv);
  // Kubernetes formats ajv does not know; Kubernetes itself checks them loosely.
  for (const format of ["int32", "int64", "float", "double", "byte", "quantity", "duration", "cidr", "mac", "uuid"]) {
    if (!ajv.formats[format]) ajv.addFormat(format, true);
  }
  return ajv;
}

const ajv = createAjv();
const compiled = new WeakMap<JsonSchema, ValidateFunction>();

function validatorFor(schema: JsonSchema): ValidateFunction {
  let validate = compiled.get(schema);
  if (!validate) {
    validate = ajv.compile(schema);
    compiled.set(schema, validate);
  }
  return validate;
}

function joinPath(parent: string, key: string | number): string {
  if (typeof key === "number") return `${parent}[${key}]`;
  return parent === "" ? key : `${parent}.${key}`;
}

function fieldFromPointer(pointer: string): string {
  let field = "";
  for (const token of pointer.split("/").slice(1)) {
    const decoded = token.replace(/~1/g, "/").replace(/~0/g, "~");
    field = /^\d+$/.test(decoded) ? joinPath(field, Number(decoded)) : joinPath(field, decoded);
  }
  return field;
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return "null";
  if (typeof value === "object") return `"${Array.isArray(value) ? "array" : "object"}"`;
  return JSON.stringify(value);
}

function valueAtPointer(root: unknown, pointer: string): unknown {
  let current = root;
  for (const token of pointer.split("/").slice(1)) {
    current = Array.isArray(current) ? current[Number(token)] : isRecord(current) ? current[token] : undefined;
  }
  return current;
}

function causeFromAjv(error: ErrorObject, root: unknown): StatusCause {
  const field = fieldFromPointer(error.instancePath);
  const params = error.params as Record<string, unknown>;
  if (error.keyword === "required") {
    return {
      reason: "FieldValueRequired",
      message: "Required value",
      field: joinPath(field, String(params.missingProperty)),
    };
  }
  const value = valueAtPointer(root, error.instancePath);
  if (error.keyword === "enum" && Array.isArray(params.allowedValues)) {
    const allowed = params.allowedValues.map((item) => JSON.stringify(item)).join(", ");
    return {
      reason: "FieldValueNotSupported",
      message: `Unsupported value: ${describe(value)}: supported values: ${allowed}`,
      field,
    };
  }
  if (error.keyword === "type") {
    return {
      reason: "FieldValueTypeInvalid",
      message: `Invalid value: ${describe(value)}: ${field} in body must be of type ${String(params.type)}: ${describe(value)}`,
      field,
    };
  }
  return {
    reason: "FieldValueInvalid",
    message: `Invalid value: ${describe(value)}: ${field} in body ${error.message ?? "is invalid"}`,
    field,
  };
}

/** Remove fields the schema does not declare; report their paths. */
function prune(schema: unknown, value: unknown, path: string, unknown: string[]): void {
  if (!isRecord(schema)) return;
  if (Array.isArray(value)) {
    value.forEach((item, index) => {
      prune(schema.items, item, joinPath(path, index), unknown);
    });
    return;
  }
  if (!isRecord(value)) return;
  const preserve = schema["x-kubernetes-preserve-unknown-fields"] === true;
  const embedded = schema["x-kubernetes-embedded-resource"] === true;
  const properties = isRecord(schema.properties) ? schema.properties : undefined;
  const additional = isRecord(schema.additionalProperties) ? schema.additionalProperties : undefined;
  for (const key of Object.keys(value)) {
    if (path === "" && ROOT_FIELDS.has(key)) continue;
    if (embedded && ROOT_FIELDS.has(key)) continue;
    const childSchema = properties?.[key] ?? additional;
    if (childSchema !== undefined) prune(childSchema, value[key], joinPath(path, key), unknown);
    else if (!preserve) {
      unknown.push(joinPath(path, key));
      delete value[key];
    }
  }
}

function applyDefaults(schema: unknown, value: unknown): void {
  if (!isRecord(schema)) return;
  if (Array.isArray(value)) {
    for (const item of value) applyDefaults(schema.items, item);
    return;
  }
  if (!isRecord(value)) return;
  const properties = isRecord(schema.properties) ? schema.properties : {};
  for (const [key, childSchema] of Object.entries(properties)) {
    if (value[key] === undefined && isRecord(childSchema) && childSchema.default !== undefined) {
      value[key] = deepClone(childSchema.default);
    }
    applyDefaults(childSchema, value[key]);
  }
  if (isRecord(schema.additionalProperties)) {
    for (const key of Object.keys(value)) {
      if (!(key in properties)) applyDefaults(schema.additionalProperties, value[key]);
    }
  }
}

export interface CelOutcome {
  causes: StatusCause[];
  skipped: string[];
}

/** The rules declared on one schema node, evaluated against the value there. */
function checkOwnRules(
  schema: Record<string, unknown>,
  value: unknown,
  old: unknown,
  path: string,
  outcome: CelOutcome,
): void {
  const rules = Array.isArray(schema["x-kubernetes-validations"]) ? schema["x-kubernetes-validations"] : [];
  for (const rule of rules) {
    if (!isRecord(rule) || typeof rule.rule !== "string") continue;
    const transition = referencesOldSelf(rule.rule);
    if (transition && old === undefined) continue;
    const result = evaluateRule(rule.rule, value, transition ? old : undefined);
    if (result === "unsupported") {
      outcome.skipped.push(rule.rule);
      continue;
    }
    if (result) continue;
    const suffix = typeof rule.fieldPath === "string" ? rule.fieldPath : "";
    const field = path === "" ? suffix.replace(/^\./, "") : `${path}${suffix}`;
    const message = typeof rule.message === "string" ? rule.message : `failed rule: ${rule.rule}`;
    const reason = typeof rule.reason === "string" ? rule.reason : "FieldValueInvalid";
    // Like the real server, a rule on an object or a list does not print the value, only the message.
    const shown = isRecord(value) || Array.isArray(value) ? "" : `${describe(value)}: `;
    outcome.causes.push({ reason, message: `Invalid value: ${shown}${message}`, field });
  }
}

function checkRules(schema: unknown, value: unknown, old: unknown, path: string, outcome: CelOutcome): void {
  if (!isRecord(schema) || value === undefined) return;
  checkOwnRules(schema, value, old, path, outcome);
  if (Array.isArray(value)) {
    // Lists are not correlated with their old version, so transition rules inside them are not evaluated.
    value.forEach((item, index) => {
      checkRules(schema.items, item, undefined, joinPath(path, index), outcome);
    });
    return;
  }
  if (!isRecord(value)) return;
  const properties = isRecord(schema.properties) ? schema.properties : {};
  for (const [key, child] of Object.entries(value)) {
    const childSchema = properties[key] ?? schema.additionalProperties;
    checkRules(childSchema, child, isRecord(old) ? old[key] : undefined, joinPath(path, key), outcome);
  }
}

export interface SchemaCheckOptions {
  strict: boolean;
  old: KubeObject | undefined;
  onSkippedRule?: (rule: string) => void;
}

/**
 * Prune (or reject, when strict), default and validate a custom resource in place. Throws 400 for unknown
 * fields under strict field validation and 422 Invalid naming each failing field.
 */
export function admitCustomResource(type: ResourceType, object: KubeObject, options: SchemaCheckOptions): void {
  const schema = type.schema;
  if (schema === undefined) return;
  const unknown: string[] = [];
  prune(schema, object, "", unknown);
  if (options.strict && unknown.length > 0) {
    // The real answer is a bare 400 (no details.causes): the fields are named in the message only.
    const list = unknown.map((field) => `unknown field "${field}"`).join(", ");
    throw badRequest(
      `${type.kind} in version "${type.version}" cannot be handled as a ${type.kind}: strict decoding error: ${list}`,
    );
  }
  applyDefaults(schema, object);
  const name = object.metadata.name ?? "";
  const validate = validatorFor(schema);
  const causes: StatusCause[] = [];
  if (!validate(object)) causes.push(...(validate.errors ?? []).map((error) => causeFromAjv(error, object)));
  const outcome: CelOutcome = { causes: [], skipped: [] };
  checkRules(schema, object, options.old, "", outcome);
  for (const rule of outcome.skipped) options.onSkippedRule?.(rule);
  causes.push(...outcome.causes, ...scaleCauses(type, object));
  if (causes.length > 0) throw invalid(type, name, causes);
}

/** Compile-check a CRD schema so that a broken CRD is refused when it is registered, not on first use. */
export function checkSchemaCompiles(schema: JsonSchema): string | undefined {
  try {
    validatorFor(schema);
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}
