// Status writes never fail on the CRD's limits: every status is fitted to the kind's structural schema (the one
// the CRD carries) before it is written. Text from outside (cloud answers, annotations, Secret contents) is
// shortened deterministically; a value that cannot be fitted is dropped and reported. Identities (ids, names,
// project ids) are never shortened: a shortened id would point at another resource, so it is reported instead.
import { createHash } from "node:crypto";
import type { SchemaNode } from "../../api/crd.ts";
import { isRecord } from "../../util/is-record.ts";

/** Fields whose value names something: shortening it would silently point elsewhere, so it never is. */
export function isIdentityField(key: string): boolean {
  return key === "id" || key === "cloudName" || key.endsWith("Id");
}

/**
 * Identities the operator acts on (the resource, its name and project, the operations it tracks, its intents):
 * one that does not fit is a problem that stalls the object. Other identities only inform (a disk's VM ids) and
 * are left out when they do not fit.
 */
const ACTED_ON = new Set([
  "status.id",
  "status.cloudName",
  "status.projectId",
  "status.operation.id",
  "status.operations[].id",
  "status.createPending.cloudName",
  "status.actionPending.id",
]);

const pathPattern = (path: string): string => path.replace(/\[\d+\]/g, "[]");

/** Texts at least this long may be cut with an ellipsis (messages); shorter limits get a hash suffix. */
const PROSE_LENGTH = 256;
const CUT_MARK = "… (cut)";

/**
 * `text` within `max` characters, the same for the same input: cut with a marker for prose, cut with `~` and
 * 8 hex digits of its sha256 for tokens (so that two long values stay distinct and compare equal to themselves).
 */
export function fitText(text: string, max: number): string {
  if (text.length <= max) return text;
  if (max >= PROSE_LENGTH) return `${text.slice(0, max - CUT_MARK.length)}${CUT_MARK}`;
  const hash = createHash("sha256").update(text).digest("hex").slice(0, 8);
  if (max <= hash.length) return hash.slice(0, max);
  return `${text.slice(0, max - hash.length - 1)}~${hash}`;
}

export interface Fitted<T> {
  value: T;
  /** What had to be dropped (never a value, only where and why). */
  problems: string[];
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

function matchesFormat(format: unknown, text: string): boolean {
  if (format === "date-time") return RFC3339.test(text) && !Number.isNaN(Date.parse(text));
  return true;
}

const patternCache = new Map<string, RegExp>();
function matchesPattern(pattern: unknown, text: string): boolean {
  if (typeof pattern !== "string") return true;
  let regex = patternCache.get(pattern);
  if (regex === undefined) {
    regex = new RegExp(pattern, "u");
    patternCache.set(pattern, regex);
  }
  return regex.test(text);
}

/** Sentinel: the value cannot be kept. */
const DROP = Symbol("drop");
type Out = unknown | typeof DROP;

interface Walk {
  problems: string[];
}

function fitString(value: string, node: SchemaNode, path: string, key: string, walk: Walk): Out {
  let text = value;
  const max = typeof node.maxLength === "number" ? node.maxLength : undefined;
  if (max !== undefined && text.length > max) {
    if (isIdentityField(key)) {
      if (ACTED_ON.has(pathPattern(path))) {
        walk.problems.push(`${path}: ${text.length} characters, the CRD allows ${max} (an id is never shortened)`);
      }
      return DROP;
    }
    text = fitText(text, max);
  }
  if (typeof node.minLength === "number" && text.length < node.minLength) return DROP;
  if (Array.isArray(node.enum) && !node.enum.includes(text)) return DROP;
  if (!matchesPattern(node.pattern, text) || !matchesFormat(node.format, text)) {
    if (ACTED_ON.has(pathPattern(path))) walk.problems.push(`${path}: not the form the CRD allows`);
    return DROP;
  }
  return text;
}

function fitNumber(value: number, node: SchemaNode): Out {
  if (!Number.isFinite(value)) return DROP;
  if (node.type === "integer" && !Number.isInteger(value)) return DROP;
  if (typeof node.minimum === "number" && value < node.minimum) return DROP;
  if (typeof node.maximum === "number" && value > node.maximum) return DROP;
  return value;
}

function fitArray(value: unknown[], node: SchemaNode, path: string, walk: Walk): Out {
  const items: unknown[] = [];
  const seen = new Set<string>();
  const mapKeys = node["x-kubernetes-list-map-keys"];
  const listType = node["x-kubernetes-list-type"];
  for (const [index, item] of value.entries()) {
    const fitted = node.items === undefined ? item : fitNode(item, node.items, `${path}[${index}]`, "", walk);
    if (fitted === DROP) continue;
    // A map list holds one item per key, a set each value once: the API server rejects duplicates.
    const identity =
      listType === "map" && Array.isArray(mapKeys) && isRecord(fitted)
        ? JSON.stringify(mapKeys.map((k) => fitted[String(k)]))
        : listType === "set"
          ? JSON.stringify(fitted)
          : undefined;
    if (identity !== undefined) {
      if (seen.has(identity)) continue;
      seen.add(identity);
    }
    items.push(fitted);
  }
  const max = typeof node.maxItems === "number" ? node.maxItems : undefined;
  return max !== undefined && items.length > max ? items.slice(0, max) : items;
}

function fitObject(value: Record<string, unknown>, node: SchemaNode, path: string, walk: Walk): Out {
  const properties = node.properties ?? {};
  const extra = isRecord(node.additionalProperties) ? (node.additionalProperties as SchemaNode) : undefined;
  const keepUnknown = node["x-kubernetes-preserve-unknown-fields"] === true;
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) {
    if (child === undefined) continue;
    const childNode = properties[key] ?? extra;
    if (childNode === undefined) {
      if (keepUnknown) out[key] = child;
      continue; // the API server would prune it: writing it again every pass would never settle
    }
    const fitted = fitNode(child, childNode, `${path}.${key}`, key, walk);
    if (fitted !== DROP) out[key] = fitted;
  }
  for (const required of node.required ?? []) {
    if (!(required in out)) return DROP;
  }
  return out;
}

