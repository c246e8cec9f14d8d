// The typed cloud client: one method per endpoint of the GPU VM service (spec + docs/api-contract.md), grouped by
// area (endpoints/). This file composes them over the one way every call goes: the account's limits (bulkhead,
// token bucket), the transport, the credentials (with one renewal after a 401) and the capabilities beyond the
// spec. Every answer is parsed with the wire schemas; every failure is a CloudError.
import pino, { type Logger } from "pino";
import { normalizeApiUrl } from "../util/api-url.ts";
import type { Fence } from "../util/fence.ts";
import {
  ApiKeyAuthenticator,
  type Authenticator,
  type Credentials,
  PasswordAuthenticator,
  SessionAuthenticator,
  validateCredentials,
} from "./auth.ts";
import { type AccountBulkhead, DEFAULT_BULKHEAD, sharedBulkheadFor } from "./bulkhead.ts";
import { CapabilityRegistry, capabilityOf, DEFAULT_REPROBE_AFTER_MS } from "./capabilities.ts";
import { authEndpoints, organizationEndpoints, projectEndpoints, usageEndpoints } from "./endpoints/account.ts";
import { catalogueEndpoints } from "./endpoints/catalogue.ts";
import { diskEndpoints } from "./endpoints/disks.ts";
import { operationEndpoints } from "./endpoints/operations.ts";
import { vmEndpoints } from "./endpoints/vms.ts";
import { firewallRuleEndpoints, networkEndpoints } from "./endpoints/vpc.ts";
import { CloudError } from "./errors.ts";
import { credentialKeyOf, sharedBucketFor, type TokenBucket, type TokenBucketOptions } from "./rate-limit.ts";
import { DEFAULT_MAX_RESPONSE_BYTES, type EndpointCall, type RequestObserver, Transport } from "./transport.ts";

export interface CloudClientOptions {
  /** Base URL including the version segment, e.g. `https://api.example.com/v0.1`. */
  baseUrl: string;
  credentials: Credentials;
  /** The request timeout: the deadline of one call, its retries and waits included; default 10 s. */
  timeoutMs?: number;
  /** Retries per call (default 2); real backoff belongs to the operator's work queue. */
  retryLimit?: number;
  /**
   * The account's bulkhead (token bucket, reconcile admission, circuit breaker). Default: the one shared by every
   * client of this credential and URL, with `rateLimit` (10/s, burst 20) and `laneLimit` 3. `false`: none.
   */
  bulkhead?: AccountBulkhead | false;
  /** Overrides the bulkhead's token bucket for this client; `false` disables rate limiting. */
  rateLimiter?: TokenBucket | false;
  /** Answers longer than this are cut off while they stream in (default 4 MiB). */
  maxResponseBytes?: number;
  observer?: RequestObserver;
  logger?: Logger;
  /** First retry delay (default 250 ms), doubled per retry with jitter, capped at backoffLimitMs (5 s). */
  backoffBaseMs?: number;
  backoffLimitMs?: number;
  /** Retry-After above this (default 10 s) is not waited for in-process; the CloudError carries it instead. */
  maxRetryAfterMs?: number;
  /**
   * How long an endpoint beyond the spec that answered "not supported" is refused locally (no request) before
   * one call may try it again. Default 30 minutes.
   */
  capabilityReprobeMs?: number;
  /**
   * Checked right before each write (any method but GET) leaves, as its bytes are written: a refused write is
   * never sent and fails with CloudError code `fenced` (util/fence.ts). Default: none.
   */
  fence?: Fence;
  /** The User-Agent header of every request (the operator sends its replica's identity). Default: none. */
  userAgent?: string;
}

/**
 * The documented server limit (20 requests/s, burst 40 per credential), a tenth of the burst kept as headroom,
 * adapting to 429s and Retry-After (rate-limit.ts).
 */
export const DEFAULT_RATE_LIMIT: TokenBucketOptions = { ratePerSec: 20, burst: 40, reserve: 4, adaptive: {} };

