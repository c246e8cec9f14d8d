// GpuBudgets as Kubernetes objects: the parse of an API answer (or an informer object) into a Budget, tolerant of
// a hand-edited status (entries that do not parse are dropped at the next write, never a crash), and the ledger's
// records on the runtime's KubeClient: a live list of a namespace's budgets, and status writes guarded by
// resourceVersion (a merge patch: the ledger and the waiting line are maps, so a write carries the keys it changes).
import { Condition, GROUP, VERSION } from "../api/common.ts";
import { GpuBudgetSpec, gpuBudgetKind, LedgerEntry, Waiter } from "../api/gpu-budget.ts";
import type { KubeClient, KubeResource } from "../runtime/index.ts";
import { isRecord } from "../util/is-record.ts";
import type { BudgetRecords, StatusWrite } from "./budget-ledger.ts";
import type { Budget, BudgetStatusShape } from "./ledger.ts";

export const BUDGETS_RESOURCE: KubeResource = {
  group: GROUP,
  version: VERSION,
  plural: gpuBudgetKind.plural,
  kind: gpuBudgetKind.kind,
  namespaced: true,
};

/** The object each parsed Budget came from: the writer's merge patch is computed against its status. */
const sources = new WeakMap<Budget, { metadata: Record<string, unknown>; status: unknown }>();

function parsedMap<T>(
  value: unknown,
  parse: (item: unknown) => T | undefined,
): { items: Record<string, T>; bad: number } {
  const items: Record<string, T> = {};
  let bad = 0;
  if (!isRecord(value)) return { items, bad: value === undefined ? 0 : 1 };
  for (const [uid, raw] of Object.entries(value)) {
    const item = parse(raw);
    if (item === undefined) bad++;
    else items[uid] = item;
  }
  return { items, bad };
}

const safely =
  <T>(schema: { safeParse(value: unknown): { success: true; data: T } | { success: false } }) =>
  (value: unknown): T | undefined => {
    const parsed = schema.safeParse(value);
    return parsed.success ? parsed.data : undefined;
  };

/** A GpuBudget object as a Budget; undefined when it is not one (no name, namespace or resourceVersion). */
export function budgetOf(raw: unknown): Budget | undefined {
  if (!isRecord(raw) || !isRecord(raw.metadata)) return undefined;
  const { name, namespace, resourceVersion, generation } = raw.metadata;
  if (typeof name !== "string" || typeof namespace !== "string" || typeof resourceVersion !== "string")
    return undefined;
  const spec = GpuBudgetSpec.safeParse(raw.spec);
  const status = isRecord(raw.status) ? raw.status : {};
  const entries = parsedMap(status.entries, safely(LedgerEntry));
  const waiting = parsedMap(status.waiting, safely(Waiter));
  const conditions = Array.isArray(status.conditions)
    ? status.conditions.flatMap((item) => safely(Condition)(item) ?? [])
    : [];
  const budget: Budget = {
    namespace,
    name,
    generation: typeof generation === "number" ? generation : undefined,
    resourceVersion,
    // An unreadable spec fails closed: every object of the namespace, nothing new admitted.
    spec: spec.success ? spec.data : { maxHourlyUSD: 0 },
    specError: spec.success
      ? undefined
      : spec.error.issues.map((issue) => `${["spec", ...issue.path].join(".")}: ${issue.message}`).join("; "),
    entries: entries.items,
    waiting: waiting.items,
    conditions,
    lastSweepTime: typeof status.lastSweepTime === "string" ? status.lastSweepTime : undefined,
    malformed: entries.bad + waiting.bad,
  };
  sources.set(budget, { metadata: raw.metadata, status: raw.status });
  return budget;
}

/** The budgets of a namespace through the KubeClient (list and the status subresource: RBAC list, patch). */
export function kubeBudgetRecords(kube: Pick<KubeClient, "listObjects" | "patchStatus">): BudgetRecords {
  return {
    async list(namespace) {
      const items = await kube.listObjects(BUDGETS_RESOURCE, namespace, {});
      return items.flatMap((item) => budgetOf(item) ?? []);
    },
    async writeStatus(budget: Budget, status: BudgetStatusShape): Promise<StatusWrite> {
      const source = sources.get(budget);
      const object = {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: gpuBudgetKind.kind,
        metadata: {
          ...(source?.metadata ?? {}),
          name: budget.name,
          namespace: budget.namespace,
          resourceVersion: budget.resourceVersion,
        },
        status: source?.status ?? {},
      };
      const written = await kube.patchStatus(BUDGETS_RESOURCE, object, status);
      switch (written.type) {
        case "conflict":
          return { type: "conflict" };
        case "notFound":
          return { type: "gone" };
        case "unchanged":
          return { type: "written", budget };
        case "written": {
          const parsed = budgetOf(written.object);
          if (parsed === undefined)
            throw new Error(
              `the API server answered a malformed GpuBudget to the status write of ${budget.namespace}/${budget.name}`,
            );
          return { type: "written", budget: parsed };
        }
      }
    },
  };
}
