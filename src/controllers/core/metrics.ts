// The operator's own gauges, kept from the informer caches (no extra API calls), and GPU usage read from the
// cloud rarely (once an hour per account, in the background of a scrape). The per-object gauges are counts kept
// up to date from informer events (an object's old contribution out, its new one in): a scrape costs the number
// of distinct label sets, not a walk over every object. The cloud refreshes usage once a day shortly after
// midnight UTC, so the gauge reads the last complete day (and the current day only where a server has it).
import type { KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { Gauge, type Registry } from "prom-client";
import type { CloudClient } from "../../cloud/client.ts";
import { DISK_PRICE_PER_GB_HOUR, OPERATION_FAMILIES, type OperationFamily } from "../../cloud/wire.ts";
import type { CloudOperationsSample, InformerEvent } from "../../runtime/index.ts";

/** What the usage gauge reads of an account. */
export interface MetricsAccount {
  projectId: string;
  client: Pick<CloudClient, "usage">;
}

/** What the cloud operation gauges read of an account (its trackers, accounts/cloud-account.ts). */
export interface OperationsInFlight {
  inFlight(family: OperationFamily): number;
  /** When the oldest operation of the family still pending began to be tracked; undefined when none. */
  oldestInFlightSince(family: OperationFamily): number | undefined;
}

/** The informer of a kind as the gauges read it: the objects there now, then every change. */
export interface CountedKind {
  kind: string;
  list(): KubernetesObject[];
  on(handler: (event: InformerEvent<KubernetesObject>) => void): () => void;
}

export interface OperatorMetricsSources {
  kinds: CountedKind[];
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
export function cloudOperationsSample(accounts: readonly OperationsInFlight[], now: number): CloudOperationsSample[] {
  return OPERATION_FAMILIES.map((family) => {
    const inFlight = accounts.reduce((sum, account) => sum + account.inFlight(family), 0);
    const since = accounts.flatMap((account) => account.oldestInFlightSince(family) ?? []);
    const oldestAgeSeconds = since.length === 0 ? 0 : Math.max(0, (now - Math.min(...since)) / 1000);
    return { family, inFlight, oldestAgeSeconds };
  });
}

type ReadyStatus = "True" | "False" | "Unknown";

interface LabelledCount<Labels> {
  labels: Labels;
  count: number;
}

/**
 * Objects per kind and Ready status, per condition (namespace, kind, type, status, reason) and the estimated cost
 * per namespace and kind, kept from informer events. An update brings the object it replaced: its contribution
 * is taken out before the new one goes in, so the counts always equal a walk over the cache.
 */
export class ManagedObjectCounts {
  readonly #kinds: string[];
  readonly #ready = new Map<string, Record<ReadyStatus, number>>();
  readonly #conditions = new Map<
    string,
    LabelledCount<Record<"namespace" | "kind" | "type" | "status" | "reason", string>>
  >();
  readonly #costs = new Map<string, LabelledCount<{ namespace: string; kind: string }> & { dollars: number }>();

  constructor(kinds: readonly CountedKind[]) {
    this.#kinds = kinds.map((source) => source.kind);
    for (const { kind, list, on } of kinds) {
      this.#ready.set(kind, { True: 0, False: 0, Unknown: 0 });
      for (const object of list()) this.#count(kind, object, 1);
      on((event) => {
        const previous = event.previous;
        // The informer hands an unchanged status over as the very same object (shareUnchanged): nothing moves.
        if (event.type === "update" && previous !== undefined && sameCounted(previous, event.object)) return;
        if (event.type !== "add") this.#count(kind, event.previous ?? event.object, -1);
        if (event.type !== "delete") this.#count(kind, event.object, 1);
      });
    }
  }

  ready(): { kind: string; ready: ReadyStatus; count: number }[] {
    return this.#kinds.flatMap((kind) =>
      Object.entries(this.#ready.get(kind) ?? {}).map(([ready, count]) => ({
        kind,
        ready: ready as ReadyStatus,
        count,
      })),
    );
  }

  conditions(): Iterable<LabelledCount<Record<"namespace" | "kind" | "type" | "status" | "reason", string>>> {
    return this.#conditions.values();
  }

  costs(): Iterable<{ labels: { namespace: string; kind: string }; dollars: number }> {
    return this.#costs.values();
  }

  #count(kind: string, object: KubernetesObject, sign: 1 | -1): void {
    const status = statusOf(object);
    const namespace = object.metadata?.namespace ?? "";
    const ready = status.conditions?.find((c) => c.type === "Ready")?.status;
    const readyCounts = this.#ready.get(kind);
    if (readyCounts !== undefined) readyCounts[ready === "True" || ready === "False" ? ready : "Unknown"] += sign;
    for (const condition of status.conditions ?? []) {
      if (condition.type === undefined) continue;
      const conditionStatus = condition.status ?? "Unknown";
      const reason = condition.reason ?? "";
      // A plain joined key: this runs for every condition of every changed object.
      const key = `${namespace}\u0000${kind}\u0000${condition.type}\u0000${conditionStatus}\u0000${reason}`;
      const type = condition.type;
      adjust(this.#conditions, key, sign, () => ({
        labels: { namespace, kind, type, status: conditionStatus, reason },
        count: 0,
      }));
    }
    const costKey = `${namespace}\u0000${kind}`;
    const cost = adjust(this.#costs, costKey, sign, () => ({ labels: { namespace, kind }, count: 0, dollars: 0 }));
    if (cost !== undefined) cost.dollars += sign * estimatedHourlyCost(kind, status);
  }
}

