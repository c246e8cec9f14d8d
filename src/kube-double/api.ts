// The API semantics, independent of HTTP: create, read, update, patch and delete with resourceVersion
// preconditions, generation, the status subresource, finalizers, generateName, managed fields and CRD
// registration.
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { parse as parseYaml } from "yaml";
import { eventAnswer, eventFromCore, eventToCore, isEventsApi } from "./events.ts";
import { recordUpdate, serverSideApply } from "./managed-fields.ts";
import { applyJsonPatch, applyMerge, applyMergePatch } from "./patch.ts";
import { CRD_TYPE, NAMESPACE_TYPE, type ResourceRegistry, typesFromCrd } from "./resources.ts";
import { admitCustomResource } from "./schema.ts";
import { type FieldSelector, type LabelSelector, matchesFields, matchesLabels } from "./selectors.ts";
import {
  ApiError,
  alreadyExists,
  badRequest,
  conflict,
  gone,
  invalid,
  notFound,
  STALE_OBJECT,
  unsupportedMediaType,
} from "./status.ts";
import type { ObjectStore } from "./store.ts";
import {
  apiVersionOf,
  deepClone,
  deepEqual,
  isRecord,
  type KubeObject,
  type ResourceType,
  storageKeyOf,
} from "./types.ts";

export interface WriteOptions {
  strict: boolean;
  fieldManager: string | undefined;
  dryRun: boolean;
  /** `scale`: a write through /scale (see scale.ts); recorded as such in managedFields. */
  subresource: "status" | "scale" | undefined;
}

export interface PatchOptions extends WriteOptions {
  force: boolean;
}

export interface ListOptions {
  labelSelector: LabelSelector;
  fieldSelector: FieldSelector;
  limit: number | undefined;
  continueToken: string | undefined;
}

export interface DeleteOptions {
  preconditions?: { uid?: string; resourceVersion?: string };
  dryRun: boolean;
}

const PROTECTED_NAMESPACES = ["default", "kube-system", "kube-public"];
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const GENERATE_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789";

function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, "Z");
}

function randomSuffix(): string {
  let suffix = "";
  for (let index = 0; index < 5; index++) {
    suffix += GENERATE_NAME_ALPHABET[Math.floor(Math.random() * GENERATE_NAME_ALPHABET.length)];
  }
  return suffix;
}

/** Everything but metadata and status: a change here bumps metadata.generation. */
function specPart(object: KubeObject): Record<string, unknown> {
  const { metadata: _metadata, status: _status, apiVersion: _apiVersion, kind: _kind, ...rest } = object;
  return rest;
}

function hasGeneration(type: ResourceType): boolean {
  return type.custom || type === CRD_TYPE;
}

