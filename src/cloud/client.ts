// The typed cloud client: one method per endpoint of the GPU VM service (spec + docs/api-contract.md),
// grouped by area. Every answer is parsed with the wire schemas; every failure is a CloudError.
import pino, { type Logger } from "pino";
import { z } from "zod";
import { normalizeApiUrl } from "../util/api-url.ts";
import type { Fence } from "../util/fence.ts";
import { isRecord } from "../util/is-record.ts";
import {
  ApiKeyAuthenticator,
  type Authenticator,
  type Credentials,
  PasswordAuthenticator,
  requestToken,
  SessionAuthenticator,
  validateCredentials,
} from "./auth.ts";
import { type AccountBulkhead, DEFAULT_BULKHEAD, sharedBulkheadFor } from "./bulkhead.ts";
import { CapabilityRegistry, capabilityOf, DEFAULT_REPROBE_AFTER_MS } from "./capabilities.ts";
import { CloudError } from "./errors.ts";
import { credentialKeyOf, sharedBucketFor, type TokenBucket, type TokenBucketOptions } from "./rate-limit.ts";
import {
  DEFAULT_MAX_RESPONSE_BYTES,
  type EndpointCall,
  type HttpMethod,
  type RequestObserver,
  Transport,
} from "./transport.ts";
import {
  AvailabilityItem,
  BillingLink,
  ChangePasswordRequest,
  CreateDiskRequest,
  CreateFirewallRuleRequest,
  CreateNetworkRequest,
  CreateVmRequest,
  Disk,
  type DiskRef,
  FirewallRule,
  Image,
  itemsOf,
  type ListOperationsQuery,
  type ListVmsQuery,
  MessageResponse,
  OPERATION_FAMILY_PATH,
  Operation,
  OperationEnvelope,
  type OperationFamily,
  Organization,
  PatchFirewallRuleRequest,
  Project,
  ProjectListItem,
  ResizeDiskRequest,
  SpecItem,
  StringItems,
  type TokenResponse,
  UsageItem,
  type UsageQuery,
  VM_LIST_MAX_LIMIT,
  VM_SORTS,
  Vm,
  type VmActionRequest,
  VmActionRequest as VmActionRequestSchema,
  VmListPage,
  VpcNetwork,
} from "./wire.ts";

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

export interface CallOptions {
  signal?: AbortSignal;
}

type SignIn = { email: string; password: string };

/**
 * Accept the spec's bare array and the `{ items }` form alike. The array is wrapped (not the object unwrapped)
 * so that a parse failure names the field as `items.3.state` in both cases.
 */
function listOf<T extends z.ZodType>(item: T) {
  return z
    .preprocess((value) => (Array.isArray(value) ? { items: value } : value), itemsOf(item))
    .transform((v) => v.items);
}

/** Create/change endpoints answer `{ operation }`; a bare Operation is tolerated too (wrapped, same paths). */
const OperationAnswer = z
  .preprocess((value) => (isRecord(value) && !("operation" in value) ? { operation: value } : value), OperationEnvelope)
  .transform((envelope): Operation => envelope.operation);

const Items = {
  organizations: listOf(Organization),
  projects: listOf(ProjectListItem),
  images: listOf(Image),
  specs: listOf(SpecItem),
  availabilities: listOf(AvailabilityItem),
  operations: listOf(Operation),
  disks: listOf(Disk),
  networks: listOf(VpcNetwork),
  firewallRules: listOf(FirewallRule),
  usage: listOf(UsageItem),
};

const id = (value: string): string => encodeURIComponent(value);
const csv = (values: readonly string[] | undefined): string | undefined =>
  values && values.length > 0 ? values.join(",") : undefined;

/** A request the client refuses to send. Kind "parse" with code invalid_request: terminal, never retried. */
function invalidRequest(method: HttpMethod, route: string, message: string, fieldPath = ""): CloudError {
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

function validateBody<T extends z.ZodType>(schema: T, body: unknown, method: HttpMethod, route: string): z.output<T> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const fieldPath = issue ? issue.path.map(String).join(".") : "";
  throw invalidRequest(method, route, `${fieldPath || "(body)"}: ${issue?.message ?? "invalid"}`, fieldPath);
}