/** Two versions of an object that count alike: the same status object in the same namespace. */
function sameCounted(before: KubernetesObject, after: KubernetesObject): boolean {
  const status = (before as { status?: unknown }).status;
  return (
    status !== undefined &&
    status === (after as { status?: unknown }).status &&
    before.metadata?.namespace === after.metadata?.namespace
  );
}

/** Counts `key` up or down; an entry that falls to zero goes (no gauge for a label set nothing has any more). */
function adjust<Entry extends { count: number }>(
  entries: Map<string, Entry>,
  key: string,
  sign: 1 | -1,
  create: () => Entry,
): Entry | undefined {
  let entry = entries.get(key);
  if (entry === undefined) {
    if (sign < 0) return undefined;
    entry = create();
    entries.set(key, entry);
  }
  entry.count += sign;
  if (entry.count > 0) return entry;
  entries.delete(key);
  return undefined;
}

export function registerOperatorMetrics(registry: Registry, sources: OperatorMetricsSources): void {
  const now = sources.now ?? Date.now;
  const counts = new ManagedObjectCounts(sources.kinds);
  new Gauge({
    name: "gpucloud_managed_resources",
    help: "Managed objects per kind and Ready status",
    labelNames: ["kind", "ready"],
    registers: [registry],
    collect(this: Gauge<"kind" | "ready">) {
      this.reset();
      for (const { kind, ready, count } of counts.ready()) this.set({ kind, ready }, count);
    },
  });
  new Gauge({
    name: "gpucloud_managed_resource_conditions",
    help: "Managed objects per namespace, kind and condition (type, status, reason): e.g. how many are Stalled and why",
    labelNames: ["namespace", "kind", "type", "status", "reason"],
    registers: [registry],
    collect(this: Gauge<"namespace" | "kind" | "type" | "status" | "reason">) {
      this.reset();
      for (const { labels, count } of counts.conditions()) this.set(labels, count);
    },
  });
  new Gauge({
    name: "gpucloud_estimated_hourly_cost_dollars",
    help: "Estimated cost per hour of the managed cloud resources (running VMs by type price, disks by size)",
    labelNames: ["namespace", "kind"],
    registers: [registry],
    collect(this: Gauge<"namespace" | "kind">) {
      this.reset();
      // Rounded to a millionth: sums kept by adding and subtracting carry float dust.
      for (const { labels, dollars } of counts.costs()) this.set(labels, Math.max(0, Math.round(dollars * 1e6) / 1e6));
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
