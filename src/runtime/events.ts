// An EventRecorder writing events.k8s.io/v1 Events for transitions. Repeats of the same
// (regarding, type, reason, note) within a window update `series` on the existing Event instead of creating a new
// one, and a per-object token bucket caps the writes, so a failing object cannot flood the API server.
import type { KubeConfig, KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { type Fence, isFenced } from "../util/fence.ts";
import { kubeRequest } from "./kube-http.ts";
import { statusOf, toKubeApiError } from "./status.ts";
import { type Clock, formatMicroTime, systemClock } from "./time.ts";

export const REPORTING_CONTROLLER = "gpucloud.dev/gpuvm-operator";

export type EventType = "Normal" | "Warning";

export interface EventInput {
  type: EventType;
  /** CamelCase machine-readable reason (from the fixed reason set). */
  reason: string;
  /** Human-readable text; truncated to 1 KiB. Never put secrets here. */
  note: string;
  /** What the controller did or failed to do, e.g. "Create", "Delete", "Reconcile". */
  action: string;
}

export interface EventRecorderOptions {
  kubeConfig: KubeConfig;
  /** This replica's identity (pod name), written as `reportingInstance`. */
  reportingInstance: string;
  logger: Logger;
  clock?: Clock;
  /** Repeats within this window become a series on one Event (default 10 min). */
  aggregationWindowMs?: number;
  /** Per-object token bucket: burst (default 25) and refill interval per token (default 5 min, as client-go). */
  burst?: number;
  refillIntervalMs?: number;
  /** Series and per-object buckets remembered, least recently used forgotten first (default 4096, as client-go). */
  maxTracked?: number;
  /**
   * An Event is recorded only while the fence lets writes leave (checked as it is recorded, in the recording
   * pass's context): a replica that lost its Lease, or a cancelled pass, tells nothing. The kubeConfig should
   * apply the same fence to the write itself (runtime/fencing.ts).
   */
  fence?: Fence;
}

interface SeriesState {
  eventName: string;
  namespace: string;
  /** Repeats are counted even when the bucket is empty; the next allowed write carries the total. */
  count: number;
  firstAt: number;
  lastAt: number;
}

interface Bucket {
  tokens: number;
  updatedAt: number;
}

const MAX_NOTE_BYTES = 1024;
const MAX_TRACKED = 4096;
const MERGE_PATCH = "application/merge-patch+json";
const eventsPath = (namespace: string): string =>
  `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/events`;

export class EventRecorder {
  readonly #kubeConfig: KubeConfig;
  readonly #options: EventRecorderOptions;
  readonly #clock: Clock;
  readonly #series = new Map<string, SeriesState>();
  readonly #buckets = new Map<string, Bucket>();
  #sequence = 0;
  /** Writes in flight, so tests and shutdown can wait for them. */
  readonly #pending = new Set<Promise<void>>();

  constructor(options: EventRecorderOptions) {
    this.#options = options;
    this.#kubeConfig = options.kubeConfig;
    this.#clock = options.clock ?? systemClock;
  }

  /**
   * Records an event about `regarding`. Never throws and never blocks the reconcile: a failed write is logged as
   * one line (the API server's message, not the HTTP exchange: a namespace being deleted refuses every Event of
   * its objects, and each refusal must stay one line in the log).
   */
  record(regarding: KubernetesObject, event: EventInput): void {
    const refusal = this.#options.fence?.writeGuard()();
    if (refusal !== undefined) {
      this.#options.logger.debug(
        { reason: event.reason, refusal },
        "event not recorded: this replica may not write now",
      );
      return;
    }
    const write = this.#record(regarding, event).catch((error: unknown) => {
      if (isFenced(error)) this.#options.logger.debug({ reason: event.reason }, "event not sent: fenced");
      else {
        const { kind, metadata } = regarding;
        this.#options.logger.warn(
          {
            reason: event.reason,
            regarding: `${kind ?? "?"} ${metadata?.namespace ? `${metadata.namespace}/` : ""}${metadata?.name ?? "?"}`,
            status: statusOf(error),
            error: oneLine(toKubeApiError(error, "write event").message),
          },
          "could not write event",
        );
      }
    });
    this.#pending.add(write);
    void write.finally(() => this.#pending.delete(write));
  }

  normal(regarding: KubernetesObject, reason: string, note: string, action: string): void {
    this.record(regarding, { type: "Normal", reason, note, action });
  }

  warning(regarding: KubernetesObject, reason: string, note: string, action: string): void {
    this.record(regarding, { type: "Warning", reason, note, action });
  }

  /** Resolves when every write started so far has finished. */
  async flush(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending]);
  }

  async #record(regarding: KubernetesObject, event: EventInput): Promise<void> {
    const metadata = regarding.metadata;
    if (!metadata?.name || !regarding.kind) {
      this.#options.logger.warn({ reason: event.reason }, "event dropped: regarding object has no kind or name");
      return;
    }
    const now = this.#clock.now();
    const namespace = metadata.namespace || "default";
    const objectId = metadata.uid ?? `${regarding.kind}/${namespace}/${metadata.name}`;
    const note = truncateUtf8(event.note, MAX_NOTE_BYTES);
    const seriesKey = JSON.stringify([objectId, event.type, event.reason, note]);
    const window = this.#options.aggregationWindowMs ?? 600_000;
    const existing = this.#series.get(seriesKey);
    const isRepeat = existing !== undefined && now - existing.lastAt <= window;
    if (isRepeat) {
      existing.count++;
      existing.lastAt = now;
      // Most recently used last: the least recently used series is the one forgotten when the map is full.
      this.#series.delete(seriesKey);
      this.#series.set(seriesKey, existing);
    }
    if (!this.#takeToken(objectId, now)) {
      this.#options.logger.debug({ reason: event.reason, object: metadata.name }, "event rate-limited for this object");
      return;
    }
    if (isRepeat) {
      await kubeRequest(
        this.#kubeConfig,
        "PATCH",
        `${eventsPath(existing.namespace)}/${encodeURIComponent(existing.eventName)}`,
        {
          body: { series: { count: existing.count, lastObservedTime: formatMicroTime(new Date(now)) } },
          contentType: MERGE_PATCH,
        },
      );
      return;
    }
    const eventName = eventNameFor(
      metadata.name,
      (BigInt(now) * 1_000_000n + BigInt(this.#sequence++ % 1_000_000)).toString(16),
    );
    const body = {
      apiVersion: "events.k8s.io/v1",
      kind: "Event",
      metadata: { name: eventName, namespace },
      eventTime: formatMicroTime(new Date(now)),
      reportingController: REPORTING_CONTROLLER,
      reportingInstance: this.#options.reportingInstance,
      action: event.action,
      reason: event.reason,
      note,
      type: event.type,
      regarding: {
        apiVersion: regarding.apiVersion,
        kind: regarding.kind,
        name: metadata.name,
        namespace: metadata.namespace,
        uid: metadata.uid,
        resourceVersion: metadata.resourceVersion,
      },
    };
    this.#remember(seriesKey, { eventName, namespace, count: 1, firstAt: now, lastAt: now });
    await kubeRequest(this.#kubeConfig, "POST", eventsPath(namespace), { body });
  }

  #takeToken(objectId: string, now: number): boolean {
    const burst = this.#options.burst ?? 25;
    const refill = this.#options.refillIntervalMs ?? 300_000;
    const bucket = this.#buckets.get(objectId) ?? { tokens: burst, updatedAt: now };
    bucket.tokens = Math.min(burst, bucket.tokens + (now - bucket.updatedAt) / refill);
    bucket.updatedAt = now;
    this.#buckets.delete(objectId);
    this.#buckets.set(objectId, bucket);
    forgetOldest(this.#buckets, this.#options.maxTracked ?? MAX_TRACKED);
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }

  /**
   * Keeps the series map bounded, as client-go's event correlator does (LRU caches of 4096): the least recently
   * used series is forgotten (a later repeat of it starts a new Event). O(1) per event: scanning the whole map
   * on each event once it was full made 10,000 objects' first events cost O(N²).
   */
  #remember(key: string, state: SeriesState): void {
    this.#series.set(key, state);
    forgetOldest(this.#series, this.#options.maxTracked ?? MAX_TRACKED);
  }
}

/** A name is a DNS subdomain: at most 253 characters. */
const MAX_NAME_LENGTH = 253;

/**
 * `<object name>.<unique suffix>`, as client-go names Events, with the object's name cut so that the whole stays
 * a valid name: an object may have a name of 253 characters, and its Events must not be refused for it. The cut
 * ends on a letter or digit, as every part of a DNS subdomain must.
 */
export function eventNameFor(objectName: string, suffix: string): string {
  const room = MAX_NAME_LENGTH - suffix.length - 1;
  const prefix = objectName.length <= room ? objectName : objectName.slice(0, room).replace(/[^a-z0-9]+$/, "");
  return prefix === "" ? suffix : `${prefix}.${suffix}`;
}

/** An error text on one line and of bounded length: an answer (an HTML error page) may hold many lines. */
function oneLine(text: string): string {
  const flat = text.replace(/\s*\n\s*/g, " ").trim();
  return flat.length <= 300 ? flat : `${flat.slice(0, 297)}...`;
}

/** Drops the oldest entries (insertion order: entries are re-inserted when used) beyond `max`. */
function forgetOldest<V>(map: Map<string, V>, max: number): void {
  while (map.size > max) {
    const oldest = map.keys().next();
    if (oldest.done === true) return;
    map.delete(oldest.value);
  }
}

function truncateUtf8(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= maxBytes) return text;
  // Cut on a character boundary and mark the cut.
  return `${new TextDecoder().decode(bytes.subarray(0, maxBytes - 3)).replace(/\uFFFD$/, "")}...`;
}
