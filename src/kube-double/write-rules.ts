// What a write must satisfy, and what the server itself sets, before an object is stored: the checks and
// preparations of kube-apiserver's REST strategies. The body's kind and apiVersion, names, the namespace,
// MicroTimes, a Secret's stringData, a custom resource's schema and CEL rules, a CRD's status, what each endpoint
// (main or /status) may change, the metadata only the server writes, and when a write bumps the generation.
// Pure functions of the objects: the order of a write and the store are api.ts's.
import { CRD_TYPE, NAMESPACE_TYPE, typesFromCrd } from "./resources.ts";
import { admitCustomResource } from "./schema.ts";
import { badRequest, invalid } from "./status.ts";
import {
  apiVersionOf,
  deepClone,
  deepEqual,
  isRecord,
  type KubeObject,
  type ResourceType,
  storageKeyOf,
} from "./types.ts";

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Metadata only the server writes: an update or patch always keeps the stored object's values. */
const SYSTEM_METADATA = [
  "uid",
  "creationTimestamp",
  "generation",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
  "namespace",
  "name",
];

/** Now, as the server stamps metadata and conditions: RFC 3339 in whole seconds. */
export function serverTime(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, "Z");
}

/** Like the real server: custom resources and CRDs count generations; Secrets, Events, Leases… have none. */
export function hasGeneration(type: ResourceType): boolean {
  return type.custom || type === CRD_TYPE;
}

/** Everything but metadata and status: a change here bumps metadata.generation. */
function specPart(object: KubeObject): Record<string, unknown> {
  const { metadata: _metadata, status: _status, apiVersion: _apiVersion, kind: _kind, ...rest } = object;
  return rest;
}

export function specChanged(old: KubeObject, next: KubeObject): boolean {
  return !deepEqual(specPart(old), specPart(next));
}

function withoutVolatile(object: KubeObject): unknown {
  const { managedFields: _managedFields, resourceVersion: _resourceVersion, ...metadata } = object.metadata;
  return { ...object, metadata };
}

/** A write that changes nothing but managedFields: the real server stores nothing, not even a resourceVersion. */
export function changesNothing(old: KubeObject, next: KubeObject): boolean {
  return deepEqual(withoutVolatile(old), withoutVolatile(next));
}

/** A request body as an object of `type`: a JSON object whose kind and group, when given, are the URL's. */
export function checkBody(type: ResourceType, body: unknown): KubeObject {
  if (!isRecord(body)) throw badRequest("the request body must be a JSON object");
  if (body.metadata !== undefined && !isRecord(body.metadata)) throw badRequest("metadata must be an object");
  if (body.kind !== undefined && body.kind !== type.kind) {
    throw badRequest(`the kind of the object (${String(body.kind)}) does not match the kind of the URL (${type.kind})`);
  }
  if (body.apiVersion !== undefined) {
    const group =
      typeof body.apiVersion === "string" && body.apiVersion.includes("/") ? body.apiVersion.split("/")[0] : "";
    if (group !== type.group) {
      throw badRequest(
        `the API version in the data (${String(body.apiVersion)}) does not match the expected API version (${apiVersionOf(type)})`,
      );
    }
  }
  const object = deepClone(body) as KubeObject;
  object.metadata = isRecord(body.metadata) ? object.metadata : {};
  object.apiVersion = apiVersionOf(type);
  object.kind = type.kind;
  return object;
}

/** A name as the kind requires it: an RFC 1123 label for namespaces, a subdomain for everything else. */
export function checkName(type: ResourceType, object: KubeObject): void {
  const name = object.metadata.name ?? "";
  const pattern = type === NAMESPACE_TYPE ? DNS_LABEL : DNS_SUBDOMAIN;
  const limit = type === NAMESPACE_TYPE ? 63 : 253;
  if (!pattern.test(name) || name.length > limit) {
    throw invalid(type, name, [
      {
        reason: "FieldValueInvalid",
        field: "metadata.name",
        message: `Invalid value: "${name}": a lowercase RFC 1123 ${type === NAMESPACE_TYPE ? "label" : "subdomain"} must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`,
      },
    ]);
  }
}

/** The object's namespace from the URL and the body, which must agree; none for cluster-scoped kinds. */
export function placeNamespace(type: ResourceType, object: KubeObject, namespace: string | undefined): void {
  if (!type.namespaced) {
    delete object.metadata.namespace;
    return;
  }
  const inBody = object.metadata.namespace;
  if (inBody !== undefined && inBody !== "" && namespace !== undefined && inBody !== namespace) {
    throw badRequest("the namespace of the provided object does not match the namespace sent on the request");
  }
  const effective = namespace ?? inBody;
  if (effective === undefined || effective === "") throw badRequest("a namespace is required for namespaced resources");
  object.metadata.namespace = effective;
}

