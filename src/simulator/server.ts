// The HTTP face of the simulator: Fastify routes for `/v0.1` (the cloud API) and `/_sim` (the admin API).
// Every API route goes through one wrapper that counts it, applies faults, rate limits, authenticates,
// checks project access, validates the body and sends (or, for a "lost response" fault, drops) the answer.
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import Fastify from "fastify";
import {
  ChangePasswordRequest,
  CreateDiskRequest,
  CreateFirewallRuleRequest,
  CreateNetworkRequest,
  CreateVmRequest,
  OPERATION_STATES,
  PatchFirewallRuleRequest,
  ResizeDiskRequest,
  TokenRequest,
  VM_LIST_DEFAULT_LIMIT,
  VM_LIST_MAX_LIMIT,
  VmActionRequest,
} from "../cloud/wire.ts";
import { registerAdminRoutes } from "./admin.ts";
import type { Principal } from "./auth.ts";
import { IMAGES, LOCATIONS, specItems } from "./catalogue.ts";
import { badRequest, forbidden, SimError } from "./errors.ts";
import { paginate, parseSort } from "./paging.ts";
import { servesRoute } from "./profiles.ts";
import type { WriteLogEntry } from "./request-log.ts";
import {
  ALL_METHODS,
  API_PREFIX,
  answerUnknownRoute,
  countRequest,
  listParam,
  type Method,
  noteMethod,
  type Params,
  type Query,
  type ServerDeps,
  sendError,
  stringParam,
  validate,
} from "./routing.ts";
import type { Family, Store } from "./store.ts";
import { publishedUsage } from "./usage-publication.ts";

interface HandlerInput {
  principal: Principal;
  params: Params;
  query: Query;
  body: unknown;
  projectId: string;
}

interface Reply {
  status?: number;
  body: unknown;
}

const DATE_PATTERN = /^\d{4}-\d{2}-\d{2}$/;

/** The operation an answer starts (`{ operation: { operation_id } }`), if any. */
function operationIdOf(body: unknown): string | undefined {
  const operation = typeof body === "object" && body !== null && "operation" in body ? body.operation : undefined;
  const id =
    typeof operation === "object" && operation !== null && "operation_id" in operation
      ? operation.operation_id
      : undefined;
  return typeof id === "string" ? id : undefined;
}

