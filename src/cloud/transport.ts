// HTTP transport of the cloud client on ky 2: timeouts, bounded retries with backoff and jitter, Retry-After,
// the per-credential token bucket, the request observer, debug logging with redaction, and the mapping of
// every failure to a CloudError. Authentication lives one level up (auth.ts); this layer just sends a header.
import ky, { HTTPError, type Options, type ShouldRetryState, TimeoutError } from "ky";
import type { Logger } from "pino";
import type { z } from "zod";
import { CloudError, cloudErrorFromHttp, parseRetryAfter } from "./errors.ts";
import type { TokenBucket } from "./rate-limit.ts";

export type HttpMethod = "GET" | "POST" | "PATCH" | "DELETE";

export interface RequestEvent {
  method: string;
  /** Route template (`/projects/:projectId/vms/:vmId`), never a concrete path: low-cardinality metric label. */
  route: string;
  status: number | "error";
  durationMs: number;
}
export type RequestObserver = (event: RequestEvent) => void;

export type FetchFunction = (input: Request | string | URL, init?: RequestInit) => Promise<Response>;

export interface EndpointCall<T> {
  method: HttpMethod;
  route: string;
  /** Concrete path below the base URL, ids already encoded (`projects/p1/vms`). */
  path: string;
  query?: Record<string, string | undefined>;
  body?: unknown;
  schema: z.ZodType<T>;
  /** The endpoint is beyond the spec: 404/405 from it means "not supported by this server". */
  beyondSpec?: boolean;
  /** A list below the project (no resource id in the path): see HttpFailure.collection. */
  collection?: boolean;
  /** Bodies of this call carry secrets (tokens): never logged, even redacted. */
  sensitive?: boolean;
  signal?: AbortSignal | undefined;
}

export interface TransportOptions {
  baseUrl: string;
  timeoutMs: number;
  /** Retries of a call (after the first attempt). GETs may use them all; writes only when provably unsent. */
  retryLimit: number;
  /** First backoff step; doubles per retry, with jitter. */
  backoffBaseMs: number;
  backoffLimitMs: number;
  /** A Retry-After longer than this is not waited for in-process: the error goes up to the work queue. */
  maxRetryAfterMs: number;
  rateLimiter: TokenBucket | undefined;
  observer: RequestObserver | undefined;
  logger: Logger;
  fetch: FetchFunction;
}

const RETRY_STATUSES = [429, 502, 503, 504];
const IDEMPOTENT: ReadonlySet<string> = new Set(["GET"]);

/** Log paths pino censors. Bodies are logged only for writes; tokens, passwords and scripts never show. */
export const REDACT_PATHS = [
  "req.headers.authorization",
  "req.body.password",
  "req.body.current_password",
  "req.body.new_password",
  "req.body.refresh_token",
  "req.body.access_token",
  "req.body.startup_script",
  "req.body.shutdown_script",
  "apiKey",
  "password",
  "token",
  "accessToken",
  "refreshToken",
  "*.apiKey",
  "*.password",
  "*.accessToken",
  "*.refreshToken",
];

export class Transport {
  readonly #options: TransportOptions;
  readonly #baseUrl: string;
  readonly #logger: Logger;

  constructor(options: TransportOptions) {
    this.#options = options;
    this.#baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#logger = options.logger.child({ component: "cloud-client" }, { redact: { paths: REDACT_PATHS } });
  }

  get logger(): Logger {
    return this.#logger;
  }

  /** Send one call (with its retries) and parse the answer. Rejects only with CloudError. */
  async send<T>(call: EndpointCall<T>, authorization: string | undefined): Promise<T> {
    const text = await this.#fetchText(call, authorization);
    return parseAnswer(call, text);
  }

  async #fetchText(call: EndpointCall<unknown>, authorization: string | undefined): Promise<string> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (authorization) headers.authorization = authorization;
    const options: Options = {
      method: call.method,
      headers,
      timeout: this.#options.timeoutMs,
      fetch: this.#instrumentedFetch(call, authorization),
      retry: this.#retryOptions(call),
      hooks: {
        beforeRequest: [async () => this.#takeToken(call.signal)],
        beforeRetry: [async ({ retryCount }) => this.#beforeRetry(call, retryCount)],
      },
    };
    if (call.body !== undefined) options.json = call.body;
    if (call.signal) options.signal = call.signal;
    const searchParams = definedEntries(call.query);
    if (searchParams.length > 0) options.searchParams = searchParams;
    try {
      return await ky(`${this.#baseUrl}/${call.path}`, options).text();
    } catch (error) {
      throw this.#toCloudError(error, call);
    }
  }

  #retryOptions(call: EndpointCall<unknown>): Options["retry"] {
    const { backoffBaseMs, backoffLimitMs } = this.#options;
    return {
      limit: this.#options.retryLimit,
      methods: ["get", "post", "patch", "delete"],
      statusCodes: RETRY_STATUSES,
      afterStatusCodes: [429, 503],
      retryOnTimeout: true,
      backoffLimit: backoffLimitMs,
      delay: (attempt) => backoffBaseMs * 2 ** (attempt - 1),
      // Half jitter: spreads a herd of retries while keeping a floor under each delay.
      jitter: (delay) => delay * (0.5 + Math.random() * 0.5),
      shouldRetry: (state) => this.#shouldRetry(call, state),
    };
  }