export function createCloudClient(options: CloudClientOptions) {
  if (typeof options.baseUrl !== "string" || !/^https?:\/\//.test(options.baseUrl)) {
    throw new TypeError(`cloud baseUrl must be an http(s) URL, got ${JSON.stringify(options.baseUrl)}`);
  }
  const base = normalizeApiUrl(options.baseUrl);
  if (!base.ok) throw new TypeError(`cloud baseUrl ${base.problem}`);
  const credentials = validateCredentials(options.credentials);
  const logger = options.logger ?? pino({ level: "silent" });
  const accountKey = credentialKeyOf(credentials, options.baseUrl);
  const bulkhead =
    options.bulkhead === false
      ? undefined
      : (options.bulkhead ??
        sharedBulkheadFor(accountKey, { ...DEFAULT_BULKHEAD, laneLimit: 3, rateLimit: DEFAULT_RATE_LIMIT }));
  const rateLimiter =
    options.rateLimiter === false
      ? undefined
      : (options.rateLimiter ?? bulkhead?.rateLimiter ?? sharedBucketFor(accountKey, DEFAULT_RATE_LIMIT));
  const transport = new Transport({
    baseUrl: options.baseUrl,
    timeoutMs: options.timeoutMs ?? 10_000,
    retryLimit: options.retryLimit ?? 2,
    backoffBaseMs: options.backoffBaseMs ?? 250,
    backoffLimitMs: options.backoffLimitMs ?? 5_000,
    maxRetryAfterMs: options.maxRetryAfterMs ?? 10_000,
    rateLimiter,
    bulkhead,
    maxResponseBytes: options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
    observer: options.observer,
    logger,
    fence: options.fence,
    userAgent: options.userAgent,
  });
  const passwordAuth =
    "password" in credentials ? new PasswordAuthenticator(credentials, transport, transport.logger) : undefined;
  const authenticator: Authenticator =
    passwordAuth ??
    ("session" in credentials
      ? new SessionAuthenticator(credentials.session, transport)
      : new ApiKeyAuthenticator((credentials as { apiKey: string }).apiKey));

  const reprobeAfterMs = options.capabilityReprobeMs ?? DEFAULT_REPROBE_AFTER_MS;
  const capabilities = new CapabilityRegistry({
    reprobeAfterMs,
    // One line when this account's server turns out to lack (or have) an endpoint beyond the spec.
    onChange: (report) =>
      transport.logger.info(
        { capability: report.capability, state: report.state, detail: report.detail },
        report.state === "unsupported"
          ? `this server does not support ${report.description}; asked again every ${Math.round(reprobeAfterMs / 60_000)} min`
          : `this server supports ${report.description}`,
      ),
  });

  /**
   * Send a call. An endpoint beyond the spec goes through the capability registry: one this server lacks fails at
   * once without a request (until its rare re-probe), and every answer teaches the registry.
   */
  async function call<T>(endpoint: EndpointCall<T>): Promise<T> {
    const capability = endpoint.beyondSpec ? capabilityOf(endpoint.method, endpoint.route) : undefined;
    if (capability === undefined) return authorizedCall(endpoint);
    const refusal = capabilities.refusal(capability, endpoint.method, endpoint.route);
    if (refusal !== undefined) throw refusal;
    try {
      const answer = await authorizedCall(endpoint);
      capabilities.record(capability, "supported");
      return answer;
    } catch (error) {
      capabilities.record(capability, error);
      throw error;
    }
  }

  /** Send with the credential; after a 401, renew once and retry once (a 401 is refused before any effect). */
  async function authorizedCall<T>(endpoint: EndpointCall<T>): Promise<T> {
    const authorization = await authenticator.authorization(endpoint.signal);
    try {
      return await transport.send(endpoint, authorization);
    } catch (error) {
      if (!(error instanceof CloudError && error.status === 401)) throw error;
      if (!(await authenticator.recoverFromUnauthorized(authorization, endpoint.signal))) throw error;
      return transport.send(endpoint, await authenticator.authorization(endpoint.signal));
    }
  }

  return {
    auth: authEndpoints(call, transport, passwordAuth),
    organizations: organizationEndpoints(call),
    projects: projectEndpoints(call),
    catalogue: catalogueEndpoints(call),
    vms: vmEndpoints(call),
    operations: operationEndpoints(call),
    disks: diskEndpoints(call),
    networks: networkEndpoints(call),
    firewallRules: firewallRuleEndpoints(call),
    usage: usageEndpoints(call),
    /** What this account's server has of the endpoints beyond the spec (learned from its answers). */
    capabilities,
    /** The account's bulkhead (undefined when disabled): reconcile admission, breaker state. */
    bulkhead,
  };
}

export type CloudClient = ReturnType<typeof createCloudClient>;
