// Writing to the cluster without fighting other writers: status goes through the status subresource only when
// it changed, as a merge patch that carries metadata.resourceVersion (a 409 is reported, never overwritten);
// finalizers likewise with a resourceVersion-guarded merge patch. Pure helpers live here; the HTTP calls are in
// kube.ts (KubeClient).
import { ApiException } from "@kubernetes/client-node/dist/gen/apis/exception.js";

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A JSON round trip: drops undefined fields and turns Dates into strings, as the API server would see them. */
export function toJson(value: unknown): JsonValue {
  if (value === undefined) return null;
  return JSON.parse(JSON.stringify(value)) as JsonValue;
}

/** Deep equality of JSON values ignoring nothing but key order. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  return equalJson(toJson(a), toJson(b));
}

function isJsonObject(value: JsonValue | undefined): value is { [key: string]: JsonValue } {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function equalJson(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((item, index) => equalJson(item, b[index]));
  }
  if (isJsonObject(a) && isJsonObject(b)) {
    const keys = Object.keys(a);
    if (keys.length !== Object.keys(b).length) return false;
    return keys.every((key) => key in b && equalJson(a[key], b[key]));
  }
  return false;
}

/**
 * An RFC 7386 merge patch that turns `from` into `to`: changed keys are set, removed keys become null, arrays
 * are replaced whole. Returns undefined when nothing changed.
 */
export function createMergePatch(from: unknown, to: unknown): JsonValue | undefined {
  const source = toJson(from);
  const target = toJson(to);
  if (equalJson(source, target)) return undefined;
  if (!isJsonObject(source) || !isJsonObject(target)) return target;
  const patch: { [key: string]: JsonValue } = {};
  for (const key of Object.keys(source)) if (!(key in target)) patch[key] = null;
  for (const [key, value] of Object.entries(target)) {
    const child = key in source ? createMergePatch(source[key], value) : value;
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