export function buildServer(deps: ServerDeps): FastifyInstance {
  const { store, auth, faults, rateLimiter, requestCounts } = deps;
  const app = Fastify({ logger: deps.logger, bodyLimit: deps.maxRequestBytes });

  // JSON bodies, tolerating an empty body (DELETE and PATCH clients sometimes send the header without one).
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_request, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    if (text.trim() === "") return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(badRequest("body: not valid JSON"), undefined);
    }
  });

  const count = (method: string, route: string) => countRequest(requestCounts, method, route);

  app.setErrorHandler((error, request, reply) => {
    if (error instanceof SimError) return sendError(reply, error);
    const status =
      typeof (error as { statusCode?: unknown }).statusCode === "number"
        ? (error as { statusCode: number }).statusCode
        : 500;
    if (status === 415) return sendError(reply, badRequest("Content-Type must be application/json"));
    if (status === 413) {
      const limit = `request body is too large: at most ${deps.maxRequestBytes} bytes`;
      return sendError(reply, new SimError(413, limit, { code: "payload_too_large" }));
    }
    if (status >= 400 && status < 500)
      return sendError(reply, new SimError(status, error instanceof Error ? error.message : "bad request"));
    request.log.error({ err: error }, "unexpected simulator error");
    return sendError(reply, new SimError(500, "internal error"));
  });

  const registered = new Map<string, Set<Method>>();
  /** Routes the profile does not serve: they answer as unknown routes do (never 405). */
  const unserved = new Map<string, Set<Method>>();

  function api(
    method: Method,
    url: string,
    handler: (input: HandlerInput) => Reply | Promise<Reply>,
    options: { auth?: boolean; project?: boolean } = {},
  ): void {
    const needsAuth = options.auth ?? true;
    const fullUrl = `${API_PREFIX}${url}`;
    if (!servesRoute(deps.profile, method, url)) {
      noteMethod(unserved, fullUrl, method);
      app.route({
        method,
        url: fullUrl,
        // Counted under its template (the admin counts show who asked), answered exactly as an unknown route.
        handler: async (request, reply) => {
          count(method, fullUrl);
          answerUnknownRoute(request, reply);
        },
      });
      return;
    }
    noteMethod(registered, fullUrl, method);
    app.route({
      method,
      url: fullUrl,
      handler: async (request: FastifyRequest, reply: FastifyReply) => {
        count(method, fullUrl);
        const logged = logWrite(method, url, request, reply);
        await injectFaults(method, url);
        const principal = authorize(request, needsAuth);
        const params = (request.params ?? {}) as Params;
        const projectId = params.projectId ?? "";
        if (options.project !== false && projectId !== "") checkProjectAccess(principal, projectId);
        const result = await handler({
          principal,
          params,
          query: (request.query ?? {}) as Query,
          body: request.body,
          projectId,
        });
        noteOperation(logged, result.body);
        if (faults.loseResponse(method, url)) {
          if (logged !== undefined) logged.status = "lost";
          // The change is made; the client never hears about it.
          reply.hijack();
          request.raw.socket.destroy();
          return;
        }
        return reply.code(result.status ?? 200).send(result.body);
      },
    });
  }

  /** A write (any method but GET) goes into the write log as it arrives; its status once answered. */
  function logWrite(
    method: string,
    route: string,
    request: FastifyRequest,
    reply: FastifyReply,
  ): WriteLogEntry | undefined {
    if (method === "GET") return undefined;
    const body: unknown = request.body;
    const action =
      typeof body === "object" && body !== null && "action" in body && typeof body.action === "string"
        ? body.action
        : undefined;
    const logged = deps.writeLog.push({
      at: Date.now(),
      method,
      route,
      path: request.url.split("?")[0]?.slice(API_PREFIX.length) ?? "",
      userAgent: String(request.headers["user-agent"] ?? ""),
      ...(action !== undefined ? { action } : {}),
    });
    reply.raw.once("finish", () => {
      logged.status ??= reply.statusCode;
    });
    return logged;
  }

  /** The operation a logged write started (known even when its answer is then lost). */
  function noteOperation(logged: WriteLogEntry | undefined, answer: unknown): void {
    const started = operationIdOf(answer);
    if (logged !== undefined && started !== undefined) logged.operationId = started;
  }

  async function injectFaults(method: string, url: string): Promise<void> {
    const latency = faults.latencyFor(method, url);
    if (latency > 0) await sleep(latency);
    const injected = faults.errorFor(method, url);
    if (injected === undefined) return;
    throw new SimError(injected.status, injected.message ?? `injected ${injected.status}`, {
      code: injected.code,
      ...(injected.status === 429 ? { retryAfterSeconds: injected.retry_after_seconds ?? 1 } : {}),
    });
  }

  /** Authenticate (when the route needs it) and take a rate-limit token for the credential. */
  function authorize(request: FastifyRequest, needsAuth: boolean): Principal {
    const principal: Principal = needsAuth
      ? auth.authenticate(request.headers.authorization)
      : { id: `ip:${request.ip}`, kind: "user", email: "", projectIds: [] };
    const wait = rateLimiter.take(principal.id);
    if (wait > 0) throw new SimError(429, "rate limit exceeded", { retryAfterSeconds: wait });
    return principal;
  }

  function checkProjectAccess(principal: Principal, projectId: string): void {
    store.records.project(projectId);
    if (!principal.projectIds.includes(projectId)) {
      throw forbidden(`this credential has no access to project ${projectId}`);
    }
  }

  const op = (record: Parameters<Store["operations"]["json"]>[0]): Reply => ({
    body: { operation: store.operations.json(record) },
  });

  // ---------------------------------------------------------------------------------------------------
  // Authentication and account
  // ---------------------------------------------------------------------------------------------------
  api(
    "POST",
    "/auth/token",
    ({ body }) => {
      const request = validate(TokenRequest, body);
      return {
        body:
          request.grant_type === "password"
            ? auth.signIn(request.email, request.password)
            : auth.refresh(request.refresh_token),
      };
    },
    { auth: false },
  );
  api("POST", "/auth/change-password", ({ principal, body }) => {
    if (principal.kind !== "user") throw forbidden("a project API key cannot change a password");
    const request = validate(ChangePasswordRequest, body);
    auth.changePassword(principal, request.current_password, request.new_password);
    return { body: { message: "password changed" } };
  });

  // ---------------------------------------------------------------------------------------------------
  // Organizations and projects
  // ---------------------------------------------------------------------------------------------------
  const visibleOrganizations = (principal: Principal) => {
    const ids = new Set(
      store.state.projects.filter((p) => principal.projectIds.includes(p.id)).map((p) => p.organization_id),
    );
    return store.state.organizations.filter((o) => ids.has(o.id));
  };
  api("GET", "/organizations", ({ principal }) => ({
    body: visibleOrganizations(principal).map((o) => ({
      id: o.id,
      name: o.name,
      payment_customer_id: o.payment_customer_id,
    })),
  }));
  api("GET", "/organizations/:organizationId/billing", ({ principal, params }) => {
    const org = store.records.organization(params.organizationId ?? "");
    if (!visibleOrganizations(principal).some((o) => o.id === org.id)) {
      throw forbidden(`this credential has no access to organization ${org.id}`);
    }
    return { body: { url: `https://billing.example.invalid/session/${org.id}/${randomUUID()}` } };
  });
  api("GET", "/projects", ({ principal }) => ({
    body: store.state.projects
      .filter((p) => principal.projectIds.includes(p.id))
      .map((p) => ({ id: p.id, name: p.name, version: "v0.1", organization_id: p.organization_id })),
  }));
  api("GET", "/projects/:projectId", ({ projectId }) => {
    const project = store.records.project(projectId);
    const org = store.records.organization(project.organization_id);
    return {
      body: {
        id: project.id,
        name: project.name,
        version: "v0.1",
        organization: {
          id: org.id,
          name: org.name,
          payment_customer_id: org.payment_customer_id,
          hasValidPaymentMethod: org.hasValidPaymentMethod,
        },
      },
    };
  });

  // ---------------------------------------------------------------------------------------------------
  // Catalogue
  // ---------------------------------------------------------------------------------------------------
  api("GET", "/projects/:projectId/locations", () => ({ body: { items: [...LOCATIONS] } }));
  api("GET", "/projects/:projectId/images", () => ({ body: { items: IMAGES } }));
  api("GET", "/projects/:projectId/specs", () => ({ body: { items: specItems() } }));
  api("GET", "/projects/:projectId/availabilities", ({ query }) => ({
    body: { items: store.capacity.availabilities(stringParam(query, "product_name"), stringParam(query, "location")) },
  }));

  // ---------------------------------------------------------------------------------------------------
  // VMs
  // ---------------------------------------------------------------------------------------------------
  api("POST", "/projects/:projectId/vms", ({ projectId, body }) =>
    op(store.vms.create(projectId, validate(CreateVmRequest, body))),
  );
  api("GET", "/projects/:projectId/vms", ({ projectId, query }) => {
    const sort = parseSort(stringParam(query, "sort"));
    const limitText = stringParam(query, "limit");
    const limit = limitText === undefined ? VM_LIST_DEFAULT_LIMIT : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > VM_LIST_MAX_LIMIT) {
      throw badRequest(`limit: must be a whole number from 1 to ${VM_LIST_MAX_LIMIT}`);
    }
    const filters = {
      ids: listParam(query, "ids"),
      names: listParam(query, "names"),
      types: listParam(query, "types"),
      locations: listParam(query, "locations"),
      states: listParam(query, "states")?.map((s) => (s.startsWith("STATE_") ? s : `STATE_${s}`)),
    };
    const vms = store.vms
      .list(projectId)
      .filter(
        (vm) =>
          (filters.ids === undefined || filters.ids.includes(vm.id)) &&
          (filters.names === undefined || filters.names.includes(vm.name)) &&
          (filters.types === undefined || filters.types.includes(vm.type)) &&
          (filters.locations === undefined || filters.locations.includes(vm.location)) &&
          (filters.states === undefined || filters.states.includes(vm.state)),
      );
    const keyed = vms.map((vm) => ({
      id: vm.id,
      vm,
      sortKey: sort.field === "name" ? vm.name : sort.field === "created_at" ? vm.createdAtMs : vm.updatedAtMs,
    }));
    const page = paginate(keyed, sort, limit, stringParam(query, "next_token"), stringParam(query, "prev_token"));
    return {
      body: {
        items: page.items.map((k) => store.vms.json(k.vm)),
        next_page_token: page.next_page_token,
        prev_page_token: page.prev_page_token,
      },
    };
  });

  // Operation families (static `operations` segments win over `:id` in the router).
  const families: [Family, string][] = [
    ["vm", "vms"],
    ["disk", "disks"],
    ["network", "vpc/networks"],
    ["firewall-rule", "vpc/firewall-rules"],
  ];
  for (const [family, path] of families) {
    api("GET", `/projects/:projectId/${path}/operations`, ({ projectId, query }) => {
      const state = stringParam(query, "state");
      if (state !== undefined && !(OPERATION_STATES as readonly string[]).includes(state)) {
        throw badRequest(`state: must be one of ${OPERATION_STATES.join(", ")}`);
      }
      const bound = stringParam(query, "lower_time_bound");
      const lowerTimeBoundMs = bound === undefined ? undefined : Date.parse(bound);
      if (lowerTimeBoundMs !== undefined && Number.isNaN(lowerTimeBoundMs)) {
        throw badRequest("lower_time_bound: must be a timestamp such as 2026-11-21T00:00:00Z");
      }
      const items = store.operations
        .list(projectId, family, { resourceId: stringParam(query, "resource_id"), state, lowerTimeBoundMs })
        .map((record) => store.operations.json(record));
      return { body: { items } };
    });
    api("GET", `/projects/:projectId/${path}/operations/:operationId`, ({ projectId, params }) => ({
      body: store.operations.json(store.operations.get(projectId, family, params.operationId ?? "")),
    }));
  }

  api("GET", "/projects/:projectId/vms/:vmId", ({ projectId, params }) => ({
    body: store.vms.json(store.vms.get(projectId, params.vmId ?? "")),
  }));
  api("PATCH", "/projects/:projectId/vms/:vmId", ({ projectId, params, body }) =>
    op(store.vms.action(projectId, params.vmId ?? "", validate(VmActionRequest, body))),
  );
  api("DELETE", "/projects/:projectId/vms/:vmId", ({ projectId, params }) =>
    op(store.vms.delete(projectId, params.vmId ?? "")),
  );

  // ---------------------------------------------------------------------------------------------------
  // Disks
  // ---------------------------------------------------------------------------------------------------
  api("POST", "/projects/:projectId/disks", ({ projectId, body }) =>
    op(store.disks.create(projectId, validate(CreateDiskRequest, body))),
  );
  api("GET", "/projects/:projectId/disks", ({ projectId }) => ({
    body: { items: store.disks.list(projectId).map((d) => store.disks.json(d)) },
  }));
  api("GET", "/projects/:projectId/disks/:diskId", ({ projectId, params }) => ({
    body: store.disks.json(store.disks.get(projectId, params.diskId ?? "")),
  }));
  api("PATCH", "/projects/:projectId/disks/:diskId", ({ projectId, params, body }) =>
    op(store.disks.resize(projectId, params.diskId ?? "", validate(ResizeDiskRequest, body).size)),
  );
  api("DELETE", "/projects/:projectId/disks/:diskId", ({ projectId, params }) =>
    op(store.disks.delete(projectId, params.diskId ?? "")),
  );

  // ---------------------------------------------------------------------------------------------------
  // Networks and firewall rules
  // ---------------------------------------------------------------------------------------------------
  api("POST", "/projects/:projectId/vpc/networks", ({ projectId, body }) =>
    op(store.networks.create(projectId, validate(CreateNetworkRequest, body))),
  );
  api("GET", "/projects/:projectId/vpc/networks", ({ projectId }) => ({
    body: { items: store.networks.list(projectId).map((n) => store.networks.json(n)) },
  }));
  api("GET", "/projects/:projectId/vpc/networks/:networkId", ({ projectId, params }) => ({
    body: store.networks.json(store.networks.get(projectId, params.networkId ?? "")),
  }));
  api("DELETE", "/projects/:projectId/vpc/networks/:networkId", ({ projectId, params }) =>
    op(store.networks.delete(projectId, params.networkId ?? "")),
  );
  api("POST", "/projects/:projectId/vpc/firewall-rules", ({ projectId, body }) =>
    op(store.firewallRules.create(projectId, validate(CreateFirewallRuleRequest, body))),
  );
  api("GET", "/projects/:projectId/vpc/firewall-rules", ({ projectId }) => ({
    body: { items: store.firewallRules.list(projectId).map((r) => store.firewallRules.json(r)) },
  }));
  api("GET", "/projects/:projectId/vpc/firewall-rules/:ruleId", ({ projectId, params }) => ({
    body: store.firewallRules.json(store.firewallRules.get(projectId, params.ruleId ?? "")),
  }));
  api("PATCH", "/projects/:projectId/vpc/firewall-rules/:ruleId", ({ projectId, params, body }) =>
    op(store.firewallRules.patch(projectId, params.ruleId ?? "", validate(PatchFirewallRuleRequest, body))),
  );
  api("DELETE", "/projects/:projectId/vpc/firewall-rules/:ruleId", ({ projectId, params }) =>
    op(store.firewallRules.delete(projectId, params.ruleId ?? "")),
  );

  // ---------------------------------------------------------------------------------------------------
  // Usage
  // ---------------------------------------------------------------------------------------------------
  api("GET", "/projects/:projectId/usage", ({ projectId, query }) => {
    const startDate = stringParam(query, "start_date");
    const endDate = stringParam(query, "end_date");
    for (const [name, value] of [
      ["start_date", startDate],
      ["end_date", endDate],
    ] as const) {
      if (value !== undefined && !DATE_PATTERN.test(value)) throw badRequest(`${name}: must be YYYY-MM-DD`);
    }
    const accrued = store.capacity.usage(projectId, {
      resourceTypes: listParam(query, "resource_types"),
      regions: listParam(query, "regions"),
      startDate,
      endDate,
    });
    if (deps.usagePublication === "live") return { body: { items: accrued } };
    return { body: { items: publishedUsage(accrued, store.records.now(), deps.usageRefreshDelayMs) } };
  });

  registerAdminRoutes(app, deps, registered);

  // 405 for a known path with another method; 404 for everything else.
  for (const [url, methods] of registered) {
    const others = ALL_METHODS.filter((m) => !methods.has(m) && !unserved.get(url)?.has(m));
    if (others.length === 0) continue;
    app.route({
      method: others,
      url,
      handler: async (request, reply) => {
        count(request.method, url);
        reply.header("allow", [...methods].join(", "));
        return sendError(reply, new SimError(405, `${request.method} is not allowed on ${url}`));
      },
    });
  }
  app.setNotFoundHandler((request, reply) => {
    count(request.method, "(unmatched)");
    answerUnknownRoute(request, reply);
  });
  return app;
}
