// The VM endpoints: create, list (one page, or every page as an async iterable), read, the actions (start, stop,
// reset, update) and terminate.
import { CloudError } from "../errors.ts";
import {
  CreateVmRequest,
  type DiskRef,
  type ListVmsQuery,
  type Operation,
  VM_LIST_MAX_LIMIT,
  VM_SORTS,
  type Vm,
  type VmActionRequest,
  VmActionRequest as VmActionRequestSchema,
  VmListPage,
  Vm as VmSchema,
} from "../wire.ts";
import {
  type Call,
  type CallOptions,
  csv,
  invalidRequest,
  projectGet,
  projectRoute,
  projectWrite,
  requireId,
  validateBody,
} from "./shared.ts";

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

export function vmEndpoints(call: Call) {
  const vms = {
    async create(projectId: string, request: CreateVmRequest, opts: CallOptions = {}): Promise<Operation> {
      const body = validateBody(CreateVmRequest, request, "POST", projectRoute("/vms"));
      return projectWrite(call, "POST", projectId, "/vms", () => "vms", body, opts);
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
      const { p, route, endpoint } = projectGet(projectId, "/vms/:vmId", VmSchema, opts);
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
      return projectWrite(call, "PATCH", projectId, "/vms/:vmId", () => `vms/${vm}`, body, opts);
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
      return projectWrite(call, "DELETE", projectId, "/vms/:vmId", () => `vms/${vm}`, undefined, opts);
    },
  };
  return vms;
}
