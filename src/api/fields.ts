// The zod helpers every kind file builds its fields with, so that each field carries a description (kubectl
// explain and docs/crd-reference.md read them) and a length bound (CEL cost estimation), and each rule the API
// server checks is said in words: patterns with their CEL rule and message, and the CEL rules shared by kinds.
import { z } from "zod";

/** A Kubernetes object name (DNS subdomain) in the same namespace. */
export const OBJECT_NAME_PATTERN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
export const OBJECT_NAME_EXPECTED =
  "must be an object name such as my-disk: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit";
/** A key in a Secret or ConfigMap. */
export const DATA_KEY_PATTERN = /^[-._a-zA-Z0-9]+$/;
export const DATA_KEY_EXPECTED =
  "must be a Secret or ConfigMap key such as id_ed25519.pub: letters, digits, '-', '_' and '.'";
/** A cloud location identifier such as `us-east1-a`. */
export const LOCATION_PATTERN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const LOCATION_EXPECTED =
  "must be a location such as us-east1-a: lowercase letters, digits and '-', starting and ending with a letter or digit";
/** A name as the cloud accepts it: lowercase letters, digits, `-` and `.`, at most 63 characters. */
export const CLOUD_NAME_PATTERN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
export const CLOUD_NAME_EXPECTED =
  "must be a cloud name such as team-a-trainer: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit";

/** A CEL string literal (single-quoted) holding `text`. */
export function celString(text: string): string {
  return `'${text.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
}

/** The CEL rule that `self` matches `pattern`; `expected` is what the API server says instead of the expression. */
export function matchesRule(pattern: RegExp, expected: string): CelRule {
  return { rule: `self.matches(${celString(pattern.source)})`, message: expected };
}

/**
 * `schema` constrained to `pattern`, said in words: zod reports `expected`, and the CRD carries a CEL rule with
 * `expected` as its message instead of an OpenAPI `pattern` (the API server would print the raw expression). The
 * generator refuses a `pattern` without such a rule (src/api/crd.ts). `rules` are further rules on the same field,
 * which should hold only for a value that matches (guard them with the pattern, so that one mistake is one error).
 */
export function matching(schema: z.ZodString, pattern: RegExp, expected: string, rules: readonly CelRule[] = []) {
  return schema
    .regex(pattern, expected)
    .meta({ "x-kubernetes-validations": [matchesRule(pattern, expected), ...rules] });
}

/** `rule`, evaluated only when `expr` matches `pattern` (a malformed value has its own error already). */
export function whenMatching(expr: string, pattern: RegExp, rule: string): string {
  return `!${expr}.matches(${celString(pattern.source)}) || (${rule})`;
}

/** A bounded string with a description. */
export function text(description: string, maxLength = 253) {
  return z.string().max(maxLength).meta({ description });
}

/** A reference to another object of the same namespace by name. */
export function localObjectReference(description: string, nameDescription: string) {
  return z
    .object({
      name: matching(z.string().min(1).max(253), OBJECT_NAME_PATTERN, OBJECT_NAME_EXPECTED).meta({
        description: nameDescription,
      }),
    })
    .meta({ description });
}

export interface CelRule {
  rule: string;
  message: string;
  /** A CEL expression for the message (may name the value, e.g. the corrected CIDR); `message` is its fallback. */
  messageExpression?: string;
  /** Optional: the field the error is reported on (relative to the node carrying the rule). */
  fieldPath?: string;
  reason?: "FieldValueInvalid" | "FieldValueForbidden" | "FieldValueRequired" | "FieldValueDuplicate";
}

/** `field` cannot change once set, and cannot be removed (spec-level transition rule). */
export function immutableOnceSet(field: string): CelRule {
  return {
    rule: `!has(oldSelf.${field}) || (has(self.${field}) && self.${field} == oldSelf.${field})`,
    message: `${field} cannot change once set`,
    fieldPath: `.${field}`,
  };
}

/** `field` cannot change, be added or be removed after creation; `instead` says what to do instead. */
export function immutable(field: string, instead?: string): CelRule {
  return {
    rule: `has(self.${field}) == has(oldSelf.${field}) && (!has(self.${field}) || self.${field} == oldSelf.${field})`,
    message: instead === undefined ? `${field} is immutable` : `${field} is immutable: ${instead}`,
    fieldPath: `.${field}`,
  };
}

/** Exactly one of the fields is set. */
export function exactlyOneOf(fields: readonly string[], message: string): CelRule {
  return { rule: `[${fields.map((f) => `has(self.${f})`).join(", ")}].filter(x, x).size() == 1`, message };
}

/** At most one of the fields is set. */
export function atMostOneOf(fields: readonly string[], message: string): CelRule {
  return { rule: `[${fields.map((f) => `has(self.${f})`).join(", ")}].filter(x, x).size() <= 1`, message };
}

/** zod mirror of exactlyOneOf/atMostOneOf, for superRefine. */
export function countSet(value: Record<string, unknown>, fields: readonly string[]): number {
  return fields.filter((field) => value[field] !== undefined).length;
}

/** A Kubernetes timestamp (RFC 3339). Enforced by the API server; read tolerantly. */
export function timestamp(description: string) {
  return z.string().max(64).meta({ description, format: "date-time" });
}
