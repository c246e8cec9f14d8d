// The admin API under `/_sim`: faults, state, reset, request counts, capacity, settings, tenants, drift (changing
// cloud resources behind the operator's back) and the node-join emulation's clusters. No authentication: it
// listens where the simulator listens.
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { PatchFirewallRuleRequest, VM_STATES, VM_TYPES } from "../cloud/wire.ts";
import type { Capacity } from "./catalogue.ts";
import { LOCATIONS } from "./catalogue.ts";
import { badRequest, SimError } from "./errors.ts";
import { FaultConfigSchema } from "./faults.ts";
import { NodeJoinConfigError } from "./node-join.ts";
import { type Method, noteMethod, type ServerDeps, validate } from "./routing.ts";
import { addTenant } from "./seed.ts";
import { RESOURCE_KINDS, type ResourceKind } from "./store.ts";

export const ADMIN_PREFIX = "/_sim";

/**
 * `GET /capacity`'s shape: per location and type, `capacity` and `used`. A PUT takes the same shape (merged over
 * the capacity), so that what was read can be edited and written back; `used` is the simulator's to count and is
 * ignored when written.
 */
const CapacityEntry = z.strictObject({ capacity: z.number().int().min(0), used: z.number().int().min(0).optional() });
const CapacityUpdate = z.partialRecord(z.enum(LOCATIONS), z.partialRecord(z.enum(VM_TYPES), CapacityEntry));
const VmStateUpdate = z.strictObject({ state: z.enum(VM_STATES) });
const TenantRequest = z.strictObject({
  name: z.string().min(1),
  api_key: z.string().min(8).optional(),
  user: z.strictObject({ email: z.string().min(3), password: z.string().min(1) }).optional(),
  payment_method_valid: z.boolean().optional(),
});
const PaymentMethodUpdate = z.strictObject({ valid: z.boolean() });
const WorkloadClusterUpdate = z.strictObject({
  kubeconfig: z
    .string()
    .min(1)
    .max(256 * 1024),
});
const BulkVms = z.strictObject({
  vms: z
    .array(
      z.strictObject({
        name: z.string().min(1).max(63),
        type: z.enum(VM_TYPES).default("a40.1x"),
        location: z.enum(LOCATIONS).default("us-east1-a"),
        state: z.enum(VM_STATES).optional(),
      }),
    )
    .max(10_000),
});
const Settings = z.strictObject({
  latency_ms: z.number().int().min(0).optional(),
  duplicate_names: z.enum(["conflict", "operation"]).optional(),
  token_ttl_seconds: z.number().int().min(1).optional(),
  unknown_operation_status: z.union([z.literal(403), z.literal(404)]).optional(),
  /** How long a finished operation stays listed and readable; null keeps it. */
  operation_retention_ms: z.union([z.number().int().min(0), z.null()]).optional(),
  /** Whether availability items carry `available_count`. */
  availability_counts: z.boolean().optional(),
  rate_limit: z
    .union([z.literal(false), z.strictObject({ rate_per_sec: z.number().positive(), burst: z.number().int().min(1) })])
    .optional(),
});

/** Declares one admin route (`url` below `/_sim`): its handler's value is the JSON answer. */
type AdminRoute = (method: Method, url: string, handler: (request: FastifyRequest) => unknown) => void;

const param = (request: FastifyRequest, name: string): string => (request.params as Record<string, string>)[name] ?? "";

export function registerAdminRoutes(app: FastifyInstance, deps: ServerDeps, registered: Map<string, Set<Method>>) {
  const admin: AdminRoute = (method, url, handler) => {
    const fullUrl = `${ADMIN_PREFIX}${url}`;
    noteMethod(registered, fullUrl, method);
    app.route({
      method,
      url: fullUrl,
      handler: async (request: FastifyRequest, reply: FastifyReply) => reply.send(await handler(request)),
    });
  };
  faultAndRequestRoutes(admin, deps);
  capacityRoutes(admin, deps);
  settingsRoutes(admin, deps);
  tenantRoutes(admin, deps);
  driftRoutes(admin, deps);
  nodeJoinRoutes(admin, deps);
}

