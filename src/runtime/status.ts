// Writing to the cluster without fighting other writers: status goes through the status subresource only when
// it changed, as a merge patch that carries metadata.resourceVersion (a 409 is reported, never overwritten);
// finalizers likewise with a resourceVersion-guarded merge patch. Pure helpers live here; the HTTP calls are in
// kube.ts (KubeClient).
import { ApiException } from "@kubernetes/client-node/dist/gen/apis/exception.js";
import { isPlainObject, sameJson } from "../util/json-values.ts";

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A JSON round trip: drops undefined fields and turns Dates into strings, as the API server would see them. */
export function toJson(value: unknown): JsonValue {
  if (value === undefined) return null;
  return JSON.parse(JSON.stringify(value)) as JsonValue;
}

/**
 * Whether `value` already is what JSON carries: strings, finite numbers, booleans, null, arrays of those and
 * plain objects (a field that is undefined counts as absent). Then it needs no round trip.
 */
function isJsonShaped(value: unknown): boolean {
  switch (typeof value) {
    case "string":
    case "boolean":
      return true;
    case "number":
      return Number.isFinite(value);
    case "object": {
      if (value === null) return true;
      if (Array.isArray(value)) {
        for (const item of value as unknown[]) if (item === undefined || !isJsonShaped(item)) return false;
        return true;
      }
      if (!isPlainObject(value)) return false;
      const record = value as Record<string, unknown>;
      for (const key in record) if (record[key] !== undefined && !isJsonShaped(record[key])) return false;
      return true;
    }
    default:
      return false;
  }
}

/** `value` as JSON sees it: itself when it is JSON-shaped (undefined fields stay, read as absent), else its round trip. */
function asJson(value: unknown): JsonValue {
  return value !== undefined && isJsonShaped(value) ? (value as JsonValue) : toJson(value);
}

/** Deep equality of JSON values ignoring nothing but key order. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  return sameJson(asJson(a), asJson(b));
}

function isJsonObject(value: JsonValue | undefined): value is { [key: string]: JsonValue } {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * An RFC 7386 merge patch that turns `from` into `to`: changed keys are set, removed keys become null, arrays
 * are replaced whole. Returns undefined when nothing changed. Statuses are compared where they are (one JSON
 * round trip only for values JSON would change, such as Dates), not copied at every level: the patch may share
 * parts of `to`.
 */
export function createMergePatch(from: unknown, to: unknown): JsonValue | undefined {
  return mergePatchOf(asJson(from), asJson(to));
}

function mergePatchOf(source: JsonValue | undefined, target: JsonValue): JsonValue | undefined {
  if (sameJson(source, target)) return undefined;
  if (!isJsonObject(source) || !isJsonObject(target)) return target;
  const patch: { [key: string]: JsonValue } = {};
  for (const key in source) if (source[key] !== undefined && target[key] === undefined) patch[key] = null;
  for (const key in target) {
    const value = target[key];
    if (value === undefined) continue;
    const child = source[key] === undefined ? value : mergePatchOf(source[key], value);
    if (child !== undefined) patch[key] = child;
  }
  return patch;
}

/** The outcome of a guarded write. `conflict` means "someone else wrote first: requeue and re-read". */
export type WriteResult<T> =
  | { type: "written"; object: T }
  | { type: "unchanged" }
  | { type: "conflict" }
  | { type: "notFound" };

/** A failed Kubernetes API call other than the 404/409 that WriteResult expresses. */
export class KubeApiError extends Error {
  override name = "KubeApiError";
  readonly status: number | undefined;
  readonly reason: string | undefined;

  constructor(message: string, options: { status?: number; reason?: string; cause?: unknown }) {
    super(message, { cause: options.cause });
    this.status = options.status;
    this.reason = options.reason;
  }
}

/** HTTP status of a client-node failure, if it has one. */
export function statusOf(error: unknown): number | undefined {
  if (error instanceof ApiException) return error.code;
  // Our own wrapping (toKubeApiError) keeps the status: a caller sees the same 404 behind a KubeClient method.
  if (error instanceof KubeApiError) return error.status;
  if (typeof error === "object" && error !== null && "code" in error && typeof error.code === "number") {
    return error.code;
  }
  return undefined;
}

/** Wraps any client-node failure into a KubeApiError with the Status message (ApiException.body is raw JSON). */
export function toKubeApiError(error: unknown, what: string): KubeApiError {
  const status = statusOf(error);
  let detail = error instanceof Error ? error.message : String(error);
  let reason: string | undefined;
  if (error instanceof ApiException) {
    try {
      const body: unknown = typeof error.body === "string" ? JSON.parse(error.body) : error.body;
      if (typeof body === "object" && body !== null) {
        if ("message" in body && typeof body.message === "string") detail = body.message;
        if ("reason" in body && typeof body.reason === "string") reason = body.reason;
      }
    } catch {
      // Not JSON (a proxy's HTML page, say): keep the exception's own message.
    }
  }
  return new KubeApiError(`${what}: ${status ?? "error"} ${detail}`, {
    ...(status !== undefined ? { status } : {}),
    ...(reason !== undefined ? { reason } : {}),
    cause: error,
  });
}
