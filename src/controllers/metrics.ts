// The operator's own gauges, computed at scrape time from the informer caches (no extra API calls), and GPU
// usage read from the cloud rarely (once an hour per account, in the background of a scrape).
import type { KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { Gauge, type Registry } from "prom-client";
import { DISK_PRICE_PER_GB_HOUR, OPERATION_FAMILIES } from "../cloud/wire.ts";
import type { CloudOperationsSample } from "../runtime/index.ts";
import type { CloudAccount } from "./cloud-account.ts";

export interface OperatorMetricsSources {
  kinds: { kind: string; list(): KubernetesObject[] }[];
  accounts(): CloudAccount[];
  logger: Logger;
  now?: () => number;
}

const USAGE_REFRESH_MS = 60 * 60_000;
const SECONDS_PER_HOUR = 3600;

interface StatusView {
  conditions?: { type?: string; status?: string; reason?: string }[];
  state?: string;
  hourlyPriceUSD?: number;
  sizeBytes?: number;
}

function statusOf(object: KubernetesObject): StatusView {
  const status = (object as { status?: unknown }).status;
  return typeof status === "object" && status !== null ? (status as StatusView) : {};
}

/** Dollars per hour an object costs now: a running VM by its type's price, a disk by its size. */
export function estimatedHourlyCost(kind: string, status: StatusView): number {
  if (kind === "GpuVm") return status.state === "STATE_RUNNING" ? (status.hourlyPriceUSD ?? 0) : 0;
  if (kind === "GpuDisk") return ((status.sizeBytes ?? 0) / 1e9) * DISK_PRICE_PER_GB_HOUR;
  return 0;
}

/** The runtime's cloud operation gauges, per family, from the accounts' trackers. */
export function cloudOperationsSample(accounts: readonly CloudAccount[], now: number): CloudOperationsSample[] {
  return OPERATION_FAMILIES.map((family) => {
    const inFlight = accounts.reduce((sum, account) => sum + account.inFlight(family), 0);
    const since = accounts.flatMap((account) => account.oldestInFlightSince(family) ?? []);
    const oldestAgeSeconds = since.length === 0 ? 0 : Math.max(0, (now - Math.min(...since)) / 1000);
    return { family, inFlight, oldestAgeSeconds };
  });
}

export function registerOperatorMetrics(registry: Registry, sources: OperatorMetricsSources): void {
  const now = sources.now ?? Date.now;
  new Gauge({
    name: "gpucloud_managed_resources",
    help: "Managed objects per kind and Ready status",
    labelNames: ["kind", "ready"],
    registers: [registry],
    collect(this: Gauge<"kind" | "ready">) {
      this.reset();
      for (const { kind, list } of sources.kinds) {
        const counts = { True: 0, False: 0, Unknown: 0 };
        for (const object of list()) {
          const ready = statusOf(object).conditions?.find((c) => c.type === "Ready")?.status;
          if (ready === "True" || ready === "False") counts[ready]++;
          else counts.Unknown++;
        }
        for (const [ready, count] of Object.entries(counts)) this.set({ kind, ready }, count);
      }
    },
  });
  new Gauge({
    name: "gpucloud_managed_resource_conditions",
    help: "Managed objects per namespace, kind and condition (type, status, reason): e.g. how many are Stalled and why",
    labelNames: ["namespace", "kind", "type", "status", "reason"],
    registers: [registry],
    collect(this: Gauge<"namespace" | "kind" | "type" | "status" | "reason">) {
      this.reset();
      const counts = new Map<string, { labels: Record<string, string>; count: number }>();
      for (const { kind, list } of sources.kinds) {
        for (const object of list()) {
          const namespace = object.metadata?.namespace ?? "";
          for (const condition of statusOf(object).conditions ?? []) {
            if (condition.type === undefined) continue;
            const labels = {
              namespace,
              kind,
              type: condition.type,
              status: condition.status ?? "Unknown",
              reason: condition.reason ?? "",
            };
            const key = JSON.stringify(labels);
            const entry = counts.get(key) ?? { labels, count: 0 };
            entry.count++;
            counts.set(key, entry);
          }
        }
      }
      for (const { labels, count } of counts.values()) this.set(labels, count);
    },
  });
  new Gauge({
    name: "gpucloud_estimated_hourly_cost_dollars",
    help: "Estimated cost per hour of the managed cloud resources (running VMs by type price, disks by size)",
    labelNames: ["namespace", "kind"],
    registers: [registry],
    collect(this: Gauge<"namespace" | "kind">) {
      this.reset();
      for (const { kind, list } of sources.kinds) {
        const perNamespace = new Map<string, number>();
        for (const object of list()) {
          const namespace = object.metadata?.namespace ?? "";
          perNamespace.set(namespace, (perNamespace.get(namespace) ?? 0) + estimatedHourlyCost(kind, statusOf(object)));
        }
        for (const [namespace, cost] of perNamespace) this.set({ namespace, kind }, Math.round(cost * 1e6) / 1e6);
      }
    },
  });
  const usage = new Map<string, { at: number; quantity: number; refreshing: boolean }>();
  // In seconds, Prometheus' base unit (promtool check metrics refuses "hours"): GPU-hours × 3600.
  new Gauge({
    name: "gpucloud_usage_gpu_seconds",
    help: "GPU time used today (UTC) per project in GPU-seconds (the cloud's usage endpoint reports GPU-hours; refreshed hourly)",
    labelNames: ["project"],
    registers: [registry],
    collect(this: Gauge<"project">) {
      for (const account of sources.accounts()) {
        const entry = usage.get(account.projectId) ?? { at: 0, quantity: 0, refreshing: false };
        usage.set(account.projectId, entry);
        if (!entry.refreshing && now() - entry.at > USAGE_REFRESH_MS) {
          entry.refreshing = true;
          const today = new Date(now()).toISOString().slice(0, 10);
          account.client.usage
            .list(account.projectId, { start_date: today, end_date: today })
            .then(
              (items) => {
                entry.quantity = items.reduce((sum, item) => sum + item.quantity, 0);
                entry.at = now();
              },
              (error: unknown) => sources.logger.debug({ err: error }, "usage refresh failed"),
            )
            .finally(() => {
              entry.refreshing = false;
            });
        }
        this.set({ project: account.projectId }, entry.quantity * SECONDS_PER_HOUR);
      }
    },
  });
}