function withoutVolatile(object: KubeObject): unknown {
  const { managedFields: _managedFields, resourceVersion: _resourceVersion, ...metadata } = object.metadata;
  return { ...object, metadata };
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

interface ContinueToken {
  after: string;
  resourceVersion: number;
}

export class KubeApi {
  readonly registry: ResourceRegistry;
  readonly store: ObjectStore;
  #logger: Logger;
  #timers = new Set<NodeJS.Timeout>();

  constructor(registry: ResourceRegistry, store: ObjectStore, logger: Logger) {
    this.registry = registry;
    this.store = store;
    this.#logger = logger;
  }

  /** An object as served under `type`'s version: a copy with that apiVersion and kind. */
  present(type: ResourceType, object: KubeObject): KubeObject {
    const copy = deepClone(object);
    if (isEventsApi(type)) return eventAnswer(copy, "events.k8s.io");
    if (type.group === "" && type.plural === "events") return eventAnswer(copy, "core");
    return { ...copy, apiVersion: apiVersionOf(type), kind: type.kind };
  }

  #require(type: ResourceType, namespace: string | undefined, name: string): KubeObject {
    const object = this.store.get(storageKeyOf(type), type.namespaced ? namespace : undefined, name);
    if (!object) throw notFound(type, name);
    return object;
  }

  exists(type: ResourceType, namespace: string | undefined, name: string): boolean {
    return this.store.get(storageKeyOf(type), type.namespaced ? namespace : undefined, name) !== undefined;
  }

  get(type: ResourceType, namespace: string | undefined, name: string): KubeObject {
    return this.present(type, this.#require(type, namespace, name));
  }

  /** The object with the field names of the API it is served by (field selectors see those). */
  #view(type: ResourceType, object: KubeObject): KubeObject {
    return isEventsApi(type) ? eventFromCore(object) : object;
  }

  matches(object: KubeObject, labelSelector: LabelSelector, fieldSelector: FieldSelector): boolean {
    return matchesLabels(labelSelector, object.metadata.labels) && matchesFields(fieldSelector, object);
  }

  list(type: ResourceType, namespace: string | undefined, options: ListOptions): KubeObject {
    let after = "";
    if (options.continueToken !== undefined) {
      const token = this.#decodeContinue(options.continueToken);
      if (token.resourceVersion < this.store.oldestServable) {
        throw gone("The provided continue parameter is too old to display a consistent list result.");
      }
      after = token.after;
    }
    const keyOf = (object: KubeObject): string => `${object.metadata.namespace ?? ""}/${object.metadata.name ?? ""}`;
    const matching = this.store
      .list(storageKeyOf(type), namespace)
      .filter((object) => this.matches(this.#view(type, object), options.labelSelector, options.fieldSelector))
      .filter((object) => after === "" || keyOf(object) > after);
    const page = options.limit !== undefined && options.limit > 0 ? matching.slice(0, options.limit) : matching;
    // Custom resource lists carry `continue: ""` on the last page, as the real server's unstructured lists do.
    const metadata: Record<string, unknown> = {
      ...(type.custom ? { continue: "" } : {}),
      resourceVersion: String(this.store.resourceVersion),
    };
    const last = page.at(-1);
    if (page.length < matching.length && last) {
      const token: ContinueToken = { after: keyOf(last), resourceVersion: this.store.resourceVersion };
      metadata.continue = Buffer.from(JSON.stringify(token)).toString("base64url");
      metadata.remainingItemCount = matching.length - page.length;
    }
    return {
      apiVersion: apiVersionOf(type),
      kind: type.listKind,
      metadata,
      items: page.map((object) => this.present(type, object)),
    };
  }

  #decodeContinue(token: string): ContinueToken {
    try {
      const parsed: unknown = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
      if (isRecord(parsed) && typeof parsed.after === "string" && typeof parsed.resourceVersion === "number") {
        return { after: parsed.after, resourceVersion: parsed.resourceVersion };
      }
    } catch (error) {
      throw badRequest("invalid continue token", undefined, { cause: error });
    }
    throw badRequest("invalid continue token");
  }

  #checkBody(type: ResourceType, body: unknown): KubeObject {
    if (!isRecord(body)) throw badRequest("the request body must be a JSON object");
    if (body.metadata !== undefined && !isRecord(body.metadata)) throw badRequest("metadata must be an object");
    if (body.kind !== undefined && body.kind !== type.kind) {
      throw badRequest(
        `the kind of the object (${String(body.kind)}) does not match the kind of the URL (${type.kind})`,
      );
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

  #checkName(type: ResourceType, object: KubeObject): void {
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

  #placeNamespace(type: ResourceType, object: KubeObject, namespace: string | undefined): void {
    if (!type.namespaced) {
      delete object.metadata.namespace;
      return;
    }
    const inBody = object.metadata.namespace;
    if (inBody !== undefined && inBody !== "" && namespace !== undefined && inBody !== namespace) {
      throw badRequest("the namespace of the provided object does not match the namespace sent on the request");
    }
    const effective = namespace ?? inBody;
    if (effective === undefined || effective === "")
      throw badRequest("a namespace is required for namespaced resources");
    object.metadata.namespace = effective;
  }

  #admit(type: ResourceType, object: KubeObject, old: KubeObject | undefined, options: WriteOptions): void {
    checkMicroTimes(type, object);
    if (type.group === "" && type.plural === "secrets") normalizeSecret(object);
    if (type.custom) {
      admitCustomResource(type, object, {
        strict: options.strict,
        old,
        onSkippedRule: (rule) =>
          this.#logger.debug({ rule, kind: type.kind }, "CEL rule outside the supported subset skipped"),
      });
    }
    if (type === CRD_TYPE) {
      const { types, causes } = typesFromCrd(object);
      if (causes.length > 0) throw invalid(type, object.metadata.name ?? "", causes);
      const spec = isRecord(object.spec) ? object.spec : {};
      object.status = {
        conditions: [
          {
            type: "NamesAccepted",
            status: "True",
            reason: "NoConflicts",
            message: "no conflicts found",
            lastTransitionTime: now(),
          },
          {
            type: "Established",
            status: "True",
            reason: "InitialNamesAccepted",
            message: "the initial names have been accepted",
            lastTransitionTime: now(),
          },
        ],
        acceptedNames: spec.names,
        storedVersions: types.map((served) => served.version).slice(0, 1),
      };
    }
  }

  #afterStore(type: ResourceType, object: KubeObject, deleted: boolean): void {
    if (type !== CRD_TYPE) return;
    const name = object.metadata.name ?? "";
    if (deleted) {
      const served = typesFromCrd(object).types;
      this.registry.removeCrd(name);
      // Deleting a CRD deletes its custom resources.
      for (const crType of served.slice(0, 1)) {
        for (const resource of this.store.list(storageKeyOf(crType))) this.store.remove(storageKeyOf(crType), resource);
      }
      return;
    }
    this.registry.setCrd(name, typesFromCrd(object).types);
  }

  /** Register a CRD object (from crds/ or options) without an HTTP request. */
  installCrd(body: unknown): KubeObject {
    if (!isRecord(body) || !isRecord(body.metadata) || typeof body.metadata.name !== "string") {
      throw badRequest("a CustomResourceDefinition needs metadata.name");
    }
    const existing = this.store.get(storageKeyOf(CRD_TYPE), undefined, body.metadata.name);
    if (existing) {
      const next = {
        ...deepClone(body),
        metadata: { ...deepClone(body.metadata), resourceVersion: existing.metadata.resourceVersion },
      };
      return this.update(CRD_TYPE, undefined, body.metadata.name, next, {
        strict: false,
        fieldManager: "kube-double",
        dryRun: false,
        subresource: undefined,
      });
    }
    return this.create(CRD_TYPE, undefined, body, {
      strict: false,
      fieldManager: "kube-double",
      dryRun: false,
      subresource: undefined,
    });
  }

  create(type: ResourceType, namespace: string | undefined, body: unknown, options: WriteOptions): KubeObject {
    if (options.subresource !== undefined)
      throw new ApiError(405, "MethodNotAllowed", "create is not allowed on a subresource");
    const object = this.#toStored(type, this.#checkBody(type, body));
    this.#placeNamespace(type, object, namespace);
    const metadata = object.metadata;
    if ((metadata.name === undefined || metadata.name === "") && metadata.generateName) {
      metadata.name = `${metadata.generateName}${randomSuffix()}`;
    }
    if (metadata.name === undefined || metadata.name === "") {
      throw invalid(type, "", [
        {
          reason: "FieldValueRequired",
          field: "metadata.name",
          message: "Required value: name or generateName is required",
        },
      ]);
    }
    this.#checkName(type, object);
    if (type.namespaced) {
      const namespaceObject = this.store.get(storageKeyOf(NAMESPACE_TYPE), undefined, metadata.namespace ?? "");
      if (!namespaceObject) throw notFound(NAMESPACE_TYPE, metadata.namespace ?? "");
      if (namespaceObject.metadata.deletionTimestamp !== undefined) {
        throw new ApiError(
          403,
          "Forbidden",
          `${type.plural} "${metadata.name}" is forbidden: unable to create new content in namespace ${metadata.namespace ?? ""} because it is being terminated`,
        );
      }
    }
    if (this.store.get(storageKeyOf(type), metadata.namespace, metadata.name)) throw alreadyExists(type, metadata.name);
    for (const field of ["resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "uid", "selfLink"])
      delete metadata[field];
    metadata.uid = randomUUID();
    metadata.creationTimestamp = now();
    // Like the real server: custom resources and CRDs count generations; Secrets, Events, Leases… have none.
    if (hasGeneration(type)) metadata.generation = 1;
    else delete metadata.generation;
    if (type.custom && type.statusSubresource) delete object.status;
    if (type === NAMESPACE_TYPE) object.status = { phase: "Active" };
    this.#admit(type, object, undefined, options);
    if (!metadata.managedFields) {
      // Recorded with the field names of the API written to (an events.k8s.io Event owns f:note, not f:message).
      const viewed = this.#view(type, object);
      recordUpdate(undefined, viewed, this.#owner(type, options), type.fieldShape);
      object.metadata.managedFields = viewed.metadata.managedFields;
    }
    if (options.dryRun) return this.present(type, object);
    const stored = this.store.put(storageKeyOf(type), object, undefined);
    this.#afterStore(type, stored, false);
    return this.present(type, stored);
  }

  /** A body in the form of the API it was sent to, as it is stored (events.k8s.io Events as core ones). */
  #toStored(type: ResourceType, object: KubeObject): KubeObject {
    return isEventsApi(type) ? eventToCore(object) : object;
  }

  #owner(
    type: ResourceType,
    options: WriteOptions,
  ): { manager: string; apiVersion: string; subresource: string | undefined } {
    return {
      manager: options.fieldManager ?? "unknown",
      apiVersion: apiVersionOf(type),
      subresource: options.subresource,
    };
  }

  update(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    body: unknown,
    options: WriteOptions,
  ): KubeObject {
    const old = this.#require(type, namespace, name);
    const next = this.#checkBody(type, body);
    if (next.metadata.name !== undefined && next.metadata.name !== name) {
      throw badRequest(`the name of the object (${next.metadata.name}) does not match the name on the URL (${name})`);
    }
    const wanted = next.metadata.resourceVersion;
    if ((wanted === undefined || wanted === "") && type.custom) {
      throw invalid(type, name, [
        {
          reason: "FieldValueInvalid",
          field: "metadata.resourceVersion",
          message: "Invalid value: 0x0: must be specified for an update",
        },
      ]);
    }
    if (wanted !== undefined && wanted !== "" && wanted !== old.metadata.resourceVersion)
      throw conflict(type, name, STALE_OBJECT);
    return this.#commit(type, old, next, options, "update");
  }

  patch(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    contentType: string,
    rawBody: string,
    options: PatchOptions,
  ): KubeObject {
    const mediaType = contentType.split(";")[0]?.trim() ?? "";
    if (mediaType === "application/apply-patch+yaml") return this.#apply(type, namespace, name, rawBody, options);
    const old = this.#require(type, namespace, name);
    const current = this.present(type, old);
    let patchBody: unknown;
    try {
      patchBody = JSON.parse(rawBody);
    } catch (error) {
      throw badRequest(`the body of the patch is not valid JSON: ${(error as Error).message}`, undefined, {
        cause: error,
      });
    }
    let patched: unknown;
    if (mediaType === "application/merge-patch+json") patched = applyMergePatch(current, patchBody);
    else if (mediaType === "application/json-patch+json") patched = applyJsonPatch(current, patchBody);
    else if (mediaType === "application/strategic-merge-patch+json" && !type.custom)
      patched = applyMergePatch(current, patchBody);
    else throw unsupportedMediaType(contentType);
    const next = this.#checkBody(type, patched);
    if (next.metadata.name !== name) throw badRequest("a patch may not change metadata.name");
    if (next.metadata.resourceVersion !== old.metadata.resourceVersion) throw conflict(type, name, STALE_OBJECT);
    return this.#commit(type, old, next, options, "update");
  }

  #apply(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    rawBody: string,
    options: PatchOptions,
  ): KubeObject {
    if (!options.fieldManager) {
      throw invalid({ group: "meta.k8s.io", kind: "PatchOptions" }, "", [
        { reason: "FieldValueRequired", field: "fieldManager", message: "Required value: is required for apply patch" },
      ]);
    }
    let parsed: unknown;
    try {
      parsed = parseYaml(rawBody);
    } catch (error) {
      throw badRequest(`the apply configuration is not valid YAML: ${(error as Error).message}`, undefined, {
        cause: error,
      });
    }
    const applied = this.#checkBody(type, parsed);
    if (applied.metadata.name !== undefined && applied.metadata.name !== name) {
      throw badRequest(
        `the name of the object (${applied.metadata.name}) does not match the name on the URL (${name})`,
      );
    }
    applied.metadata.name = name;
    const who = this.#owner(type, options);
    const old = this.store.get(storageKeyOf(type), type.namespaced ? namespace : undefined, name);
    if (!old) {
      const created = serverSideApply(
        { apiVersion: apiVersionOf(type), kind: type.kind, metadata: {} },
        applied,
        who,
        true,
        applyMerge,
        type.fieldShape,
      );
      return this.create(type, namespace, created, options);
    }
    const wanted = applied.metadata.resourceVersion;
    if (wanted !== undefined && wanted !== old.metadata.resourceVersion) throw conflict(type, name, STALE_OBJECT);
    const current = this.present(type, old);
    const merged = serverSideApply(current, applied, who, options.force, applyMerge, type.fieldShape);
    return this.#commit(type, old, merged, options, "apply");
  }

  /** What a write may change depends on the endpoint: /status only status, the main one everything else. */
  #limitToEndpoint(
    type: ResourceType,
    old: KubeObject,
    proposed: KubeObject,
    options: WriteOptions,
    operation: "update" | "apply",
  ): KubeObject {
    if (options.subresource === "status") {
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

  #commit(
    type: ResourceType,
    old: KubeObject,
    proposed: KubeObject,
    options: WriteOptions,
    operation: "update" | "apply",
  ): KubeObject {
    const next = this.#limitToEndpoint(type, old, this.#toStored(type, proposed), options, operation);
    // System-owned metadata always comes from the stored object.
    for (const field of [
      "uid",
      "creationTimestamp",
      "generation",
      "deletionTimestamp",
      "deletionGracePeriodSeconds",
      "namespace",
      "name",
    ]) {
      if (old.metadata[field] === undefined) delete next.metadata[field];
      else next.metadata[field] = old.metadata[field];
    }
    next.metadata.resourceVersion = old.metadata.resourceVersion;
    if (operation === "update") {
      next.metadata.managedFields = old.metadata.managedFields;
      const viewed = this.#view(type, next);
      recordUpdate(this.#view(type, old), viewed, this.#owner(type, options), type.fieldShape);
      next.metadata.managedFields = viewed.metadata.managedFields;
    }
    if (type === NAMESPACE_TYPE && next.status === undefined) next.status = old.status;
    this.#admit(type, next, this.present(type, old), options);
    if (hasGeneration(type) && !deepEqual(specPart(old), specPart(next)))
      next.metadata.generation = (old.metadata.generation ?? 1) + 1;
    if (deepEqual(withoutVolatile(old), withoutVolatile(next)) || options.dryRun) {
      // A no-op write changes nothing, not even the resourceVersion, like the real server.
      return this.present(type, options.dryRun ? next : old);
    }
    if (next.metadata.deletionTimestamp !== undefined && (next.metadata.finalizers ?? []).length === 0) {
      return this.present(type, this.#remove(type, next));
    }
    const stored = this.store.put(storageKeyOf(type), next, old);
    this.#afterStore(type, stored, false);
    return this.present(type, stored);
  }

  #remove(type: ResourceType, object: KubeObject): KubeObject {
    const deleted = this.store.remove(storageKeyOf(type), object);
    this.#afterStore(type, deleted, true);
    return deleted;
  }

  /** Like the real namespace controller: mark Terminating now, delete the contents, then the namespace. */
  #terminateNamespace(old: KubeObject): KubeObject {
    if (old.metadata.deletionTimestamp !== undefined) return this.present(NAMESPACE_TYPE, old);
    const next = deepClone(old);
    next.metadata.deletionTimestamp = now();
    next.status = { phase: "Terminating" };
    const stored = this.store.put(storageKeyOf(NAMESPACE_TYPE), next, old);
    this.#scheduleNamespaceCleanup(old.metadata.name ?? "", 20);
    return this.present(NAMESPACE_TYPE, stored);
  }

  #scheduleNamespaceCleanup(namespace: string, delayMs: number): void {
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      this.#finishNamespace(namespace);
    }, delayMs);
    this.#timers.add(timer);
  }

  #finishNamespace(namespace: string): void {
    const object = this.store.get(storageKeyOf(NAMESPACE_TYPE), undefined, namespace);
    if (!object) return;
    for (const type of this.registry.all()) {
      if (!type.namespaced) continue;
      for (const item of this.store.list(storageKeyOf(type), namespace)) {
        this.delete(type, namespace, item.metadata.name ?? "", { dryRun: false });
      }
    }
    const stillThere = this.registry
      .all()
      .filter((type) => type.namespaced)
      .some((type) => this.store.list(storageKeyOf(type), namespace).length > 0);
    if (stillThere) {
      // Objects held by finalizers keep the namespace Terminating; look again later.
      this.#scheduleNamespaceCleanup(namespace, 250);
      return;
    }
    this.#remove(NAMESPACE_TYPE, object);
  }

  /** Stop background work (namespace cleanup timers). */
  dispose(): void {
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }

  delete(type: ResourceType, namespace: string | undefined, name: string, options: DeleteOptions): KubeObject {
    const old = this.#require(type, namespace, name);
    const preconditions = options.preconditions;
    if (preconditions?.uid !== undefined && preconditions.uid !== old.metadata.uid) {
      throw conflict(
        type,
        name,
        `Precondition failed: UID in precondition: ${preconditions.uid}, UID in object meta: ${old.metadata.uid ?? ""}`,
      );
    }
    if (
      preconditions?.resourceVersion !== undefined &&
      preconditions.resourceVersion !== old.metadata.resourceVersion
    ) {
      throw conflict(
        type,
        name,
        `Precondition failed: ResourceVersion in precondition: ${preconditions.resourceVersion}, ResourceVersion in object meta: ${old.metadata.resourceVersion ?? ""}`,
      );
    }
    if (options.dryRun) return this.present(type, old);
    if (type === NAMESPACE_TYPE) {
      if (PROTECTED_NAMESPACES.includes(name)) {
        throw new ApiError(403, "Forbidden", `namespaces "${name}" is forbidden: this namespace may not be deleted`);
      }
      return this.#terminateNamespace(old);
    }
    if ((old.metadata.finalizers ?? []).length > 0) {
      if (old.metadata.deletionTimestamp !== undefined) return this.present(type, old);
      const next = deepClone(old);
      next.metadata.deletionTimestamp = now();
      next.metadata.deletionGracePeriodSeconds = 0;
      return this.present(type, this.store.put(storageKeyOf(type), next, old));
    }
    return this.present(type, this.#remove(type, old));
  }

  deleteCollection(
    type: ResourceType,
    namespace: string | undefined,
    options: ListOptions & DeleteOptions,
  ): KubeObject {
    const matching = this.store
      .list(storageKeyOf(type), namespace)
      .filter((object) => this.matches(this.#view(type, object), options.labelSelector, options.fieldSelector));
    const items = matching.map((object) =>
      this.delete(type, object.metadata.namespace, object.metadata.name ?? "", options),
    );
    return {
      apiVersion: apiVersionOf(type),
      kind: type.listKind,
      metadata: { resourceVersion: String(this.store.resourceVersion) },
      items,
    };
  }
}