function requireId(value: string, name: string, method: HttpMethod, route: string): string {
  if (typeof value !== "string" || value.trim() === "")
    throw invalidRequest(method, route, `${name} must be a non-empty string`);
  // `.` and `..` survive encodeURIComponent and would be resolved as path segments.
  if (value === "." || value === "..") throw invalidRequest(method, route, `${name} must not be "." or ".."`);
  return id(value);
}

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

  const projectRoute = (suffix: string): string => `/projects/:projectId${suffix}`;

  const auth = {
    /** Password grant. Defaults to the client's own user. */
    async token(signIn?: SignIn, opts: CallOptions = {}): Promise<TokenResponse> {
      const user = signIn ?? passwordAuth?.signIn();
      if (!user) throw invalidRequest("POST", "/auth/token", "email and password are needed for a password grant");
      const grant = { grant_type: "password" as const, email: user.email, password: user.password };
      return requestToken(transport, grant, opts.signal);
    },
    async refresh(refreshToken: string, opts: CallOptions = {}): Promise<TokenResponse> {
      if (!refreshToken) throw invalidRequest("POST", "/auth/token", "refresh token must be non-empty");
      return requestToken(transport, { grant_type: "refresh_token", refresh_token: refreshToken }, opts.signal);
    },
    async changePassword(request: ChangePasswordRequest, opts: CallOptions = {}): Promise<{ message: string }> {
      const route = "/auth/change-password";
      const body = validateBody(ChangePasswordRequest, request, "POST", route);
      const answer = await call({
        method: "POST",
        route,
        path: "auth/change-password",
        body,
        schema: MessageResponse,
        sensitive: true,
        signal: opts.signal,
      });
      passwordAuth?.passwordChanged(body.new_password);
      return answer;
    },
  };

  const organizations = {
    list: async (opts: CallOptions = {}) =>
      call({
        method: "GET",
        route: "/organizations",
        path: "organizations",
        schema: Items.organizations,
        signal: opts.signal,
      }),
    billingLink: async (organizationId: string, opts: CallOptions = {}) => {
      const route = "/organizations/:organizationId/billing";
      const org = requireId(organizationId, "organizationId", "GET", route);
      return call({
        method: "GET",
        route,
        path: `organizations/${org}/billing`,
        schema: BillingLink,
        signal: opts.signal,
      });
    },
  };

  const projects = {
    list: async (opts: CallOptions = {}) =>
      call({ method: "GET", route: "/projects", path: "projects", schema: Items.projects, signal: opts.signal }),
    get: async (projectId: string, opts: CallOptions = {}) => {
      const route = projectRoute("");
      const p = requireId(projectId, "projectId", "GET", route);
      return call({ method: "GET", route, path: `projects/${p}`, schema: Project, signal: opts.signal });
    },
  };

  /** A GET below a project: `suffix` is the template tail, `tail(p)` the concrete path. */
  function projectGet<T>(
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

  const catalogue = {
    async locations(projectId: string, opts: CallOptions = {}): Promise<string[]> {
      const { p, endpoint } = projectGet(projectId, "/locations", StringItems, opts);
      return (await call({ ...endpoint, path: `projects/${p}/locations` })).items;
    },
    async images(projectId: string, opts: CallOptions = {}) {
      const { p, endpoint } = projectGet(projectId, "/images", Items.images, opts);
      return call({ ...endpoint, path: `projects/${p}/images` });
    },
    async specs(projectId: string, opts: CallOptions = {}) {
      const { p, endpoint } = projectGet(projectId, "/specs", Items.specs, opts);
      return call({ ...endpoint, path: `projects/${p}/specs` });
    },
    async availabilities(
      projectId: string,
      query: { product_name?: string; location?: string } = {},
      opts: CallOptions = {},
    ) {
      const { p, endpoint } = projectGet(projectId, "/availabilities", Items.availabilities, opts);
      const q = { product_name: query.product_name, location: query.location };
      return call({ ...endpoint, path: `projects/${p}/availabilities`, query: q });
    },
  };

  function vmListQuery(query: ListVmsQuery, route: string): Record<string, string | undefined> {
    if (
      query.limit !== undefined &&
      (!Number.isInteger(query.limit) || query.limit < 1 || query.limit > VM_LIST_MAX_LIMIT)
    ) {
      throw invalidRequest("GET", route, `limit must be a whole number from 1 to ${VM_LIST_MAX_LIMIT}`, "limit");
    }
    if (query.sort !== undefined && !(VM_SORTS as readonly string[]).includes(query.sort)) {
      throw invalidRequest("GET", route, `sort must be one of ${VM_SORTS.join(", ")}`, "sort");
    }
    return {
      ids: csv(query.ids),
      names: csv(query.names),
      types: csv(query.types),
      locations: csv(query.locations),
      states: csv(query.states),
      limit: query.limit === undefined ? undefined : String(query.limit),
      sort: query.sort,
      next_token: query.next_token || undefined,
      prev_token: query.prev_token || undefined,
    };
  }

  /** A write below a project answering an operation. */
  function projectWrite(
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

  const vms = {
    async create(projectId: string, request: CreateVmRequest, opts: CallOptions = {}): Promise<Operation> {
      const body = validateBody(CreateVmRequest, request, "POST", projectRoute("/vms"));
      return projectWrite("POST", projectId, "/vms", () => "vms", body, opts);
    },
    async list(projectId: string, query: ListVmsQuery = {}, opts: CallOptions = {}): Promise<VmListPage> {
      const { p, route, endpoint } = projectGet(projectId, "/vms", VmListPage, opts);
      return call({ ...endpoint, path: `projects/${p}/vms`, query: vmListQuery(query, route) });
    },
    /** Every VM matching the query, following `next_page_token` until it is empty. */
    async *listAll(
      projectId: string,
      query: ListVmsQuery = {},
      opts: CallOptions = {},
    ): AsyncGenerator<Vm, void, undefined> {
      const seen = new Set<string>();
      let nextToken = query.next_token;
      for (;;) {
        const page = await vms.list(projectId, { ...query, next_token: nextToken, prev_token: undefined }, opts);
        yield* page.items;
        if (!page.next_page_token) return;
        if (seen.has(page.next_page_token)) {
          throw new CloudError({
            kind: "parse",
            method: "GET",
            route: projectRoute("/vms"),
            fieldPath: "next_page_token",
            message: `GET ${projectRoute("/vms")} answered a page token already followed: the server loops`,
          });
        }
        seen.add(page.next_page_token);
        nextToken = page.next_page_token;
      }
    },
    async get(projectId: string, vmId: string, opts: CallOptions = {}): Promise<Vm> {
      const { p, route, endpoint } = projectGet(projectId, "/vms/:vmId", Vm, opts);
      return call({ ...endpoint, path: `projects/${p}/vms/${requireId(vmId, "vmId", "GET", route)}` });
    },
    async action(
      projectId: string,
      vmId: string,
      request: VmActionRequest,
      opts: CallOptions = {},
    ): Promise<Operation> {
      const route = projectRoute("/vms/:vmId");
      const body = validateBody(VmActionRequestSchema, request, "PATCH", route);
      const vm = requireId(vmId, "vmId", "PATCH", route);
      return projectWrite("PATCH", projectId, "/vms/:vmId", () => `vms/${vm}`, body, opts);
    },
    start: async (projectId: string, vmId: string, opts: CallOptions = {}) =>
      vms.action(projectId, vmId, { action: "START" }, opts),
    stop: async (projectId: string, vmId: string, opts: CallOptions = {}) =>
      vms.action(projectId, vmId, { action: "STOP" }, opts),
    reset: async (projectId: string, vmId: string, opts: CallOptions = {}) =>
      vms.action(projectId, vmId, { action: "RESET" }, opts),
    /** UPDATE: a new type (same family, VM stopped) and/or the complete list of data disks to have attached. */
    async update(
      projectId: string,
      vmId: string,
      change: { type?: string; disks?: DiskRef[] },
      opts: CallOptions = {},
    ) {
      return vms.action(projectId, vmId, { action: "UPDATE", ...change }, opts);
    },
    async terminate(projectId: string, vmId: string, opts: CallOptions = {}): Promise<Operation> {
      const vm = requireId(vmId, "vmId", "DELETE", projectRoute("/vms/:vmId"));
      return projectWrite("DELETE", projectId, "/vms/:vmId", () => `vms/${vm}`, undefined, opts);
    },
  };

  const operations = {
    async list(projectId: string, family: OperationFamily, query: ListOperationsQuery = {}, opts: CallOptions = {}) {
      const familyPath = familyPathOf(family);
      const { p, endpoint } = projectGet(
        projectId,
        `/${familyPath}/operations`,
        Items.operations,
        opts,
        family !== "vm",
      );
      const q = { resource_id: query.resource_id, state: query.state, lower_time_bound: query.lower_time_bound };
      return call({ ...endpoint, path: `projects/${p}/${familyPath}/operations`, query: q, collection: true });
    },
    async get(
      projectId: string,
      family: OperationFamily,
      operationId: string,
      opts: CallOptions = {},
    ): Promise<Operation> {
      const familyPath = familyPathOf(family);
      const { p, route, endpoint } = projectGet(
        projectId,
        `/${familyPath}/operations/:operationId`,
        Operation,
        opts,
        family !== "vm",
      );
      const op = requireId(operationId, "operationId", "GET", route);
      return call({ ...endpoint, path: `projects/${p}/${familyPath}/operations/${op}` });
    },
  };

  const disks = {
    async create(projectId: string, request: CreateDiskRequest, opts: CallOptions = {}): Promise<Operation> {
      const body = validateBody(CreateDiskRequest, request, "POST", projectRoute("/disks"));
      return projectWrite("POST", projectId, "/disks", () => "disks", body, opts);
    },
    async list(projectId: string, opts: CallOptions = {}): Promise<Disk[]> {
      const { p, endpoint } = projectGet(projectId, "/disks", Items.disks, opts);
      return call({ ...endpoint, path: `projects/${p}/disks` });
    },
    async get(projectId: string, diskId: string, opts: CallOptions = {}): Promise<Disk> {
      const { p, route, endpoint } = projectGet(projectId, "/disks/:diskId", Disk, opts);
      return call({ ...endpoint, path: `projects/${p}/disks/${requireId(diskId, "diskId", "GET", route)}` });
    },
    async resize(projectId: string, diskId: string, size: string, opts: CallOptions = {}): Promise<Operation> {
      const route = projectRoute("/disks/:diskId");
      const body = validateBody(ResizeDiskRequest, { size }, "PATCH", route);
      const disk = requireId(diskId, "diskId", "PATCH", route);
      return projectWrite("PATCH", projectId, "/disks/:diskId", () => `disks/${disk}`, body, opts);
    },
    async delete(projectId: string, diskId: string, opts: CallOptions = {}): Promise<Operation> {
      const disk = requireId(diskId, "diskId", "DELETE", projectRoute("/disks/:diskId"));
      return projectWrite("DELETE", projectId, "/disks/:diskId", () => `disks/${disk}`, undefined, opts);
    },
  };

  const networks = {
    async create(projectId: string, request: CreateNetworkRequest, opts: CallOptions = {}): Promise<Operation> {
      const body = validateBody(CreateNetworkRequest, request, "POST", projectRoute("/vpc/networks"));
      return projectWrite("POST", projectId, "/vpc/networks", () => "vpc/networks", body, opts);
    },
    /** Beyond the spec: the spec says the list exists but shows neither its path nor its answer. */
    async list(projectId: string, opts: CallOptions = {}): Promise<VpcNetwork[]> {
      const { p, endpoint } = projectGet(projectId, "/vpc/networks", Items.networks, opts, true);
      return call({ ...endpoint, path: `projects/${p}/vpc/networks`, collection: true });
    },
    async get(projectId: string, networkId: string, opts: CallOptions = {}): Promise<VpcNetwork> {
      const { p, route, endpoint } = projectGet(projectId, "/vpc/networks/:networkId", VpcNetwork, opts);
      return call({
        ...endpoint,
        path: `projects/${p}/vpc/networks/${requireId(networkId, "networkId", "GET", route)}`,
      });
    },
    async delete(projectId: string, networkId: string, opts: CallOptions = {}): Promise<Operation> {
      const net = requireId(networkId, "networkId", "DELETE", projectRoute("/vpc/networks/:networkId"));
      return projectWrite(
        "DELETE",
        projectId,
        "/vpc/networks/:networkId",
        () => `vpc/networks/${net}`,
        undefined,
        opts,
        true,
      );
    },
  };

  const firewallRules = {
    async create(projectId: string, request: CreateFirewallRuleRequest, opts: CallOptions = {}): Promise<Operation> {
      const body = validateBody(CreateFirewallRuleRequest, request, "POST", projectRoute("/vpc/firewall-rules"));
      return projectWrite("POST", projectId, "/vpc/firewall-rules", () => "vpc/firewall-rules", body, opts);
    },
    async list(projectId: string, opts: CallOptions = {}): Promise<FirewallRule[]> {
      const { p, endpoint } = projectGet(projectId, "/vpc/firewall-rules", Items.firewallRules, opts);
      return call({ ...endpoint, path: `projects/${p}/vpc/firewall-rules` });
    },
    async get(projectId: string, ruleId: string, opts: CallOptions = {}): Promise<FirewallRule> {
      const { p, route, endpoint } = projectGet(projectId, "/vpc/firewall-rules/:ruleId", FirewallRule, opts, true);
      return call({
        ...endpoint,
        path: `projects/${p}/vpc/firewall-rules/${requireId(ruleId, "ruleId", "GET", route)}`,
      });
    },
    async patch(
      projectId: string,
      ruleId: string,
      change: PatchFirewallRuleRequest,
      opts: CallOptions = {},
    ): Promise<Operation> {
      const route = projectRoute("/vpc/firewall-rules/:ruleId");
      const body = validateBody(PatchFirewallRuleRequest, change, "PATCH", route);
      const rule = requireId(ruleId, "ruleId", "PATCH", route);
      return projectWrite(
        "PATCH",
        projectId,
        "/vpc/firewall-rules/:ruleId",
        () => `vpc/firewall-rules/${rule}`,
        body,
        opts,
        true,
      );
    },
    async delete(projectId: string, ruleId: string, opts: CallOptions = {}): Promise<Operation> {
      const rule = requireId(ruleId, "ruleId", "DELETE", projectRoute("/vpc/firewall-rules/:ruleId"));
      return projectWrite(
        "DELETE",
        projectId,
        "/vpc/firewall-rules/:ruleId",
        () => `vpc/firewall-rules/${rule}`,
        undefined,
        opts,
        true,
      );
    },
  };

  const usage = {
    async list(projectId: string, query: UsageQuery = {}, opts: CallOptions = {}): Promise<UsageItem[]> {
      const { p, route, endpoint } = projectGet(projectId, "/usage", Items.usage, opts);
      for (const key of ["start_date", "end_date"] as const) {
        const value = query[key];
        if (value !== undefined && !/^\d{4}-\d{2}-\d{2}$/.test(value)) {
          throw invalidRequest("GET", route, `${key} must be YYYY-MM-DD`, key);
        }
      }
      const q = {
        resource_types: csv(query.resource_types),
        regions: csv(query.regions),
        start_date: query.start_date,
        end_date: query.end_date,
      };
      return call({ ...endpoint, path: `projects/${p}/usage`, query: q });
    },
  };

  return {
    auth,
    organizations,
    projects,
    catalogue,
    vms,
    operations,
    disks,
    networks,
    firewallRules,
    usage,
    /** What this account's server has of the endpoints beyond the spec (learned from its answers). */
    capabilities,
    /** The account's bulkhead (undefined when disabled): reconcile admission, breaker state. */
    bulkhead,
  };
}

export type CloudClient = ReturnType<typeof createCloudClient>;

function familyPathOf(family: OperationFamily): string {
  const path = OPERATION_FAMILY_PATH[family];
  if (!path) throw new TypeError(`unknown operation family ${JSON.stringify(family)}`);
  return path;
}
