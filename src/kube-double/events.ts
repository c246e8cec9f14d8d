// Events are one resource behind two APIs, as in Kubernetes: an Event written through events.k8s.io/v1 is
// served by core/v1 (so `kubectl get events` and `kubectl describe` show it) and the other way round. The
// double stores the core/v1 form and converts at the edges, with the field mapping of the real conversion
// (k8s.io/kubernetes pkg/apis/events/v1): regarding ⇄ involvedObject, note ⇄ message, reportingController ⇄
// reportingComponent, deprecatedSource/FirstTimestamp/LastTimestamp/Count ⇄ source/firstTimestamp/…/count.
import { humanAge } from "./table.ts";
import { isRecord, type KubeObject, type PrinterColumn, type ResourceType } from "./types.ts";

/** [events.k8s.io/v1 field, core/v1 field]; the other fields (reason, type, action, eventTime, series, related,
 * reportingInstance, metadata) have the same name in both. */
const RENAMED_FIELDS: readonly (readonly [string, string])[] = [
  ["regarding", "involvedObject"],
  ["note", "message"],
  ["reportingController", "reportingComponent"],
  ["deprecatedSource", "source"],
  ["deprecatedFirstTimestamp", "firstTimestamp"],
  ["deprecatedLastTimestamp", "lastTimestamp"],
  ["deprecatedCount", "count"],
];

export function isEventsApi(type: Pick<ResourceType, "group" | "plural">): boolean {
  return type.group === "events.k8s.io" && type.plural === "events";
}

function rename(object: KubeObject, from: 0 | 1): KubeObject {
  const to = from === 0 ? 1 : 0;
  const renamed: KubeObject = { ...object };
  for (const pair of RENAMED_FIELDS) delete renamed[pair[to]];
  for (const pair of RENAMED_FIELDS) {
    const value = object[pair[from]];
    delete renamed[pair[from]];
    if (value !== undefined) renamed[pair[to]] = value;
  }
  return renamed;
}

/** An events.k8s.io/v1 Event as the core/v1 Event it is stored as. */
export function eventToCore(event: KubeObject): KubeObject {
  return { ...rename(event, 0), apiVersion: "v1", kind: "Event" };
}

/** A stored core/v1 Event as events.k8s.io/v1 serves it. */
export function eventFromCore(event: KubeObject): KubeObject {
  return { ...rename(event, 1), apiVersion: "events.k8s.io/v1", kind: "Event" };
}

/**
 * An Event as the real server answers it: Go's zero values of the fields it never omits (an empty source,
 * null timestamps, empty reporting strings in core/v1), so clients see the same keys whoever wrote it.
 */
export function eventAnswer(stored: KubeObject, api: "core" | "events.k8s.io"): KubeObject {
  if (api === "core") {
    return {
      ...stored,
      source: stored.source ?? {},
      firstTimestamp: stored.firstTimestamp ?? null,
      lastTimestamp: stored.lastTimestamp ?? null,
      eventTime: stored.eventTime ?? null,
      reportingComponent: stored.reportingComponent ?? "",
      reportingInstance: stored.reportingInstance ?? "",
      apiVersion: "v1",
      kind: "Event",
    };
  }
  const event = eventFromCore(stored);
  if (event.reportingController === "") delete event.reportingController;
  if (event.reportingInstance === "") delete event.reportingInstance;
  return {
    ...event,
    eventTime: event.eventTime ?? null,
    deprecatedSource: event.deprecatedSource ?? {},
    deprecatedFirstTimestamp: event.deprecatedFirstTimestamp ?? null,
    deprecatedLastTimestamp: event.deprecatedLastTimestamp ?? null,
  };
}

function text(value: unknown): string {
  return typeof value === "string" ? value : "";
}

function asCore(object: KubeObject): KubeObject {
  return object.apiVersion === "events.k8s.io/v1" ? eventToCore(object) : object;
}

function firstSeen(event: KubeObject): string {
  return humanAge(text(event.firstTimestamp) || text(event.eventTime) || undefined);
}

function lastSeen(event: KubeObject): string {
  if (isRecord(event.series)) return humanAge(text(event.series.lastObservedTime) || undefined);
  return text(event.lastTimestamp) ? humanAge(text(event.lastTimestamp)) : firstSeen(event);
}

function count(event: KubeObject): number {
  if (isRecord(event.series) && typeof event.series.count === "number") return event.series.count;
  return typeof event.count === "number" && event.count !== 0 ? event.count : 1;
}

function involved(event: KubeObject): Record<string, unknown> {
  return isRecord(event.involvedObject) ? event.involvedObject : {};
}

function eventColumn(
  name: string,
  compute: (event: KubeObject) => unknown,
  extra: Partial<PrinterColumn> = {},
): PrinterColumn {
  return { name, type: "string", jsonPath: "", compute: (object) => compute(asCore(object)), ...extra };
}

/**
 * The columns kube-apiserver prints for Events of either API (its printer works on the one internal Event):
 * no leading NAME and no AGE; kubectl shows the priority-0 ones, `-o wide` all.
 */
export const EVENT_COLUMNS: PrinterColumn[] = [
  eventColumn("Last Seen", lastSeen),
  eventColumn("Type", (event) => text(event.type)),
  eventColumn("Reason", (event) => text(event.reason)),
  eventColumn("Object", (event) => {
    const target = involved(event);
    const kind = text(target.kind).toLowerCase();
    return text(target.name) === "" ? kind : `${kind}/${text(target.name)}`;
  }),
  eventColumn("Subobject", (event) => text(involved(event).fieldPath), { priority: 1 }),
  eventColumn(
    "Source",
    (event) => {
      const source = isRecord(event.source) ? event.source : {};
      const component = text(source.component) || text(event.reportingComponent);
      const instance = text(source.host) || text(event.reportingInstance);
      return instance === "" ? component : `${component}, ${instance}`;
    },
    { priority: 1 },
  ),
  eventColumn("Message", (event) => text(event.message).trim()),
  eventColumn("First Seen", firstSeen, { priority: 1 }),
  eventColumn("Count", count, { priority: 1 }),
  eventColumn("Name", (event) => text(event.metadata.name), { priority: 1, format: "name" }),
];
