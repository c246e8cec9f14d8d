// The one error type of the cloud client. Every failure a caller can see (HTTP status, network, timeout,
// malformed answer, endpoint missing on this server) is a CloudError; see docs/adr/0002-error-taxonomy.md.
import { ERROR_CODES, ErrorBody } from "./wire.ts";

export type CloudErrorKind = "http" | "network" | "timeout" | "parse" | "unsupported";

export interface CloudErrorInit {
  kind: CloudErrorKind;
  message: string;
  method: string;
  /** Route template, ids replaced (`/projects/:projectId/vms/:vmId`): the string the observer also gets. */
  route: string;
  code?: string;
  status?: number;
  errorId?: string;
  retryAfterMs?: number;
  /** Field path of a parse failure (`items.0.state`), empty for the body as a whole. */
  fieldPath?: string;
  /** The gRPC code from an `rpc error: code = X desc = …` message, when the server wrapped one. */
  rpcCode?: string;
  /**
   * For kind `unsupported`: what showed it, without the endpoint (`answered HTTP 404`), so that a message about
   * the endpoint can say it once instead of quoting this error's whole message.
   */
  detail?: string;
  retryable?: boolean;
  cause?: unknown;
}

export class CloudError extends Error {
  override readonly name = "CloudError";
  readonly kind: CloudErrorKind;
  readonly status?: number;
  readonly code: string;
  readonly errorId?: string;
  readonly method: string;
  readonly route: string;
  readonly retryable: boolean;
  readonly retryAfterMs?: number;
  readonly fieldPath?: string;
  readonly rpcCode?: string;
  readonly detail?: string;

  constructor(init: CloudErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.kind = init.kind;
    this.method = init.method;
    this.route = init.route;
    this.code = init.code ?? defaultCode(init.kind, init.status);
    this.retryable = init.retryable ?? isRetryableByDefault(init.kind, init.status);
    if (init.status !== undefined) this.status = init.status;
    if (init.errorId !== undefined) this.errorId = init.errorId;
    if (init.retryAfterMs !== undefined) this.retryAfterMs = init.retryAfterMs;
    if (init.fieldPath !== undefined) this.fieldPath = init.fieldPath;
    if (init.rpcCode !== undefined) this.rpcCode = init.rpcCode;
    if (init.detail !== undefined) this.detail = init.detail;
  }

  /** `GET /projects/:projectId/vms`: the endpoint, for messages and logs. */
  get endpoint(): string {
    return `${this.method} ${this.route}`;
  }
}

function defaultCode(kind: CloudErrorKind, status: number | undefined): string {
  if (status !== undefined) return statusCode(status);
  if (kind === "unsupported") return "unsupported";
  return kind === "parse" ? "invalid_response" : kind;
}

function statusCode(status: number): string {
  return (ERROR_CODES as Record<number, string>)[status] ?? `http_${status}`;
}

/**
 * Retryable means "trying the same call again later may succeed without anyone editing the spec".
 * 401/403 are retryable because credentials can be rotated; 409 because the cloud is often busy with an
 * operation; a parse failure because a server bug is usually fixed server-side. 400/404/405 are terminal.
 */
function isRetryableByDefault(kind: CloudErrorKind, status: number | undefined): boolean {
  switch (kind) {
    case "network":
    case "timeout":
    case "parse":
      return true;
    case "unsupported":
      return false;
    case "http":
      if (status === undefined) return false;
      return status === 401 || status === 403 || status === 408 || status === 409 || status === 429 || status >= 500;
  }
}

const RPC_ERROR = /^rpc error: code = (\S+) desc = ([\s\S]*)$/;

/** `rpc error: code = NotFound desc = vm not found` → `{ text: "vm not found", rpcCode: "NotFound" }`. */
export function unwrapRpcMessage(message: string): { text: string; rpcCode?: string } {
  const match = RPC_ERROR.exec(message.trim());
  if (!match?.[1]) return { text: message };
  return { text: match[2] ?? "", rpcCode: match[1] };
}

/** The symbolic code of an error body: a numeric code (`"404"` or `404`) becomes its name. */
export function normalizeErrorCode(code: string, status: number): string {
  if (/^[0-9]+$/.test(code)) {
    return (ERROR_CODES as Record<number, string>)[Number(code)] ?? statusCode(status);
  }
  return code;
}

/** Parse `Retry-After` (seconds or an HTTP date) into milliseconds; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^[0-9]+(\.[0-9]+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

const MAX_TEXT_IN_MESSAGE = 200;

export interface HttpFailure {
  status: number;
  /** The body, already decoded: JSON value, text, or undefined. */
  body: unknown;
  retryAfterHeader: string | null;
  method: string;
  route: string;
  /** The endpoint is beyond the spec: a 404/405 that is not a well-formed not_found means "not supported". */
  beyondSpec?: boolean;
  /**
   * The route names no resource but the project (a list): a 404 there cannot be "this resource is gone", so on
   * a route beyond the spec any 404 means "not supported" unless its message is about the project.
   */
  collection?: boolean;
}