function fitNode(value: unknown, node: SchemaNode, path: string, key: string, walk: Walk): Out {
  if (value === null || value === undefined) return DROP;
  switch (node.type) {
    case "string":
      return typeof value === "string" ? fitString(value, node, path, key, walk) : DROP;
    case "integer":
    case "number":
      return typeof value === "number" ? fitNumber(value, node) : DROP;
    case "boolean":
      return typeof value === "boolean" ? value : DROP;
    case "array":
      return Array.isArray(value) ? fitArray(value, node, path, walk) : DROP;
    case "object":
      return isRecord(value) ? fitObject(value, node, path, walk) : DROP;
    default:
      return value;
  }
}

/**
 * Whether fitNode would keep `value` as it is (a field that is undefined counts as absent): a walk that builds
 * neither copies nor paths, since nearly every status a pass writes already fits.
 */
function fitsNode(value: unknown, node: SchemaNode): boolean {
  if (value === null || value === undefined) return false;
  switch (node.type) {
    case "string": {
      if (typeof value !== "string") return false;
      if (typeof node.maxLength === "number" && value.length > node.maxLength) return false;
      if (typeof node.minLength === "number" && value.length < node.minLength) return false;
      if (Array.isArray(node.enum) && !node.enum.includes(value)) return false;
      return matchesPattern(node.pattern, value) && matchesFormat(node.format, value);
    }
    case "integer":
    case "number":
      return typeof value === "number" && fitNumber(value, node) !== DROP;
    case "boolean":
      return typeof value === "boolean";
    case "array":
      return Array.isArray(value) && arrayFits(value, node);
    case "object":
      return isRecord(value) && objectFits(value, node);
    default:
      return true;
  }
}

function arrayFits(value: unknown[], node: SchemaNode): boolean {
  if (typeof node.maxItems === "number" && value.length > node.maxItems) return false;
  const mapKeys = node["x-kubernetes-list-map-keys"];
  const listType = node["x-kubernetes-list-type"];
  const unique = listType === "set" || (listType === "map" && Array.isArray(mapKeys));
  const seen = unique ? new Set<string>() : undefined;
  for (const item of value) {
    if (node.items !== undefined && !fitsNode(item, node.items)) return false;
    if (seen === undefined) continue;
    const identity =
      listType === "map" && isRecord(item)
        ? JSON.stringify((mapKeys as unknown[]).map((k) => item[String(k)]))
        : JSON.stringify(item);
    if (seen.has(identity)) return false;
    seen.add(identity);
  }
  return true;
}

function objectFits(value: Record<string, unknown>, node: SchemaNode): boolean {
  const properties = node.properties ?? {};
  const extra = isRecord(node.additionalProperties) ? (node.additionalProperties as SchemaNode) : undefined;
  const keepUnknown = node["x-kubernetes-preserve-unknown-fields"] === true;
  for (const key in value) {
    const child = value[key];
    if (child === undefined) continue;
    const childNode = properties[key] ?? extra;
    if (childNode === undefined) {
      if (keepUnknown) continue;
      return false;
    }
    if (!fitsNode(child, childNode)) return false;
  }
  for (const required of node.required ?? []) {
    if (value[required] === undefined) return false;
  }
  return true;
}

/** Fit a status to the kind's status schema (a structural schema as the CRD carries it). */
export function fitStatus<T extends Record<string, unknown>>(status: T, schema: SchemaNode): Fitted<T> {
  if (isRecord(status) && fitsNode(status, schema)) return { value: status, problems: [] };
  const walk: Walk = { problems: [] };
  const fitted = fitNode(status, schema, "status", "", walk);
  return { value: (fitted === DROP || !isRecord(fitted) ? {} : fitted) as T, problems: walk.problems };
}

/** Fits `status` to the schema in place (a status that fits is left as it is) and names what could not fit. */
export function fitStatusInPlace(status: Record<string, unknown>, schema: SchemaNode): string[] {
  const fitted = fitStatus(status, schema);
  if (fitted.value !== status) {
    for (const key of Object.keys(status)) delete status[key];
    Object.assign(status, fitted.value);
  }
  return fitted.problems;
}
