// The operation reads of each family (vm, disk, network, firewall-rule): the list, filtered by resource, state and
// time, and one operation. Beyond the VM family's, they are endpoints beyond the spec.
import { type ListOperationsQuery, OPERATION_FAMILY_PATH, Operation, type OperationFamily } from "../wire.ts";
import { type Call, type CallOptions, listOf, projectGet, requireId } from "./shared.ts";

const Operations = listOf(Operation);

function familyPathOf(family: OperationFamily): string {
  const path = OPERATION_FAMILY_PATH[family];
  if (!path) throw new TypeError(`unknown operation family ${JSON.stringify(family)}`);
  return path;
}

export function operationEndpoints(call: Call) {
  return {
    async list(projectId: string, family: OperationFamily, query: ListOperationsQuery = {}, opts: CallOptions = {}) {
      const familyPath = familyPathOf(family);
      const { p, endpoint } = projectGet(projectId, `/${familyPath}/operations`, Operations, opts, family !== "vm");
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
}
