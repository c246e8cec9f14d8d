// Shapes shared by the Kubernetes API test double's modules. Objects are kept as plain JSON; these types
// only name the parts the double itself reads or writes.

export type JsonObject = Record<string, unknown>;

export interface ManagedFieldsEntry {
  manager: string;
  operation: "Apply" | "Update";
  apiVersion: string;
  time: string;
  fieldsType: "FieldsV1";
  fieldsV1: JsonObject;
  subresource?: string;
}

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  managedFields?: ManagedFieldsEntry[];
  [key: string]: unknown;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

export interface PrinterColumn {
  name: string;
  type: string;
  jsonPath: string;
  description?: string;
  priority?: number;
  format?: string;
  /** Built-in columns that JSONPath cannot express (DATA counts); custom resources never have one. */
  compute?: (object: KubeObject) => unknown;
}

/**
 * Fields of a built-in kind that managedFields treat specially: `atomic` maps are owned whole (an
 * ObjectReference), `alwaysPresent` structs exist even when empty (a Lease's spec), so no manager owns them.
 */
export interface FieldShape {
  atomic: string[][];
  alwaysPresent: string[][];
}

/** A JSON (OpenAPI v3 structural) schema as found in a CRD's `openAPIV3Schema`. */
export type JsonSchema = JsonObject;

/** A CRD version's `subresources.scale`: where the replicas and the label selector are (scale-paths.ts). */
export interface ScalePaths {
  specReplicasPath: string;
  statusReplicasPath: string;
  labelSelectorPath: string | undefined;
}

/** One served resource: a built-in kind or one version of a custom resource. */
export interface ResourceType {
  group: string;
  version: string;
  kind: string;
  listKind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  categories: string[];
  namespaced: boolean;
  statusSubresource: boolean;
  /** The scale subresource's JSON paths, when the CRD enables it. */
  scale?: ScalePaths;
  /** Only custom resources carry a schema; built-ins are stored as sent. */
  schema: JsonSchema | undefined;
  printerColumns: PrinterColumn[];
  /** How managedFields see this kind's fields (see managed-fields.ts); none for custom resources. */
  fieldShape?: FieldShape;
  /** The printer columns are the whole row: no NAME first, no AGE added (Events, as kube-apiserver prints them). */
  completeColumns?: boolean;
  custom: boolean;
}

export function isRecord(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function apiVersionOf(type: { group: string; version: string }): string {
  return type.group === "" ? type.version : `${type.group}/${type.version}`;
}

/**
 * The storage key of a resource: version-independent, like etcd's. Events of events.k8s.io are stored with the
 * core ones (see events.ts), as the real server stores both under /registry/events.
 */
export function storageKeyOf(type: { group: string; plural: string }): string {
  if (type.group === "events.k8s.io" && type.plural === "events") return "/events";
  return `${type.group}/${type.plural}`;
}

export function deepClone<T>(value: T): T {
  return structuredClone(value);
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((item, index) => deepEqual(item, b[index]));
  }
  if (isRecord(a) && isRecord(b)) {
    const aKeys = Object.keys(a).filter((key) => a[key] !== undefined);
    const bKeys = Object.keys(b).filter((key) => b[key] !== undefined);
    return aKeys.length === bKeys.length && aKeys.every((key) => deepEqual(a[key], b[key]));
  }
  return false;
}
