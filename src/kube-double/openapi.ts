// The OpenAPI v3 documents kubectl reads: the root index and one document per group-version, with the
// `x-kubernetes-action` / `x-kubernetes-group-version-kind` operation extensions and the `fieldValidation`
// query parameter that make `kubectl apply` use server-side field validation, and component schemas for
// `kubectl explain`.
import { createHash } from "node:crypto";
import type { ResourceRegistry } from "./resources.ts";
import { isRecord, type JsonSchema, type ResourceType } from "./types.ts";

const OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

function reverseGroup(group: string): string {
  return group.split(".").reverse().join(".");
}

export function schemaName(type: Pick<ResourceType, "group" | "version" | "kind">, suffix = ""): string {
  if (type.group === "") return `io.k8s.api.core.${type.version}.${type.kind}${suffix}`;
  return `${reverseGroup(type.group)}.${type.version}.${type.kind}${suffix}`;
}

export function groupVersionPath(group: string, version: string): string {
  return group === "" ? `api/${version}` : `apis/${group}/${version}`;
}

const QUERY_PARAMETERS = ["dryRun", "fieldManager", "fieldValidation", "pretty"].map((name) => ({
  name,
  in: "query",
  description:
    name === "fieldValidation"
      ? "Ignore, Warn or Strict: how the server treats unknown or duplicate fields."
      : `${name} option.`,
  schema: { type: "string", uniqueItems: true },
}));

const PATCH_BODY = {
  content: Object.fromEntries(
    ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"].map((media) => [
      media,
      { schema: { type: "object" } },
    ]),
  ),
  required: true,
};

function operation(
  type: ResourceType,
  action: string,
  responseSchema: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    operationId: `${action}${type.kind}`,
    description: `${action} ${type.kind}`,
    parameters: action === "post" || action === "patch" || action === "put" ? QUERY_PARAMETERS : [],
    responses: {
      "200": {
        description: "OK",
        content: { "application/json": { schema: { $ref: `#/components/schemas/${responseSchema}` } } },
      },
    },
    "x-kubernetes-action": action,
    "x-kubernetes-group-version-kind": { group: type.group, version: type.version, kind: type.kind },
    ...extra,
  };
}

function pathsFor(type: ResourceType): Record<string, unknown> {
  const prefix = `/${groupVersionPath(type.group, type.version)}`;
  const collection = type.namespaced ? `${prefix}/namespaces/{namespace}/${type.plural}` : `${prefix}/${type.plural}`;
  const item = `${collection}/{name}`;
  const self = schemaName(type);
  const list = schemaName(type, "List");
  const paths: Record<string, unknown> = {
    [collection]: {
      get: operation(type, "list", list),
      post: operation(type, "post", self, {
        requestBody: {
          content: { "application/json": { schema: { $ref: `#/components/schemas/${self}` } } },
          required: true,
        },
      }),
      delete: operation(type, "deletecollection", list),
    },
    [item]: {
      get: operation(type, "get", self),
      put: operation(type, "put", self),
      patch: operation(type, "patch", self, { requestBody: PATCH_BODY }),
      delete: operation(type, "delete", self),
    },
  };
  if (type.statusSubresource) {
    paths[`${item}/status`] = {
      get: operation(type, "get", self),
      put: operation(type, "put", self),
      patch: operation(type, "patch", self, { requestBody: PATCH_BODY }),
    };
  }
  if (type.namespaced) paths[`${prefix}/${type.plural}`] = { get: operation(type, "list", list) };
  return paths;
}

function withMetadataRef(schema: JsonSchema): JsonSchema {
  const properties = isRecord(schema.properties) ? schema.properties : {};
  return {
    ...schema,
    properties: {
      apiVersion: {
        type: "string",
        description: "APIVersion defines the versioned schema of this representation of an object.",
      },
      kind: {
        type: "string",
        description: "Kind is a string value representing the REST resource this object represents.",
      },
      ...properties,
      metadata: {
        description: "Standard object's metadata.",
        allOf: [{ $ref: `#/components/schemas/${OBJECT_META}` }],
      },
    },
  };
}

const LOOSE_SCHEMA: JsonSchema = { type: "object", "x-kubernetes-preserve-unknown-fields": true };

const META_SCHEMAS: Record<string, JsonSchema> = {
  [OBJECT_META]: {
    description: "ObjectMeta is metadata that all persisted resources must have.",
    type: "object",
    properties: {
      ...Object.fromEntries(
        ["name", "generateName", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"].map(
          (field) => [field, { type: "string", description: `${field} of the object.` }],
        ),
      ),
      generation: {
        type: "integer",
        format: "int64",
        description: "A sequence number representing a specific generation of the desired state.",
      },
      labels: {
        type: "object",
        additionalProperties: { type: "string" },
        description: "Map of string keys and values for selecting objects.",
      },
      annotations: {
        type: "object",
        additionalProperties: { type: "string" },
        description: "Unstructured key value map.",
      },
      finalizers: {
        type: "array",
        items: { type: "string" },
        description: "Must be empty before the object is deleted from the registry.",
      },
    },
  },
  [LIST_META]: {
    description: "ListMeta describes metadata that synthetic resources must have.",
    type: "object",
    properties: {
      resourceVersion: { type: "string" },
      continue: { type: "string" },
      remainingItemCount: { type: "integer" },
    },
  },
};

export function groupVersionDocument(
  registry: ResourceRegistry,
  group: string,
  version: string,
): Record<string, unknown> | undefined {
  const types = registry.all().filter((type) => type.group === group && type.version === version);
  if (types.length === 0) return undefined;
  const paths: Record<string, unknown> = {};
  const schemas: Record<string, unknown> = { ...META_SCHEMAS };
  for (const type of types) {
    Object.assign(paths, pathsFor(type));
    const gvk = [{ group: type.group, version: type.version, kind: type.kind }];
    schemas[schemaName(type)] = {
      ...withMetadataRef(type.schema ?? LOOSE_SCHEMA),
      "x-kubernetes-group-version-kind": gvk,
    };
    schemas[schemaName(type, "List")] = {
      type: "object",
      required: ["items"],
      properties: {
        apiVersion: { type: "string" },
        kind: { type: "string" },
        items: { type: "array", items: { $ref: `#/components/schemas/${schemaName(type)}` } },
        metadata: { allOf: [{ $ref: `#/components/schemas/${LIST_META}` }] },
      },
      "x-kubernetes-group-version-kind": [{ group: type.group, version: type.version, kind: type.listKind }],
    };
  }
  return {
    openapi: "3.0.0",
    info: { title: "Kubernetes API test double", version: "v1" },
    paths,
    components: { schemas },
  };
}

export function rootDocument(registry: ResourceRegistry): Record<string, unknown> {
  const seen = new Set<string>();
  const paths: Record<string, unknown> = {};
  for (const type of registry.all()) {
    const path = groupVersionPath(type.group, type.version);
    if (seen.has(path)) continue;
    seen.add(path);
    const hash = createHash("sha256")
      .update(JSON.stringify(groupVersionDocument(registry, type.group, type.version)))
      .digest("hex")
      .slice(0, 32)
      .toUpperCase();
    paths[path] = { serverRelativeURL: `/openapi/v3/${path}?hash=${hash}` };
  }
  return { paths };
}
