// The cloud API's routes (GPU VM Service API v0.1 and contract-decisions.md), one function per area: each reads
// its request, asks the store (store.ts) and answers in the wire shapes of cloud/wire.ts. What every route goes
// through before and after (auth, faults, rate limits, the write log) is api-pipeline.ts's.
import { randomUUID } from "node:crypto";
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
import type { ApiRoute, Reply } from "./api-pipeline.ts";
import type { Principal } from "./auth.ts";
import { IMAGES, LOCATIONS, specItems } from "./catalogue.ts";
import { badRequest, forbidden } from "./errors.ts";
import { paginate, parseSort } from "./paging.ts";
import { listParam, type Query, type ServerDeps, stringParam, validate } from "./routing.ts";
import type { Family, Store } from "./store.ts";
import { publishedUsage } from "./usage-publication.ts";

const DATE_PATTERN = /^\d{4}-\d{2}-\d{2}$/;

/** The answer of a change: the operation it started, as `{ operation }`. */
function operationReply(store: Store, record: Parameters<Store["operations"]["json"]>[0]): Reply {
  return { body: { operation: store.operations.json(record) } };
}

/** Every route of the cloud API, declared through `api`. */
export function registerApiRoutes(api: ApiRoute, deps: ServerDeps): void {
  accountRoutes(api, deps);
  catalogueRoutes(api, deps.store);
  vmRoutes(api, deps.store);
  operationRoutes(api, deps.store);
  diskRoutes(api, deps.store);
  vpcRoutes(api, deps.store);
  usageRoutes(api, deps);
}

/** Sign-in, password change, organizations and projects. */
function accountRoutes(api: ApiRoute, deps: ServerDeps): void {
  const { auth, store } = deps;
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
}

function catalogueRoutes(api: ApiRoute, store: Store): void {
  api("GET", "/projects/:projectId/locations", () => ({ body: { items: [...LOCATIONS] } }));
  api("GET", "/projects/:projectId/images", () => ({ body: { items: IMAGES } }));
  api("GET", "/projects/:projectId/specs", () => ({ body: { items: specItems() } }));
  api("GET", "/projects/:projectId/availabilities", ({ query }) => ({
    body: { items: store.capacity.availabilities(stringParam(query, "product_name"), stringParam(query, "location")) },
  }));
}

/** GET /vms: the project's VMs filtered by the query, sorted, one page. */
function listVms(store: Store, projectId: string, query: Query): Reply {
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
}

function vmRoutes(api: ApiRoute, store: Store): void {
  api("POST", "/projects/:projectId/vms", ({ projectId, body }) =>
    operationReply(store, store.vms.create(projectId, validate(CreateVmRequest, body))),
  );
  api("GET", "/projects/:projectId/vms", ({ projectId, query }) => listVms(store, projectId, query));
  api("GET", "/projects/:projectId/vms/:vmId", ({ projectId, params }) => ({
    body: store.vms.json(store.vms.get(projectId, params.vmId ?? "")),
  }));
  api("PATCH", "/projects/:projectId/vms/:vmId", ({ projectId, params, body }) =>
    operationReply(store, store.vms.action(projectId, params.vmId ?? "", validate(VmActionRequest, body))),
  );
  api("DELETE", "/projects/:projectId/vms/:vmId", ({ projectId, params }) =>
    operationReply(store, store.vms.delete(projectId, params.vmId ?? "")),
  );
}

/** The operation reads of every family (static `operations` segments win over `:id` in the router). */
function operationRoutes(api: ApiRoute, store: Store): void {
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
}

function diskRoutes(api: ApiRoute, store: Store): void {
  api("POST", "/projects/:projectId/disks", ({ projectId, body }) =>
    operationReply(store, store.disks.create(projectId, validate(CreateDiskRequest, body))),
  );
  api("GET", "/projects/:projectId/disks", ({ projectId }) => ({
    body: { items: store.disks.list(projectId).map((d) => store.disks.json(d)) },
  }));
  api("GET", "/projects/:projectId/disks/:diskId", ({ projectId, params }) => ({
    body: store.disks.json(store.disks.get(projectId, params.diskId ?? "")),
  }));
  api("PATCH", "/projects/:projectId/disks/:diskId", ({ projectId, params, body }) =>
    operationReply(store, store.disks.resize(projectId, params.diskId ?? "", validate(ResizeDiskRequest, body).size)),
  );
  api("DELETE", "/projects/:projectId/disks/:diskId", ({ projectId, params }) =>
    operationReply(store, store.disks.delete(projectId, params.diskId ?? "")),
  );
}

/** VPC networks and firewall rules. */
function vpcRoutes(api: ApiRoute, store: Store): void {
  api("POST", "/projects/:projectId/vpc/networks", ({ projectId, body }) =>
    operationReply(store, store.networks.create(projectId, validate(CreateNetworkRequest, body))),
  );
  api("GET", "/projects/:projectId/vpc/networks", ({ projectId }) => ({
    body: { items: store.networks.list(projectId).map((n) => store.networks.json(n)) },
  }));
  api("GET", "/projects/:projectId/vpc/networks/:networkId", ({ projectId, params }) => ({
    body: store.networks.json(store.networks.get(projectId, params.networkId ?? "")),
  }));
  api("DELETE", "/projects/:projectId/vpc/networks/:networkId", ({ projectId, params }) =>
    operationReply(store, store.networks.delete(projectId, params.networkId ?? "")),
  );
  api("POST", "/projects/:projectId/vpc/firewall-rules", ({ projectId, body }) =>
    operationReply(store, store.firewallRules.create(projectId, validate(CreateFirewallRuleRequest, body))),
  );
  api("GET", "/projects/:projectId/vpc/firewall-rules", ({ projectId }) => ({
    body: { items: store.firewallRules.list(projectId).map((r) => store.firewallRules.json(r)) },
  }));
  api("GET", "/projects/:projectId/vpc/firewall-rules/:ruleId", ({ projectId, params }) => ({
    body: store.firewallRules.json(store.firewallRules.get(projectId, params.ruleId ?? "")),
  }));
  api("PATCH", "/projects/:projectId/vpc/firewall-rules/:ruleId", ({ projectId, params, body }) =>
    operationReply(
      store,
      store.firewallRules.patch(projectId, params.ruleId ?? "", validate(PatchFirewallRuleRequest, body)),
    ),
  );
  api("DELETE", "/projects/:projectId/vpc/firewall-rules/:ruleId", ({ projectId, params }) =>
    operationReply(store, store.firewallRules.delete(projectId, params.ruleId ?? "")),
  );
}

function usageRoutes(api: ApiRoute, deps: ServerDeps): void {
  const { store } = deps;
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
}