  /** false vetoes; undefined lets ky decide (status list, Retry-After, network errors, timeouts). */
  #shouldRetry(call: EndpointCall<unknown>, { error }: ShouldRetryState): boolean | undefined {
    if (call.signal?.aborted) return false;
    const idempotent = IDEMPOTENT.has(call.method);
    if (error instanceof HTTPError) {
      const status = error.response.status;
      if (!RETRY_STATUSES.includes(status)) return false;
      // 429 means the server refused the request before acting on it: safe even for a write.
      if (!idempotent && status !== 429) return false;
      const retryAfterMs = parseRetryAfter(error.response.headers.get("retry-after"));
      if (retryAfterMs !== undefined && retryAfterMs > this.#options.maxRetryAfterMs) return false;
      return undefined;
    }
    if (error instanceof TimeoutError) return idempotent ? undefined : false;
    // A refused connection never reached the server; a reset or a timeout may have.
    if (isNetworkFailure(error)) return idempotent || connectionRefused(error) ? undefined : false;
    return false;
  }

  async #takeToken(signal: AbortSignal | undefined): Promise<void> {
    await this.#options.rateLimiter?.take(signal);
  }

  async #beforeRetry(call: EndpointCall<unknown>, retryCount: number): Promise<void> {
    this.#logger.debug({ method: call.method, route: call.route, retryCount }, "retrying cloud request");
    await this.#takeToken(call.signal);
  }

  /** Wraps fetch so that each attempt (retries included) is observed and logged once. */
  #instrumentedFetch(call: EndpointCall<unknown>, authorization: string | undefined): FetchFunction {
    const { observer } = this.#options;
    const baseFetch = this.#options.fetch;
    return async (input, init) => {
      const started = performance.now();
      const report = (status: number | "error"): void => {
        const durationMs = Math.round((performance.now() - started) * 10) / 10;
        try {
          observer?.({ method: call.method, route: call.route, status, durationMs });
        } catch (error) {
          // A broken observer must not break the request.
          this.#logger.warn({ err: error }, "request observer threw");
        }
        this.#logAttempt(call, input, authorization, status, durationMs);
      };
      try {
        const response = await baseFetch(input, init);
        report(response.status);
        return response;
      } catch (error) {
        report("error");
        throw error;
      }
    };
  }

  #logAttempt(
    call: EndpointCall<unknown>,
    input: Request | string | URL,
    authorization: string | undefined,
    status: number | "error",
    durationMs: number,
  ): void {
    if (!this.#logger.isLevelEnabled("debug")) return;
    const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
    const req: Record<string, unknown> = {
      path: url.pathname + url.search,
      headers: authorization ? { authorization } : {},
    };
    if (call.body !== undefined && !call.sensitive) req.body = call.body;
    this.#logger.debug({ method: call.method, route: call.route, status, durationMs, req }, "cloud request");
  }

  #toCloudError(error: unknown, call: EndpointCall<unknown>): CloudError {
    const { method, route } = call;
    if (error instanceof CloudError) return error;
    if (error instanceof HTTPError) {
      return cloudErrorFromHttp({
        status: error.response.status,
        body: error.data,
        retryAfterHeader: error.response.headers.get("retry-after"),
        method,
        route,
        beyondSpec: call.beyondSpec ?? false,
        collection: call.collection ?? false,
      });
      // No cause on purpose: ky's HTTPError carries the request options (bodies with passwords).
    }
    if (error instanceof TimeoutError) {
      return new CloudError({
        kind: "timeout",
        method,
        route,
        message: `${method} ${route} timed out after ${this.#options.timeoutMs} ms`,
      });
    }
    if (call.signal?.aborted) {
      return new CloudError({
        kind: "network",
        code: "aborted",
        retryable: false,
        method,
        route,
        message: `${method} ${route} was aborted`,
        cause: error,
      });
    }
    const detail = networkDetail(error);
    return new CloudError({
      kind: "network",
      method,
      route,
      message: `${method} ${route} failed: ${detail}`,
      // The socket-level error, not ky's wrapper (which holds the request and its headers).
      cause: error instanceof Error && error.name === "NetworkError" ? error.cause : error,
    });
  }
}

function definedEntries(query: Record<string, string | undefined> | undefined): [string, string][] {
  if (!query) return [];
  const entries: [string, string][] = [];
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined) entries.push([key, value]);
  }
  return entries;
}

/** Parse a 2xx body with the endpoint's schema; a malformed answer is a CloudError of kind "parse". */
export function parseAnswer<T>(call: Pick<EndpointCall<T>, "method" | "route" | "schema">, text: string): T {
  const { method, route } = call;
  let json: unknown;
  try {
    json = text === "" ? undefined : JSON.parse(text);
  } catch (error) {
    throw new CloudError({
      kind: "parse",
      method,
      route,
      fieldPath: "",
      message: `${method} ${route} answered a body that is not JSON: ${text.slice(0, 80)}`,
      cause: error,
    });
  }
  const result = call.schema.safeParse(json);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const fieldPath = issue ? issue.path.map(String).join(".") : "";
  throw new CloudError({
    kind: "parse",
    method,
    route,
    fieldPath,
    message: `${method} ${route} answered an unexpected body at ${fieldPath || "(root)"}: ${issue?.message ?? "invalid"}`,
    cause: result.error,
  });
}

/** The innermost `code` of a network failure (`ECONNREFUSED`, `ECONNRESET`, `UND_ERR_SOCKET`). */
function errorCodeOf(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    const code = (current as Error & { code?: unknown }).code;
    if (typeof code === "string") return code;
    current = current.cause;
  }
  return undefined;
}

function isNetworkFailure(error: Error): boolean {
  return error.name === "NetworkError" || errorCodeOf(error) !== undefined;
}

function connectionRefused(error: Error): boolean {
  return errorCodeOf(error) === "ECONNREFUSED";
}

function networkDetail(error: unknown): string {
  const code = errorCodeOf(error);
  const message = error instanceof Error ? error.message : String(error);
  return code ? `${code} (${message})` : message;
}