/** MicroTime fields, which the real server parses with exactly six fractional digits (kubernetes#94748). */
const MICRO_TIME_FIELDS: Record<string, string[][]> = {
  "coordination.k8s.io/leases": [
    ["spec", "acquireTime"],
    ["spec", "renewTime"],
  ],
  "/events": [["eventTime"], ["series", "lastObservedTime"]],
};
const MICRO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$/;

function checkMicroTimes(type: ResourceType, object: KubeObject): void {
  for (const path of MICRO_TIME_FIELDS[storageKeyOf(type)] ?? []) {
    let value: unknown = object;
    for (const key of path) value = isRecord(value) ? value[key] : undefined;
    if (value === undefined || value === null) continue;
    if (typeof value !== "string" || !MICRO_TIME.test(value)) {
      throw badRequest(
        `${type.kind} in version "${type.version}" cannot be handled as a ${type.kind}: ${path.join(".")}: unable to parse ${JSON.stringify(value)} as a MicroTime (RFC 3339 with exactly six fractional digits)`,
      );
    }
  }
}

/** Like the real server: `stringData` is merged into `data` (base64) and never stored; type defaults to Opaque. */
function normalizeSecret(object: KubeObject): void {
  if (isRecord(object.stringData)) {
    const data: Record<string, unknown> = isRecord(object.data) ? { ...object.data } : {};
    for (const [key, value] of Object.entries(object.stringData))
      data[key] = Buffer.from(String(value)).toString("base64");
    object.data = data;
  }
  delete object.stringData;
  if (object.type === undefined || object.type === "") object.type = "Opaque";
}

/** A CRD is accepted as valid and served at once: its names accepted, Established, its first version stored. */
function establishCrd(object: KubeObject): void {
  const { types, causes } = typesFromCrd(object);
  if (causes.length > 0) throw invalid(CRD_TYPE, object.metadata.name ?? "", causes);
  const spec = isRecord(object.spec) ? object.spec : {};
  object.status = {
    conditions: [
      {
        type: "NamesAccepted",
        status: "True",
        reason: "NoConflicts",
        message: "no conflicts found",
        lastTransitionTime: serverTime(),
      },
      {
        type: "Established",
        status: "True",
        reason: "InitialNamesAccepted",
        message: "the initial names have been accepted",
        lastTransitionTime: serverTime(),
      },
    ],
    acceptedNames: spec.names,
    storedVersions: types.map((served) => served.version).slice(0, 1),
  };
}

export interface AdmitOptions {
  /** `fieldValidation=Strict`: unknown fields are an error instead of being pruned. */
  strict: boolean;
  /** A CEL rule outside the supported subset was skipped. */
  onSkippedRule: (rule: string) => void;
}

/** Validates (and defaults, prunes, normalizes) an object about to be stored; `old` is the stored one. */
export function admitObject(
  type: ResourceType,
  object: KubeObject,
  old: KubeObject | undefined,
  options: AdmitOptions,
): void {
  checkMicroTimes(type, object);
  if (type.group === "" && type.plural === "secrets") normalizeSecret(object);
  if (type.custom)
    admitCustomResource(type, object, { strict: options.strict, old, onSkippedRule: options.onSkippedRule });
  if (type === CRD_TYPE) establishCrd(object);
}

/** The stored object's system-owned metadata and resourceVersion, over whatever an update proposes. */
export function keepSystemMetadata(old: KubeObject, next: KubeObject): void {
  for (const field of SYSTEM_METADATA) {
    if (old.metadata[field] === undefined) delete next.metadata[field];
    else next.metadata[field] = old.metadata[field];
  }
  next.metadata.resourceVersion = old.metadata.resourceVersion;
}

/**
 * What a write may change depends on the endpoint: /status only status (and, by apply, its managedFields), the
 * main one everything else, the status of a kind with a status subresource excepted. No finalizer may be added
 * to an object being deleted.
 */
export function limitToEndpoint(
  type: ResourceType,
  old: KubeObject,
  proposed: KubeObject,
  subresource: string | undefined,
  operation: "update" | "apply",
): KubeObject {
  if (subresource === "status") {
    const next: KubeObject = { ...deepClone(old), apiVersion: apiVersionOf(type), kind: type.kind };
    if (proposed.status === undefined) delete next.status;
    else next.status = proposed.status;
    if (operation === "apply") next.metadata.managedFields = proposed.metadata.managedFields;
    return next;
  }
  const next = proposed;
  if (type.statusSubresource) {
    if (old.status === undefined) delete next.status;
    else next.status = deepClone(old.status);
  }
  const previous = old.metadata.finalizers ?? [];
  const added = (next.metadata.finalizers ?? []).filter((finalizer) => !previous.includes(finalizer));
  if (old.metadata.deletionTimestamp !== undefined && added.length > 0) {
    throw invalid(type, old.metadata.name ?? "", [
      {
        reason: "FieldValueForbidden",
        field: "metadata.finalizers",
        message: "Forbidden: no new finalizers can be added if the object is being deleted",
      },
    ]);
  }
  return next;
}
