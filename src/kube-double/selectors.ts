// Label selectors (=, ==, !=, in, notin, exists, !exists) and field selectors (=, ==, !=) as the API server
// parses them from the query string.
import { badRequest } from "./status.ts";
import { isRecord, type KubeObject } from "./types.ts";

type LabelRequirement =
  | { op: "eq" | "neq"; key: string; value: string }
  | { op: "in" | "notin"; key: string; values: string[] }
  | { op: "exists" | "notexists"; key: string };

export type LabelSelector = LabelRequirement[];

const KEY_PATTERN =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const VALUE_PATTERN = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** Split on commas that are not inside a `(...)` value set. */
function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = "";
  for (const char of text) {
    if (char === "(") depth++;
    if (char === ")") depth--;
    if (char === "," && depth === 0) {
      parts.push(current);
      current = "";
    } else {
      current += char;
    }
  }
  parts.push(current);
  return parts.map((part) => part.trim()).filter((part) => part !== "");
}

function checkKey(key: string, selector: string): string {
  if (!KEY_PATTERN.test(key))
    throw badRequest(`unable to parse requirement: invalid label key "${key}" in "${selector}"`);
  return key;
}

function checkValue(value: string, selector: string): string {
  if (!VALUE_PATTERN.test(value) || value.length > 63) {
    throw badRequest(`unable to parse requirement: invalid label value "${value}" in "${selector}"`);
  }
  return value;
}

function parseRequirement(part: string, selector: string): LabelRequirement {
  const setMatch = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(part);
  if (setMatch) {
    const [, key = "", op, list = ""] = setMatch;
    const values = list
      .split(",")
      .map((value) => value.trim())
      .filter((value) => value !== "")
      .map((value) => checkValue(value, selector));
    return { op: op === "in" ? "in" : "notin", key: checkKey(key, selector), values };
  }
  const compare = /^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(part);
  if (compare) {
    const [, key = "", op, value = ""] = compare;
    return { op: op === "!=" ? "neq" : "eq", key: checkKey(key, selector), value: checkValue(value, selector) };
  }
  if (part.startsWith("!")) return { op: "notexists", key: checkKey(part.slice(1).trim(), selector) };
  return { op: "exists", key: checkKey(part, selector) };
}

export function parseLabelSelector(selector: string | null | undefined): LabelSelector {
  if (!selector) return [];
  return splitTopLevel(selector).map((part) => parseRequirement(part, selector));
}

export function matchesLabels(selector: LabelSelector, labels: Record<string, string> | undefined): boolean {
  const actual = labels ?? {};
  return selector.every((requirement) => {
    const value = actual[requirement.key];
    switch (requirement.op) {
      case "eq":
        return value === requirement.value;
      case "neq":
        return value !== requirement.value;
      case "in":
        return value !== undefined && requirement.values.includes(value);
      case "notin":
        return value === undefined || !requirement.values.includes(value);
      case "exists":
        return value !== undefined;
      case "notexists":
        return value === undefined;
    }
    return false;
  });
}

interface FieldRequirement {
  path: string[];
  equal: boolean;
  value: string;
}

export type FieldSelector = FieldRequirement[];

export function parseFieldSelector(selector: string | null | undefined): FieldSelector {
  if (!selector) return [];
  return splitTopLevel(selector).map((part) => {
    const match = /^([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)$/.exec(part);
    if (!match) throw badRequest(`invalid field selector: "${part}"`);
    const [, field = "", op, value = ""] = match;
    return { path: field.split("."), equal: op !== "!=", value };
  });
}

function fieldValue(object: KubeObject, path: string[]): string {
  let current: unknown = object;
  for (const segment of path) {
    current = isRecord(current) ? current[segment] : undefined;
  }
  if (current === undefined || current === null) return "";
  return typeof current === "object" ? JSON.stringify(current) : String(current);
}

export function matchesFields(selector: FieldSelector, object: KubeObject): boolean {
  return selector.every(
    (requirement) => (fieldValue(object, requirement.path) === requirement.value) === requirement.equal,
  );
}
