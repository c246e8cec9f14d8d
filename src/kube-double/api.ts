// The API semantics, independent of HTTP: create, read, list, update, patch, apply and delete with
// resourceVersion and UID preconditions, generateName, generation, the status subresource, finalizers, managed
// fields and CRD registration: the order of a write and what it does to the store. What each write must satisfy
// is write-rules.ts's; a namespace's deletion, namespace-termination.ts's.
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { parse as parseYaml } from "yaml";
import { decodeContinue, encodeContinue } from "./continue-token.ts";
import { eventAnswer, eventFromCore, eventToCore, isEventsApi } from "./events.ts";
import { recordUpdate, serverSideApply } from "./managed-fields.ts";
import { NamespaceTermination, PROTECTED_NAMESPACES } from "./namespace-termination.ts";
import { applyJsonBodyPatch, applyMerge } from "./patch.ts";
import { CRD_TYPE, NAMESPACE_TYPE, type ResourceRegistry, typesFromCrd } from "./resources.ts";
import { type FieldSelector, type LabelSelector, matchesFields, matchesLabels } from "./selectors.ts";
import { ApiError, alreadyExists, badRequest, conflict, gone, invalid, notFound, STALE_OBJECT } from "./status.ts";
import type { ObjectStore } from "./store.ts";
import { apiVersionOf, deepClone, isRecord, type KubeObject, type ResourceType, storageKeyOf } from "./types.ts";
import {
  admitObject,
  changesNothing,
  checkBody,
  checkName,
  hasGeneration,
  keepSystemMetadata,
  limitToEndpoint,
  placeNamespace,
  serverTime,
  specChanged,
} from "./write-rules.ts";

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

const GENERATE_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789";

function randomSuffix(): string {
  let suffix = "";
  for (let index = 0; index < 5; index++) {
    suffix += GENERATE_NAME_ALPHABET[Math.floor(Math.random() * GENERATE_NAME_ALPHABET.length)];
  }
  return suffix;
}

export class KubeApi {
  readonly registry: ResourceRegistry;
  readonly store: ObjectStore;
  #logger: Logger;
  readonly #namespaces: NamespaceTermination;

  constructor(registry: ResourceRegistry, store: ObjectStore, logger: Logger) {
    this.registry = registry;
    this.store = store;
    this.#logger = logger;
    this.#namespaces = new NamespaceTermination({
      store,
      registry,
      deleteObject: (type, namespace, name) => this.delete(type, namespace, name, { dryRun: false }),
      removeNamespace: (namespace) => this.#remove(NAMESPACE_TYPE, namespace),
    });
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
      const token = decodeContinue(options.continueToken);
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
      metadata.continue = encodeContinue({ after: keyOf(last), resourceVersion: this.store.resourceVersion });
      metadata.remainingItemCount = matching.length - page.length;
    }
    return {
      apiVersion: apiVersionOf(type),
      kind: type.listKind,
      metadata,
      items: page.map((object) => this.present(type, object)),
    };
  }

  #admit(type: ResourceType, object: KubeObject, old: KubeObject | undefined, options: WriteOptions): void {
    admitObject(type, object, old, {
      strict: options.strict,
      onSkippedRule: (rule) =>
        this.#logger.debug({ rule, kind: type.kind }, "CEL rule outside the supported subset skipped"),
    });
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
    const object = this.#toStored(type, checkBody(type, body));
    placeNamespace(type, object, namespace);
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
    checkName(type, object);
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
    metadata.creationTimestamp = serverTime();
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
    const next = checkBody(type, body);
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
    // A built-in kind's strategic merge patch is a merge patch for the fields the double knows.
    const patched = applyJsonBodyPatch(this.present(type, old), contentType, rawBody, !type.custom);
    const next = checkBody(type, patched);
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
    const applied = checkBody(type, parsed);
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

  #commit(
    type: ResourceType,
    old: KubeObject,
    proposed: KubeObject,
    options: WriteOptions,
    operation: "update" | "apply",
  ): KubeObject {
    const next = limitToEndpoint(type, old, this.#toStored(type, proposed), options.subresource, operation);
    keepSystemMetadata(old, next);
    if (operation === "update") {
      next.metadata.managedFields = old.metadata.managedFields;
      const viewed = this.#view(type, next);
      recordUpdate(this.#view(type, old), viewed, this.#owner(type, options), type.fieldShape);
      next.metadata.managedFields = viewed.metadata.managedFields;
    }
    if (type === NAMESPACE_TYPE && next.status === undefined) next.status = old.status;
    this.#admit(type, next, this.present(type, old), options);
    if (hasGeneration(type) && specChanged(old, next)) next.metadata.generation = (old.metadata.generation ?? 1) + 1;
    if (changesNothing(old, next) || options.dryRun) {
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

  /** Stop background work (namespace cleanup timers). */
  dispose(): void {
    this.#namespaces.dispose();
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
      return this.present(NAMESPACE_TYPE, this.#namespaces.terminate(old));
    }
    if ((old.metadata.finalizers ?? []).length > 0) {
      if (old.metadata.deletionTimestamp !== undefined) return this.present(type, old);
      const next = deepClone(old);
      next.metadata.deletionTimestamp = serverTime();
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
