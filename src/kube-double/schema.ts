// Custom resource schema handling like the apiextensions server: pruning of unknown fields (or a strict
// decoding error), defaulting, OpenAPI validation with ajv and CEL `x-kubernetes-validations` rules.

import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import addFormats from "ajv-formats";
import { evaluateExpression, evaluateRule, referencesOldSelf } from "./cel.ts";
import { scaleCauses } from "./scale-paths.ts";
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

/** Reasons of OpenAPI errors that keep CEL rules from running (apiextensions' hasBlockingErr). */
const BLOCKING_REASONS = new Set([
  "FieldValueNotSupported",
  "FieldValueRequired",
  "FieldValueTooLong",
  "FieldValueTooMany",
  "FieldValueTypeInvalid",
]);

/** The cause added when OpenAPI errors kept the CEL rules from running. */
const RULES_NOT_CHECKED: StatusCause = {
  reason: "FieldValueInvalid",
  message:
    "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
  field: "<nil>",
};

/** An ajv error as the API server words the same OpenAPI violation (kube-openapi's validate errors). */
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
  const invalidValue = (detail: string): StatusCause => ({
    reason: "FieldValueInvalid",
    message: `Invalid value: ${describe(value)}: ${field} in body ${detail}`,
    field,
  });
  switch (error.keyword) {
    case "enum": {
      const allowed = Array.isArray(params.allowedValues) ? params.allowedValues : [];
      const supported = allowed.map((item) => JSON.stringify(String(item))).join(", ");
      return {
        reason: "FieldValueNotSupported",
        message: `Unsupported value: ${describe(value)}: supported values: ${supported}`,
        field,
      };
    }
    case "type":
      return {
        reason: "FieldValueTypeInvalid",
        message: `Invalid value: ${describe(value)}: ${field} in body must be of type ${String(params.type)}: ${describe(value)}`,
        field,
      };
    case "maxLength":
      return {
        reason: "FieldValueTooLong",
        message: `Too long: may not be more than ${String(params.limit)} bytes`,
        field,
      };
    case "maxItems":
    case "maxProperties": {
      const count = Array.isArray(value) ? value.length : isRecord(value) ? Object.keys(value).length : 0;
      return {
        reason: "FieldValueTooMany",
        message: `Too many: ${count}: must have at most ${String(params.limit)} items`,
        field,
      };
    }
    case "minLength":
      return invalidValue(`should be at least ${String(params.limit)} chars long`);
    case "minItems":
      return invalidValue(`should have at least ${String(params.limit)} items`);
    case "pattern":
      return invalidValue(`should match '${String(params.pattern)}'`);
    case "minimum":
      return invalidValue(`should be greater than or equal to ${String(params.limit)}`);
    case "maximum":
      return invalidValue(`should be less than or equal to ${String(params.limit)}`);
    default:
      return invalidValue(error.message ?? "is invalid");
  }
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

/** A failed rule's detail: its messageExpression's value when that gives a non-empty string, else its message. */
function ruleDetail(rule: Record<string, unknown>, value: unknown, old: unknown): string {
  if (typeof rule.messageExpression === "string") {
    const evaluated = evaluateExpression(rule.messageExpression, value, old);
    if (evaluated !== "unsupported" && "value" in evaluated && typeof evaluated.value === "string") {
      const text = evaluated.value.trim();
      if (text !== "" && !text.includes("\n")) return text;
    }
  }
  return typeof rule.message === "string" && rule.message.trim() !== ""
    ? rule.message.trim()
    : `failed rule: ${String(rule.rule).trim()}`;
}

/** A failed rule as the API server words it (apiextensions' CEL validator): by its reason, with the value only for scalars. */
function failedRuleCause(rule: Record<string, unknown>, value: unknown, detail: string, field: string): StatusCause {
  switch (rule.reason) {
    case "FieldValueForbidden":
      return { reason: "FieldValueForbidden", message: `Forbidden: ${detail}`, field };
    case "FieldValueRequired":
      return { reason: "FieldValueRequired", message: `Required value: ${detail}`, field };
    case "FieldValueDuplicate":
      return { reason: "FieldValueDuplicate", message: `Duplicate value: ${describe(value)}`, field };
    default: {
      const shown = isRecord(value) || Array.isArray(value) ? "" : `${describe(value)}: `;
      return { reason: "FieldValueInvalid", message: `Invalid value: ${shown}${detail}`, field };
    }
  }
}

/** A rule that failed to evaluate: reported on its node, with the schema type as the value (the API server's wording). */
function evaluationErrorCause(
  schema: Record<string, unknown>,
  rule: Record<string, unknown>,
  error: string,
  path: string,
): StatusCause {
  const summary = typeof rule.message === "string" && rule.message.trim() !== "" ? rule.message : String(rule.rule);
  return {
    reason: "FieldValueInvalid",
    message: `Invalid value: ${JSON.stringify(String(schema.type ?? "object"))}: ${error} evaluating rule: ${summary.trim()}`,
    field: path === "" ? "<nil>" : path,
  };
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
    const previous = transition ? old : undefined;
    const result = evaluateRule(rule.rule, value, previous);
    if (result === "unsupported") {
      outcome.skipped.push(rule.rule);
      continue;
    }
    if (result === true) continue;
    if (result !== false) {
      outcome.causes.push(evaluationErrorCause(schema, rule, result.error, path));
      continue;
    }
    const suffix = typeof rule.fieldPath === "string" ? rule.fieldPath : "";
    const field = path === "" ? suffix.replace(/^\./, "") : `${path}${suffix}`;
    outcome.causes.push(failedRuleCause(rule, value, ruleDetail(rule, value, previous), field));
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
  // The scale checks run with the OpenAPI ones, before the API server decides whether CEL rules may run.
  causes.push(...scaleCauses(type, object));
  if (causes.some((cause) => BLOCKING_REASONS.has(cause.reason))) {
    // As the API server: a wrong type, a missing field or a bound exceeded keeps the CEL rules from running.
    causes.push(RULES_NOT_CHECKED);
  } else {
    const outcome: CelOutcome = { causes: [], skipped: [] };
    checkRules(schema, object, options.old, "", outcome);
    for (const rule of outcome.skipped) options.onSkippedRule?.(rule);
    causes.push(...outcome.causes);
  }
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
