// HTTP transport of the cloud client on ky 2: one deadline per call (attempts, backoffs and rate-limit waits
// included), bounded retries with backoff and jitter, Retry-After, the account's bulkhead (token bucket, circuit
// breaker), answers cut off at a size limit while they stream in (sent with undici's request under ky, read into
// one buffer: buffered-fetch.ts), redirects refused, every URL checked to stay
// below the base URL, the request observer, debug logging with redaction, and the mapping of every failure to a
// CloudError. Authentication lives one level up (auth.ts); this layer just sends a header.
import ky, { HTTPError, type Options, type ShouldRetryState, TimeoutError } from "ky";
import type { Logger } from "pino";
import { type Dispatcher, getGlobalDispatcher } from "undici";
import type { z } from "zod";
import { type Fence, fencingInterceptor, isFenced, isWriteMethod } from "../util/fence.ts";
import { answerText, type FetchFunction, sendRequest } from "./buffered-fetch.ts";
import type { AccountBulkhead, AttemptHandle } from "./bulkhead.ts";
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
  /** The deadline of one call: every attempt, backoff and rate-limit wait of it together. */
  timeoutMs: number;
  /** Retries of a call (after the first attempt). GETs may use them all; writes only when provably unsent. */
  retryLimit: number;
  /** First backoff step; doubles per retry, with jitter. */
  backoffBaseMs: number;
  backoffLimitMs: number;
  /** A Retry-After longer than this is not waited for in-process: the error goes up to the work queue. */
  maxRetryAfterMs: number;
  rateLimiter: TokenBucket | undefined;
  /** The account's circuit breaker (and in-flight bookkeeping); undefined: none. */
  bulkhead: AccountBulkhead | undefined;
  /** Largest answer body read; a longer one is cut off while it streams in. */
  maxResponseBytes: number;
  observer: RequestObserver | undefined;
  logger: Logger;
  /** Every write is checked against it as its bytes are about to leave (util/fence.ts); a refused one is not sent. */
  fence?: Fence | undefined;
  /** Sent as the User-Agent header (who sent a request, in the server's logs). */
  userAgent?: string | undefined;
}