/** Turn a non-2xx answer into a CloudError. Never throws, whatever the body. */
export function cloudErrorFromHttp(failure: HttpFailure): CloudError {
  const { status, method, route } = failure;
  const body = decodeBody(failure.body);
  const parsed = ErrorBody.safeParse(body);
  const retryAfterMs = parseRetryAfter(failure.retryAfterHeader);
  const base = { method, route, status, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };

  if (!parsed.success) {
    // A body that is not JSON is never quoted (it may be anything a foreign server holds); a JSON one may be.
    const text = body === NOT_JSON ? "" : looseMessageOf(body).trim().slice(0, MAX_TEXT_IN_MESSAGE);
    if (failure.beyondSpec && (status === 404 || status === 405)) return unsupported(method, route, status);
    return new CloudError({
      ...base,
      kind: "http",
      message: `${method} ${route} answered HTTP ${status}${text ? `: ${text}` : body === NOT_JSON ? " with a body that is not JSON" : ""}`,
    });
  }

  const { text, rpcCode } = unwrapRpcMessage(parsed.data.message);
  const code = normalizeErrorCode(parsed.data.code, status);
  const missingRoute =
    status === 405 ||
    (status === 404 && (looksLikeMissingRoute(code, text) || (failure.collection === true && !/project/i.test(text))));
  if (failure.beyondSpec && missingRoute) return unsupported(method, route, status);
  return new CloudError({
    ...base,
    kind: "http",
    code,
    message: text || `${method} ${route} answered HTTP ${status}`,
    ...(parsed.data.error_id === undefined ? {} : { errorId: parsed.data.error_id }),
    ...(rpcCode === undefined ? {} : { rpcCode }),
  });
}

/**
 * A 404 from a server that knows the route carries `not_found` and talks about the resource. A server that
 * lacks the route answers its router's default ("404 page not found", "Route GET:/x not found").
 */
function looksLikeMissingRoute(code: string, text: string): boolean {
  if (code !== "not_found") return true;
  return /page not found|route .* not found|no route|not implemented/i.test(text);
}

function unsupported(method: string, route: string, status: number): CloudError {
  return unsupportedEndpoint(method, route, `answered HTTP ${status}`, status);
}

/** The error for an endpoint this server lacks: `<method> <route> is not supported by this server (<detail>)`. */
export function unsupportedEndpoint(method: string, route: string, detail: string, status?: number): CloudError {
  return new CloudError({
    kind: "unsupported",
    ...(status !== undefined ? { status } : {}),
    method,
    route,
    detail,
    message: `${method} ${route} is not supported by this server (${detail})`,
  });
}

/** The message of a body that is not a well-formed error body: plain text, or `{ message }` / `{ error }`. */
function looseMessageOf(body: unknown): string {
  if (typeof body === "string") return body;
  if (typeof body === "object" && body !== null) {
    const record = body as Record<string, unknown>;
    for (const key of ["message", "error"]) {
      const value = record[key];
      if (typeof value === "string" && value !== "") return unwrapRpcMessage(value).text;
    }
  }
  return "";
}

/** Stands for a body that is text but not JSON (an HTML error page, a foreign server's file). */
const NOT_JSON: unique symbol = Symbol("not JSON");

function decodeBody(body: unknown): unknown {
  if (typeof body !== "string") return body;
  if (body.trim() === "") return undefined;
  try {
    return JSON.parse(body);
  } catch {
    return NOT_JSON;
  }
}

export function isCloudError(error: unknown): error is CloudError {
  return error instanceof CloudError;
}

export function isNotFound(error: unknown): boolean {
  return isCloudError(error) && error.kind === "http" && error.status === 404;
}

/** An unknown or expired operation id: 404, or 403 as some servers answer for old operations. */
export function isOperationGone(error: unknown): boolean {
  return isCloudError(error) && error.kind === "http" && (error.status === 404 || error.status === 403);
}

export function isConflict(error: unknown): boolean {
  return isCloudError(error) && error.status === 409;
}

export function isUnsupported(error: unknown): boolean {
  return isCloudError(error) && error.kind === "unsupported";
}

export function isRateLimited(error: unknown): boolean {
  return isCloudError(error) && error.status === 429;
}

export function isAuthError(error: unknown): boolean {
  return isCloudError(error) && error.kind === "http" && (error.status === 401 || error.status === 403);
}
