// The budget and capacity-queue gauges, read at each scrape from the budgets as cached and from the queue (no API
// calls). Per budget: the limit, what is used and reserved (dollars per hour) and how many objects wait; per (VM
// type, location): the queue's length, the longest wait in it, and the availability probes made. The alerts of
// deploy/monitoring read them (GpuBudgetNearLimit, GpuCapacityQueueHeadOld).
import { Counter, Gauge, type Registry } from "prom-client";
import { budgetGauges } from "./budget-reconciler.ts";
import type { CapacityQueue } from "./capacity-queue.ts";
import type { Budget } from "./ledger.ts";

export interface AdmissionMetricsSources {
  /** Every budget as cached (each replica caches all of them: the alerts take the max over replicas). */
  budgets(): Iterable<Budget>;
  queue(): CapacityQueue | undefined;
}

/** The families registered here, for the tests that match the alerts and the dashboard against a scrape. */
export const ADMISSION_METRICS = [
  "gpucloud_budget_limit_hourly_dollars",
  "gpucloud_budget_used_hourly_dollars",
  "gpucloud_budget_reserved_hourly_dollars",
  "gpucloud_budget_waiting_objects",
  "gpucloud_capacity_queue_length",
  "gpucloud_capacity_queue_oldest_wait_seconds",
  "gpucloud_capacity_probes_total",
] as const;

type BudgetLabels = "namespace" | "budget";
type PairLabels = "type" | "location";

function budgetGauge(
  registry: Registry,
  name: string,
  help: string,
  sources: AdmissionMetricsSources,
  read: (gauges: ReturnType<typeof budgetGauges>) => number,
): void {
  new Gauge({
    name,
    help,
    labelNames: ["namespace", "budget"],
    registers: [registry],
    collect(this: Gauge<BudgetLabels>) {
      this.reset();
      for (const budget of sources.budgets()) {
        this.set({ namespace: budget.namespace, budget: budget.name }, read(budgetGauges(budget)));
      }
    },
  });
}

export function registerAdmissionMetrics(registry: Registry, sources: AdmissionMetricsSources): void {
  budgetGauge(registry, "gpucloud_budget_limit_hourly_dollars", "A GpuBudget's maxHourlyUSD", sources, (g) => g.limit);
  budgetGauge(
    registry,
    "gpucloud_budget_used_hourly_dollars",
    "Dollars per hour billing now in a GpuBudget's ledger (entries Used)",
    sources,
    (g) => g.used,
  );
  budgetGauge(
    registry,
    "gpucloud_budget_reserved_hourly_dollars",
    "Dollars per hour reserved in a GpuBudget for actions in flight (entries Reserved)",
    sources,
    (g) => g.reserved,
  );
  budgetGauge(
    registry,
    "gpucloud_budget_waiting_objects",
    "Objects waiting for room in a GpuBudget",
    sources,
    (g) => g.waiting,
  );
  new Gauge({
    name: "gpucloud_capacity_queue_length",
    help: "Objects waiting for capacity of a VM type in a location",
    labelNames: ["type", "location"],
    registers: [registry],
    collect(this: Gauge<PairLabels>) {
      this.reset();
      for (const reading of sources.queue()?.readings() ?? []) {
        this.set({ type: reading.type, location: reading.location }, reading.length);
      }
    },
  });
  new Gauge({
    name: "gpucloud_capacity_queue_oldest_wait_seconds",
    help: "The longest an object has waited for capacity of a VM type in a location",
    labelNames: ["type", "location"],
    registers: [registry],
    collect(this: Gauge<PairLabels>) {
      this.reset();
      for (const reading of sources.queue()?.readings() ?? []) {
        this.set({ type: reading.type, location: reading.location }, reading.oldestWaitSeconds);
      }
    },
  });
  const exported = new Map<string, number>();
  new Counter({
    name: "gpucloud_capacity_probes_total",
    help: "Availability probes made for a VM type in a location while objects waited for its capacity",
    labelNames: ["type", "location"],
    registers: [registry],
    collect(this: Counter<PairLabels>) {
      for (const reading of sources.queue()?.readings() ?? []) {
        const key = `${reading.type}\u0000${reading.location}`;
        const increase = reading.probes - (exported.get(key) ?? 0);
        if (increase > 0) this.inc({ type: reading.type, location: reading.location }, increase);
        exported.set(key, Math.max(reading.probes, exported.get(key) ?? 0));
      }
    },
  });
}