/** Default answer size limit: a full page of 500 VMs is well below 1 MiB. */
export const DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

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
  readonly #base: URL;
  readonly #logger: Logger;
  /** The global dispatcher composed with the fence, per global dispatcher (writes only; reads go as they are). */
  readonly #fenced = new WeakMap<Dispatcher, Dispatcher>();

  constructor(options: TransportOptions) {
    this.#options = options;
    this.#baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#base = new URL(this.#baseUrl);
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
    const url = this.#urlOf(call);
    const headers: Record<string, string> = { accept: "application/json" };
    if (authorization) headers.authorization = authorization;
    if (this.#options.userAgent) headers["user-agent"] = this.#options.userAgent;
    // One deadline for the whole call: a worker never waits on a request longer than the request timeout.
    const deadline = AbortSignal.timeout(this.#options.timeoutMs);
    const signal = call.signal ? AbortSignal.any([call.signal, deadline]) : deadline;
    // The body goes to undici as text beside ky's Request (see sendRequest): serialised once, for every attempt.
    const json = call.body !== undefined ? JSON.stringify(call.body) : undefined;
    const options: Options = {
      method: call.method,
      headers,
      timeout: this.#options.timeoutMs,
      signal,
      // Never follow a redirect (to another host or not): the answer is refused, see #toCloudError.
      redirect: "manual",
      fetch: this.#instrumentedFetch(call, authorization, json),
      retry: this.#retryOptions(call),
      hooks: {
        beforeRequest: [async () => this.#takeToken(signal, call.method)],
        beforeRetry: [async ({ retryCount }) => this.#beforeRetry(call, retryCount, signal)],
      },
    };
    const searchParams = definedEntries(call.query);
    if (searchParams.length > 0) options.searchParams = searchParams;
    try {
      return await answerText(await ky(url, options));
    } catch (error) {
      throw this.#toCloudError(error, call, deadline);
    }
  }

  /** The call's URL, refused unless it stays below the base URL (an id spelled `..` must not climb out). */
  #urlOf(call: EndpointCall<unknown>): string {
    const text = `${this.#baseUrl}/${call.path}`;
    const target = new URL(text);
    const basePath = this.#base.pathname.replace(/\/+$/, "");
    if (target.origin !== this.#base.origin || !`${target.pathname}/`.startsWith(`${basePath}/`)) {
      throw new CloudError({
        kind: "parse",
        code: "invalid_request",
        retryable: false,
        method: call.method,
        route: call.route,
        message: `invalid request for ${call.method} ${call.route}: the path leaves the API base URL`,
      });
    }
    return text;
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
    // Our own verdicts (an answer over the size limit, a refused attempt) would be the same again.
    if (error instanceof CloudError) return false;
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

  /** Reads go before writes in the account's bucket: they finish work (polls, refreshes) and are few. */
  async #takeToken(signal: AbortSignal, method: HttpMethod): Promise<void> {
    await this.#options.rateLimiter?.take(signal, { urgent: method === "GET" });
  }

  async #beforeRetry(call: EndpointCall<unknown>, retryCount: number, signal: AbortSignal): Promise<void> {
    this.#logger.debug({ method: call.method, route: call.route, retryCount }, "retrying cloud request");
    await this.#takeToken(signal, call.method);
  }

  /**
   * The fetch ky sends each attempt (retries included) with: it passes the account's circuit breaker, is observed
   * and logged once, never follows a redirect, and reads the body into one buffer, cut off at the size limit
   * (buffered-fetch.ts).
   */
  #instrumentedFetch(call: EndpointCall<unknown>, authorization: string | undefined, json?: string): FetchFunction {
    const { observer } = this.#options;
    return async (input, init) => {
      const attempt = this.#options.bulkhead?.startAttempt(call.method, call.route);
      if (attempt instanceof CloudError) throw attempt;
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
      return this.#sendBuffered(call, input, init, attempt, report, json);
    };
  }

  /** One attempt with undici's `request`; the answer's body is read into one buffer, up to the size limit. */
  async #sendBuffered(
    call: EndpointCall<unknown>,
    input: Request | string | URL,
    init: RequestInit | undefined,
    attempt: AttemptHandle | undefined,
    report: (status: number | "error") => void,
    json: string | undefined,
  ): Promise<Response> {
    let head: Awaited<ReturnType<typeof sendRequest>>;
    try {
      head = await sendRequest(input, init, this.#dispatcherFor(call.method), json);
    } catch (error) {
      report("error");
      attempt?.end(call.signal?.aborted || isFenced(error) ? "neutral" : "failure");
      throw error;
    }
    report(head.status);
    this.#adaptRate(head);
    try {
      const response = await head.read(this.#options.maxResponseBytes, () =>
        tooLarge(call, this.#options.maxResponseBytes),
      );
      attempt?.end(head.status >= 500 ? "failure" : "success");
      return response;
    } catch (error) {
      attempt?.end(call.signal?.aborted ? "neutral" : "failure");
      throw error;
    }
  }

  /** The dispatcher of one attempt: writes go through the fence when there is one (see util/fence.ts). */
  #dispatcherFor(method: HttpMethod): Dispatcher | undefined {
    const fence = this.#options.fence;
    if (fence === undefined || !isWriteMethod(method)) return undefined;
    const base = getGlobalDispatcher();
    let fenced = this.#fenced.get(base);
    if (fenced === undefined) {
      fenced = base.compose(fencingInterceptor(fence));
      this.#fenced.set(base, fenced);
    }
    return fenced;
  }

  /** Every answer tells the account's bucket whether the server took the request (see rate-limit.ts). */
  #adaptRate(response: { status: number; headers: Headers }): void {
    const limiter = this.#options.rateLimiter;
    if (limiter === undefined) return;
    if (response.status === 429) limiter.throttled(parseRetryAfter(response.headers.get("retry-after")));
    else if (response.status < 500) limiter.accepted();
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

  #toCloudError(error: unknown, call: EndpointCall<unknown>, deadline: AbortSignal): CloudError {
    const { method, route } = call;
    if (error instanceof CloudError) return error;
    if (error instanceof Error && error.cause instanceof CloudError) return error.cause;
    if (isFenced(error)) {
      // Proven unsent: this replica may not act now (it lost its Lease, or its pass was cancelled).
      return new CloudError({
        kind: "network",
        code: "fenced",
        retryable: false,
        method,
        route,
        message: `${method} ${route} was not sent: ${error instanceof Error ? error.message : String(error)}`,
        cause: error,
      });
    }
    if (error instanceof HTTPError && error.response.status >= 300 && error.response.status < 400) {
      // The Location stays out of the message: it may name an internal address.
      return new CloudError({
        kind: "http",
        code: "redirect_refused",
        retryable: false,
        status: error.response.status,
        method,
        route,
        message: `${method} ${route} answered a redirect (HTTP ${error.response.status}); redirects are not followed: set apiUrl to the address the API answers at`,
      });
    }
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
    if (error instanceof TimeoutError || (deadline.aborted && !call.signal?.aborted)) {
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

function tooLarge(call: Pick<EndpointCall<unknown>, "method" | "route">, max: number): CloudError {
  return new CloudError({
    kind: "parse",
    code: "response_too_large",
    method: call.method,
    route: call.route,
    message: `${call.method} ${call.route} answered more than ${max} bytes (the answer size limit); the answer was cut off`,
  });
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
      // Never quoted: a body that is not JSON may be anything a foreign server holds.
      message: `${method} ${route} answered a body that is not JSON (${Buffer.byteLength(text)} bytes)`,
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
