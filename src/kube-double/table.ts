// `meta.k8s.io/v1` Table answers (what `kubectl get` prints): NAME, the printer columns, AGE.
import { evaluateJsonPath, JsonPathError } from "./jsonpath.ts";
import type { KubeObject, PrinterColumn, ResourceType } from "./types.ts";

export const TABLE_MEDIA = "as=Table";

export function wantsTable(accept: string | undefined): boolean {
  return accept?.includes(TABLE_MEDIA) === true;
}

/** Kubernetes' HumanDuration, as shown in AGE columns. */
export function humanAge(since: string | undefined, nowMs = Date.now()): string {
  if (since === undefined) return "<unknown>";
  const seconds = Math.max(0, Math.floor((nowMs - Date.parse(since)) / 1000));
  const minutes = Math.floor(seconds / 60);
  const hours = Math.floor(minutes / 60);
  const days = Math.floor(hours / 24);
  if (seconds < 120) return `${seconds}s`;
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  if (days < 8) return hours % 24 === 0 ? `${days}d` : `${days}d${hours % 24}h`;
  if (days < 365 * 2) return `${days}d`;
  const years = Math.floor(days / 365);
  if (days < 365 * 8 && days % 365 !== 0) return `${years}y${days % 365}d`;
  return `${years}y`;
}

/** Go's json.Marshal: map keys sorted, `<`, `>` and `&` escaped. */
function goJson(value: unknown): string {
  const sorted = (item: unknown): unknown => {
    if (Array.isArray(item)) return item.map(sorted);
    if (item !== null && typeof item === "object") {
      const record = item as Record<string, unknown>;
      return Object.fromEntries(
        Object.keys(record)
          .sort()
          .map((key) => [key, sorted(record[key])]),
      );
    }
    return item;
  };
  return JSON.stringify(sorted(value)).replace(/</g, "\\u003c").replace(/>/g, "\\u003e").replace(/&/g, "\\u0026");
}

interface ColumnDefinition {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}

function columnsOf(type: ResourceType): PrinterColumn[] {
  const columns = [...type.printerColumns];
  if (type.completeColumns === true) return columns;
  if (!columns.some((column) => column.name.toLowerCase() === "age" || column.type === "date")) {
    columns.push({ name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" });
  }
  return columns;
}

const NAME_COLUMN: ColumnDefinition = {
  name: "Name",
  type: "string",
  format: "name",
  description: "Name must be unique within a namespace.",
  priority: 0,
};

export function columnDefinitions(type: ResourceType): ColumnDefinition[] {
  return [
    ...(type.completeColumns === true ? [] : [NAME_COLUMN]),
    ...columnsOf(type).map((column) => ({
      name: column.name,
      type: column.type,
      format: column.format ?? "",
      description: column.description ?? "",
      priority: column.priority ?? 0,
    })),
  ];
}

function cell(object: KubeObject, column: PrinterColumn): unknown {
  if (column.compute) return column.compute(object);
  let values: unknown[];
  try {
    values = evaluateJsonPath(object, column.jsonPath);
  } catch (error) {
    if (error instanceof JsonPathError) return null;
    throw error;
  }
  // Like the real table convertor (apiextensions' tableconvertor): a column shows the first value its path
  // selects (`[*]` shows one item, not all); a string column prints it as kubectl's JSONPath printer does (a list
  // or map as JSON, a number or boolean as text); other types keep a value of their type only.
  const [first] = values;
  if (first === undefined || first === null) return null;
  switch (column.type) {
    case "string":
      return typeof first === "object" ? goJson(first) : String(first);
    case "integer":
      return typeof first === "number" ? Math.trunc(first) : null;
    case "number":
      return typeof first === "number" ? first : null;
    case "boolean":
      return typeof first === "boolean" ? first : null;
    case "date":
      if (typeof first !== "string") return null;
      return Number.isNaN(Date.parse(first)) ? "<invalid>" : humanAge(first);
    default:
      return null;
  }
}

export function tableRow(
  type: ResourceType,
  object: KubeObject,
  includeObject: string | null,
): Record<string, unknown> {
  const embedded =
    includeObject === "Object"
      ? object
      : includeObject === "None"
        ? undefined
        : { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: object.metadata };
  return {
    cells: [
      ...(type.completeColumns === true ? [] : [object.metadata.name ?? ""]),
      ...columnsOf(type).map((column) => cell(object, column)),
    ],
    ...(embedded === undefined ? {} : { object: embedded }),
  };
}

export function toTable(
  type: ResourceType,
  objects: KubeObject[],
  listMetadata: Record<string, unknown>,
  includeObject: string | null,
): Record<string, unknown> {
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata: listMetadata,
    columnDefinitions: columnDefinitions(type),
    rows: objects.map((object) => tableRow(type, object, includeObject)),
  };
}