/** The faults, the state (read, reset) and the requests received (counts and the write log). */
function faultAndRequestRoutes(admin: AdminRoute, deps: ServerDeps): void {
  const { store, faults, requestCounts } = deps;
  admin("GET", "/faults", () => faults.config);
  admin("GET", "/faults/fired", () => faults.fired());
  admin("DELETE", "/faults/fired", () => {
    faults.resetFired();
    return faults.fired();
  });
  admin("PUT", "/faults", (request) => {
    faults.replace(validate(FaultConfigSchema, request.body));
    return faults.config;
  });
  admin("DELETE", "/faults", () => {
    faults.clear();
    return faults.config;
  });

  admin("GET", "/state", () => store.snapshot());
  admin("POST", "/reset", () => {
    deps.reset();
    return { message: "state reset" };
  });

  admin("GET", "/requests", () => ({ counts: Object.fromEntries([...requestCounts].sort()) }));
  admin("DELETE", "/requests", () => {
    requestCounts.clear();
    deps.writeLog.clear();
    return { counts: {} };
  });
  // Every write received, in order, with its sender (User-Agent) and answer: who acted when.
  admin("GET", "/requests/log", () => ({ writes: deps.writeLog.entries() }));
}

/** Capacity per location and type: read with what is used, written over the current one. */
function capacityRoutes(admin: AdminRoute, { store }: ServerDeps): void {
  const capacityView = () => {
    const view: Record<string, Record<string, { capacity: number; used: number }>> = {};
    for (const location of LOCATIONS) {
      const perType: Record<string, { capacity: number; used: number }> = {};
      for (const type of VM_TYPES) {
        perType[type] = {
          capacity: store.capacity.capacityOf(location, type),
          used: store.capacity.usedCapacity(location, type),
        };
      }
      view[location] = perType;
    }
    return view;
  };
  admin("GET", "/capacity", capacityView);
  admin("PUT", "/capacity", (request) => {
    const update = validate(CapacityUpdate, request.body);
    const capacity: Capacity = {};
    for (const [location, perType] of Object.entries(update)) {
      capacity[location] = Object.fromEntries(Object.entries(perType ?? {}).map(([type, e]) => [type, e.capacity]));
    }
    store.capacity.setCapacity(capacity);
    return capacityView();
  });
}

/** The settings a test changes while the simulator runs (latency, duplicate names, token TTL, rate limit…). */
function settingsRoutes(admin: AdminRoute, deps: ServerDeps): void {
  const { store, auth, rateLimiter } = deps;
  const settings = () => ({
    profile: deps.profile,
    latency_ms: store.settings.latencyMs,
    duplicate_names: store.settings.duplicateNames,
    token_ttl_seconds: auth.tokenTtlSeconds,
    unknown_operation_status: store.settings.unknownOperationStatus,
    operation_retention_ms: store.settings.operationRetentionMs ?? null,
    availability_counts: store.settings.availabilityCounts,
    rate_limit:
      rateLimiter.options === false
        ? false
        : { rate_per_sec: rateLimiter.options.ratePerSec, burst: rateLimiter.options.burst },
  });

  admin("GET", "/settings", settings);
  admin("PUT", "/settings", (request) => {
    const update = validate(Settings, request.body);
    if (update.latency_ms !== undefined) store.settings.latencyMs = update.latency_ms;
    if (update.duplicate_names !== undefined) store.settings.duplicateNames = update.duplicate_names;
    if (update.token_ttl_seconds !== undefined) auth.tokenTtlSeconds = update.token_ttl_seconds;
    if (update.unknown_operation_status !== undefined) {
      store.settings.unknownOperationStatus = update.unknown_operation_status;
    }
    if (update.operation_retention_ms !== undefined) {
      store.settings.operationRetentionMs = update.operation_retention_ms ?? undefined;
    }
    if (update.availability_counts !== undefined) store.settings.availabilityCounts = update.availability_counts;
    if (update.rate_limit !== undefined) {
      rateLimiter.options =
        update.rate_limit === false
          ? false
          : { ratePerSec: update.rate_limit.rate_per_sec, burst: update.rate_limit.burst };
      rateLimiter.reset();
    }
    return settings();
  });
}

