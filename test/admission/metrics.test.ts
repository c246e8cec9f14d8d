// The budget and queue gauges as a scrape shows them, and the names the alerts and the dashboard read: each one is a
// family registered here (the live scrape of test/e2e/monitoring.test.ts shows them too, registered by
// controllers/budgets/).
import { readFile } from "node:fs/promises";
import path from "node:path";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { CapacityQueue } from "../../src/admission/capacity-queue.ts";
import type { Budget } from "../../src/admission/ledger.ts";
import { ADMISSION_METRICS, registerAdmissionMetrics } from "../../src/admission/metrics.ts";
import { exposedSampleNames, metricNamesOf } from "../deploy/promql.ts";

const RULES_DIR = path.resolve(import.meta.dirname, "../../deploy/monitoring/rules-and-dashboard");

const budget: Budget = {
  namespace: "team",
  name: "gpus",
  resourceVersion: "1",
  spec: { maxHourlyUSD: 22 },
  entries: {
    a: {
      kind: "GpuVm",
      name: "a",
      amountUSD: 1.1,
      gpus: 1,
      purpose: "Running",
      state: "Used",
      since: "2026-11-28T10:00:00Z",
    },
    b: {
      kind: "GpuVm",
      name: "b",
      amountUSD: 14.48,
      gpus: 8,
      purpose: "Create",
      state: "Reserved",
      since: "2026-11-28T10:00:00Z",
    },
  },
  waiting: {
    c: {
      kind: "GpuVm",
      name: "c",
      amountUSD: 14.48,
      gpus: 8,
      purpose: "Create",
      priority: 0,
      since: "2026-11-28T10:00:00Z",
    },
  },
  conditions: [],
  malformed: 0,
};

async function scrape(): Promise<string> {
  const now = Date.parse("2026-11-28T12:00:00Z");
  const queue = new CapacityQueue({ now: () => now });
  queue.upsert({
    key: "team/w",
    uid: "w",
    type: "a40.1x",
    locations: ["us-east1-a"],
    locationIndex: 0,
    priority: 0,
    sinceMs: now - 4000_000,
  });
  queue.dueProbes();
  const registry = new Registry();
  registerAdmissionMetrics(registry, { budgets: () => [budget], queue: () => queue });
  return registry.metrics();
}

describe("admission metrics", () => {
  it("expose the budget's limit, use, reservations and waiters, and the queue's length, oldest wait and probes", async () => {
    const text = await scrape();
    expect(text).toContain('gpucloud_budget_limit_hourly_dollars{namespace="team",budget="gpus"} 22');
    expect(text).toContain('gpucloud_budget_used_hourly_dollars{namespace="team",budget="gpus"} 1.1');
    expect(text).toContain('gpucloud_budget_reserved_hourly_dollars{namespace="team",budget="gpus"} 14.48');
    expect(text).toContain('gpucloud_budget_waiting_objects{namespace="team",budget="gpus"} 1');
    expect(text).toContain('gpucloud_capacity_queue_length{type="a40.1x",location="us-east1-a"} 1');
    expect(text).toContain('gpucloud_capacity_queue_oldest_wait_seconds{type="a40.1x",location="us-east1-a"} 4000');
    expect(text).toContain('gpucloud_capacity_probes_total{type="a40.1x",location="us-east1-a"} 1');
    expect([...exposedSampleNames(text)].sort()).toEqual([...ADMISSION_METRICS].sort());
  });

  it("are the families the budget and queue alerts and dashboard panels read", async () => {
    const rules = parse(await readFile(path.join(RULES_DIR, "gpuvm-operator.rules.yaml"), "utf8")) as {
      groups: { rules: { alert: string; expr: string }[] }[];
    };
    const dashboard = JSON.parse(await readFile(path.join(RULES_DIR, "gpuvm-operator-dashboard.json"), "utf8")) as {
      panels: { targets?: { expr?: string }[] }[];
    };
    const expressions = [
      ...rules.groups.flatMap((group) => group.rules.map((rule) => rule.expr)),
      ...dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((target) => target.expr ?? "")),
    ];
    const read = new Set(expressions.flatMap(metricNamesOf));
    const admission = [...read].filter((name) => /^gpucloud_(budget|capacity)_/.test(name));
    const exposed = exposedSampleNames(await scrape());
    expect(admission.filter((name) => !exposed.has(name))).toEqual([]);
    for (const alert of ["GpuBudgetNearLimit", "GpuCapacityQueueHeadOld"]) {
      expect(rules.groups.flatMap((group) => group.rules).some((rule) => rule.alert === alert)).toBe(true);
    }
  });
});
