// What every group of endpoints builds on: the client's one `call` (credentials, capabilities, transport:
// client.ts), the checks of a request before it is sent (a refused request is a terminal CloudError, never sent),
// the routes below a project, and the answer shapes the spec leaves open (bare arrays or `{ items }`, bare
// operations or `{ operation }`).
import { z } from "zod";
import { isRecord } from "../../util/is-record.ts";
import { CloudError } from "../errors.ts";
import type { EndpointCall, HttpMethod } from "../transport.ts";
import { itemsOf, type Operation, OperationEnvelope } from "../wire.ts";

export interface CallOptions {
  signal?: AbortSignal;
}

/** Sends one endpoint call with the account's credentials; answers its parsed body or throws a CloudError. */
export type Call = <T>(endpoint: EndpointCall<T>) => Promise<T>;

/**
 * Accept the spec's bare array and the `{ items }` form alike. The array is wrapped (not the object unwrapped)
 * so that a parse failure names the field as `items.3.state` in both cases.
 */
export function listOf<T extends z.ZodType>(item: T) {
  return z
    .preprocess((value) => (Array.isArray(value) ? { items: value } : value), itemsOf(item))
    .transform((v) => v.items);
}

/** Create/change endpoints answer `{ operation }`; a bare Operation is tolerated too (wrapped, same paths). */
export const OperationAnswer = z
  .preprocess((value) => (isRecord(value) && !("operation" in value) ? { operation: value } : value), OperationEnvelope)
  .transform((envelope): Operation => envelope.operation);

/** A list filter as the wire wants it: comma-separated, absent when empty. */
export const csv = (values: readonly string[] | undefined): string | undefined =>
  values && values.length > 0 ? values.join(",") : undefined;

/** A request the client refuses to send. Kind "parse" with code invalid_request: terminal, never retried. */
export function invalidRequest(method: HttpMethod, route: string, message: string, fieldPath = ""): CloudError {
  return new CloudError({
    kind: "parse",
    code: "invalid_request",
    retryable: false,
    method,
    route,
    fieldPath,
    message: `invalid request for ${method} ${route}: ${message}`,
  });
}

export function validateBody<T extends z.ZodType>(
  schema: T,
  body: unknown,
  method: HttpMethod,
  route: string,
): z.output<T> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const fieldPath = issue ? issue.path.map(String).join(".") : "";
  throw invalidRequest(method, route, `${fieldPath || "(body)"}: ${issue?.message ?? "invalid"}`, fieldPath);
}

/** An id as a path segment: non-empty, encoded, never `.` or `..`. */
export function requireId(value: string, name: string, method: HttpMethod, route: string): string {
  if (typeof value !== "string" || value.trim() === "")
    throw invalidRequest(method, route, `${name} must be a non-empty string`);
  // `.` and `..` survive encodeURIComponent and would be resolved as path segments.
  if (value === "." || value === "..") throw invalidRequest(method, route, `${name} must not be "." or ".."`);
  return encodeURIComponent(value);
}

/** The route template of a path below a project (`/projects/:projectId/vms`). */
export const projectRoute = (suffix: string): string => `/projects/:projectId${suffix}`;

/** A GET below a project: `suffix` is the route template's tail; `p` the encoded project id for the path. */
export function projectGet<T>(
  projectId: string,
  suffix: string,
  schema: z.ZodType<T>,
  opts: CallOptions,
  beyondSpec = false,
) {
  const route = projectRoute(suffix);
  const p = requireId(projectId, "projectId", "GET", route);
  return { route, p, endpoint: { method: "GET" as const, route, schema, signal: opts.signal, beyondSpec } };
}

/** A write below a project answering an operation; `tail(p)` is the concrete path after `projects/<p>/`. */
export function projectWrite(
  call: Call,
  method: HttpMethod,
  projectId: string,
  suffix: string,
  tail: (p: string) => string,
  body: unknown,
  opts: CallOptions,
  beyondSpec = false,
): Promise<Operation> {
  const route = projectRoute(suffix);
  const p = requireId(projectId, "projectId", method, route);
  return call({
    method,
    route,
    path: `projects/${p}/${tail(p)}`,
    body,
    schema: OperationAnswer,
    signal: opts.signal,
    beyondSpec,
  });
}