/** More tenants (organization, project, API key, user) and their payment method. */
function tenantRoutes(admin: AdminRoute, { store }: ServerDeps): void {
  admin("POST", "/projects", (request) => {
    const body = validate(TenantRequest, request.body);
    if (body.api_key !== undefined && store.state.apiKeys.some((k) => k.key === body.api_key)) {
      throw new SimError(409, "api_key: already in use");
    }
    const tenant = addTenant(store.state, {
      projectName: body.name,
      apiKey: body.api_key,
      user: body.user,
      paymentMethodValid: body.payment_method_valid,
    });
    store.networks.ensureDefault(tenant.projectId);
    return { organization_id: tenant.organizationId, project_id: tenant.projectId, api_key: tenant.apiKey };
  });
  admin("PUT", "/organizations/:organizationId/payment-method", (request) => {
    const org = store.records.organization(param(request, "organizationId"));
    const { valid } = validate(PaymentMethodUpdate, request.body);
    org.hasValidPaymentMethod = valid;
    org.payment_customer_id = valid
      ? org.payment_customer_id || `cus_sim_${org.id.slice(0, 8)}`
      : org.payment_customer_id;
    return { id: org.id, hasValidPaymentMethod: org.hasValidPaymentMethod };
  });
}

/** Changes behind the operator's back: VMs made or put in a state, rules changed, resources removed. */
function driftRoutes(admin: AdminRoute, { store }: ServerDeps): void {
  admin("POST", "/projects/:projectId/vms", (request) => {
    const body = validate(BulkVms, request.body);
    const created = store.vms.insert(param(request, "projectId"), body.vms);
    return { items: created.map((vm) => ({ id: vm.id, name: vm.name })) };
  });

  admin("PUT", "/vms/:vmId/state", (request) => {
    const { state } = validate(VmStateUpdate, request.body);
    return store.vms.json(store.vms.forceState(param(request, "vmId"), state));
  });
  admin("PATCH", "/firewall-rules/:ruleId", (request) => {
    store.firewallRules.mutate(param(request, "ruleId"), validate(PatchFirewallRuleRequest, request.body));
    return { message: "firewall rule changed" };
  });

  admin("DELETE", "/resources/:kind/:id", (request) => {
    const kind = param(request, "kind");
    if (!(RESOURCE_KINDS as readonly string[]).includes(kind)) {
      throw badRequest(`kind: must be one of ${RESOURCE_KINDS.join(", ")}`);
    }
    store.removeResource(kind as ResourceKind, param(request, "id"));
    return { message: `${kind} ${param(request, "id")} removed` };
  });
}

/** The node-join emulation: workload clusters (their credentials are never shown) and the joins' outcomes. */
function nodeJoinRoutes(admin: AdminRoute, { nodeJoins }: ServerDeps): void {
  admin("GET", "/node-joins", () => ({ clusters: nodeJoins.clusters(), joins: nodeJoins.joins() }));
  admin("GET", "/node-joins/vms/:vmId", (request) => {
    const join = nodeJoins.joinOf(param(request, "vmId"));
    if (join === undefined) throw new SimError(404, `no node join for vm ${param(request, "vmId")}`);
    return join;
  });
  admin("PUT", "/node-joins/clusters/:name", (request) => {
    const { kubeconfig } = validate(WorkloadClusterUpdate, request.body);
    try {
      return nodeJoins.setCluster({ name: param(request, "name"), kubeconfig });
    } catch (error) {
      if (error instanceof NodeJoinConfigError) throw badRequest(error.message);
      throw error;
    }
  });
  admin("DELETE", "/node-joins/clusters/:name", (request) => {
    if (!nodeJoins.removeCluster(param(request, "name"))) {
      throw new SimError(404, `no workload cluster ${param(request, "name")}`);
    }
    return { clusters: nodeJoins.clusters() };
  });
}
