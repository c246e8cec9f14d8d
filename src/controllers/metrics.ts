// The operator's own gauges, computed at scrape time from the informer caches (no extra API calls), and GPU
// usage read from the cloud rarely (once an hour per account, in the background of a scrape). The cloud
// refreshes usage once a day shortly after midnight UTC, so the gauge reads the last complete day (and the
// current day only where a server has it).
import type { KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { Gauge, type Registry } from "prom-client";
import { DISK_PRICE_PER_GB_HOUR, OPERATION_FAMILIES } from "../cloud/wire.ts";
import type { CloudOperationsSample } from "../runtime/index.ts";
import type { CloudAccount } from "./cloud-account.ts";

/** What the usage gauge reads of an account. */
export type MetricsAccount = Pick<CloudAccount, "projectId" | "client">;

export interface OperatorMetricsSources {
  kinds: { kind: string; list(): KubernetesObject[] }[];
  accounts(): MetricsAccount[];
  logger: Logger;
  now?: () => number;
}

const USAGE_REFRESH_MS = 60 * 60_000;
const SECONDS_PER_HOUR = 3600;
/** "Shortly after midnight UTC": a day's usage is taken as published one hour after the day ended. */
const USAGE_PUBLISHED_AFTER_MS = 60 * 60_000;
const DAY_MS = 24 * 60 * 60_000;

const dateOf = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

/** The last UTC day whose usage the daily refresh has published at `now`: yesterday from 01:00 UTC on. */
export function lastCompleteUsageDay(now: number): string {
  return dateOf(now - USAGE_PUBLISHED_AFTER_MS - DAY_MS);
}

interface UsageReading {
  /** The last complete day read, and when. */
  day: string;
  at: number;
  /** GPU-hours of that day. */
  lastComplete: number;
  /** Today's GPU-hours so far, when the server reports the running day (the spec's server does not). */
  today?: { date: string; quantity: number };
  refreshing: boolean;
}

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
            const status = condition.status ?? "Unknown";
            const reason = condition.reason ?? "";
            // A plain joined key: this runs for every condition of every object at each scrape.
            const key = `${namespace}\u0000${kind}\u0000${condition.type}\u0000${status}\u0000${reason}`;
            const entry = counts.get(key);
            if (entry !== undefined) entry.count++;
            else counts.set(key, { labels: { namespace, kind, type: condition.type, status, reason }, count: 1 });
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
  const usage = new Map<string, UsageReading>();
  const refresh = (account: MetricsAccount, reading: UsageReading, day: string) => {
    reading.refreshing = true;
    const today = dateOf(now());
    account.client.usage
      .list(account.projectId, { start_date: day, end_date: today })
      .then(
        (items) => {
          const sumOf = (date: string) => items.filter((i) => i.date === date).reduce((sum, i) => sum + i.quantity, 0);
          reading.day = day;
          reading.at = now();
          reading.lastComplete = sumOf(day);
          reading.today = items.some((i) => i.date === today) ? { date: today, quantity: sumOf(today) } : undefined;
        },
        (error: unknown) => sources.logger.debug({ err: error }, "usage refresh failed"),
      )
      .finally(() => {
        reading.refreshing = false;
      });
  };
  // In seconds, Prometheus' base unit (promtool check metrics refuses "hours"): GPU-hours × 3600.
  new Gauge({
    name: "gpucloud_usage_gpu_seconds",
    help:
      "GPU time per project in GPU-seconds (the cloud's usage endpoint reports GPU-hours): the last complete UTC " +
      "day (period=last_complete_day, published by the daily refresh after midnight UTC) and, where the server " +
      "has it, the running day (period=current_day); read hourly and when the day changes",
    labelNames: ["project", "period", "date"],
    registers: [registry],
    collect(this: Gauge<"project" | "period" | "date">) {
      this.reset();
      for (const account of sources.accounts()) {
        const day = lastCompleteUsageDay(now());
        const reading = usage.get(account.projectId) ?? { day: "", at: 0, lastComplete: 0, refreshing: false };
        usage.set(account.projectId, reading);
        if (!reading.refreshing && (reading.day !== day || now() - reading.at > USAGE_REFRESH_MS)) {
          refresh(account, reading, day);
        }
        if (reading.day === "") continue; // nothing read yet: no value rather than a false zero
        const project = account.projectId;
        this.set({ project, period: "last_complete_day", date: reading.day }, reading.lastComplete * SECONDS_PER_HOUR);
        if (reading.today !== undefined) {
          this.set(
            { project, period: "current_day", date: reading.today.date },
            reading.today.quantity * SECONDS_PER_HOUR,
          );
        }
      }
    },
  });
}
