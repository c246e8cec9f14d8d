// The credentials-in-use finalizer (crossplane's ProviderConfigUsage idea): a credentials Secret that managed
// objects with cloud state still use keeps `gpucloud.dev/credentials-in-use`, so deleting it first cannot
// strand their deletion; once no object uses it, the finalizer goes and Kubernetes completes the delete.
// Who uses which Secret is kept in an index fed by the informers (CredentialsUsage): an event costs O(1) and
// wakes a Secret only when an object starts or stops using it, instead of re-reading every object each time.
import type { KubernetesObject } from "@kubernetes/client-node";
import { DEFAULT_CREDENTIALS_SECRET, FINALIZER } from "../../api/common.ts";
import {
  type Controller,
  type KubeClient,
  keyOf,
  type Manager,
  type ObjectInformer,
  type Outcome,
  parseKey,
  type ReconcileContext,
  type ReconcileRequest,
  type Reconciler,
  SECRETS,
} from "../../runtime/index.ts";
import { sharedInterner } from "../../util/intern.ts";
import { isRecord } from "../../util/is-record.ts";
import { ObjectMap } from "../../util/object-map.ts";
import { credentialsRefNameOf } from "./credentials.ts";
import type { SecretSources } from "./secret-sources.ts";

export const CREDENTIALS_FINALIZER = "gpucloud.dev/credentials-in-use";

export interface SecretUsageOptions {
  kube: Pick<KubeClient, "patchSecret">;
  secrets: Pick<ObjectInformer<KubernetesObject>, "get">;
  /**
   * The managed objects holding our finalizer that use this Secret: how many, and the first `limit` of them as
   * `Kind namespace/name` (never the whole list: a Secret may have 10,000 users).
   */
  usersOf(namespace: string, name: string, limit: number): Users;
  /** Record an Event on the Secret. */
  event(secret: KubernetesObject, type: "Normal" | "Warning", reason: string, note: string): void;
}

/** Users of a Secret: their number and a few of them by name. */
export interface Users {
  count: number;
  named: string[];
}

/** At most this many users are named in the Secret's Event. */
const NAMED_USERS = 10;

/** Why a Secret being deleted waits, naming who holds it and how to let it go. */
export function heldMessage(users: Users): string {
  const named = users.named.slice(0, NAMED_USERS).join(", ");
  const more = users.count > NAMED_USERS ? ` and ${users.count - NAMED_USERS} more` : "";
  return (
    `deletion waits (finalizer ${CREDENTIALS_FINALIZER}): the cloud resources of ${named}${more} can only be ` +
    "deleted with these credentials. Delete those objects first (or set their deletionPolicy: Orphan), and this " +
    "Secret goes"
  );
}

export class SecretUsageReconciler implements Reconciler {
  readonly #options: SecretUsageOptions;

  constructor(options: SecretUsageOptions) {
    this.#options = options;
  }

  /**
   * Whether a change of the Secret's users calls for a pass: its finalizer is not what its use says (the first
   * user came or the last one went), or it is being deleted (the Event names who holds it). Another user of a
   * Secret that holds the finalizer changes nothing: a burst of 10,000 objects wakes it once, not 10,000 times.
   */
  needsLook(namespace: string, name: string): boolean {
    const secret = this.#options.secrets.get(namespace, name);
    if (secret === undefined) return false; // its own informer event brings it when it appears
    const held = (secret.metadata?.finalizers ?? []).includes(CREDENTIALS_FINALIZER);
    const deleting = secret.metadata?.deletionTimestamp !== undefined && secret.metadata.deletionTimestamp !== null;
    return deleting || held !== this.#options.usersOf(namespace, name, 0).count > 0;
  }

  async reconcile(request: ReconcileRequest, ctx: ReconcileContext): Promise<Outcome> {
    const secret = this.#options.secrets.get(request.namespace, request.name);
    if (secret === undefined) return { type: "done" };
    const finalizers = secret.metadata?.finalizers ?? [];
    const held = finalizers.includes(CREDENTIALS_FINALIZER);
    const users = this.#options.usersOf(request.namespace, request.name, NAMED_USERS);
    const inUse = users.count > 0;
    const deleting = secret.metadata?.deletionTimestamp !== undefined && secret.metadata.deletionTimestamp !== null;
    // `kubectl delete secret` waits on our finalizer: the Secret says why, and who holds it.
    if (deleting && held && inUse) this.#options.event(secret, "Warning", "CredentialsInUse", heldMessage(users));
    if (held === inUse) return { type: "done" };
    // Only Secrets the operator already uses get the finalizer; a Secret being deleted can still lose it.
    if (inUse && deleting) return { type: "done" };
    const next = inUse ? [...finalizers, CREDENTIALS_FINALIZER] : finalizers.filter((f) => f !== CREDENTIALS_FINALIZER);
    const result = await this.#options.kube.patchSecret(request.namespace, request.name, {
      metadata: { resourceVersion: secret.metadata?.resourceVersion, finalizers: next },
    });
    if (result.type === "conflict") return { type: "requeueAfter", ms: 0 };
    ctx.logger.info({ secret: `${request.namespace}/${request.name}`, inUse }, "credentials-in-use finalizer updated");
    return { type: "done" };
  }
}

/** The Secret a reference resolves to (credentials.ts: the object's namespace first, then the operator default). */
export type ResolveSecret = (
  namespace: string,
  refName: string | undefined,
) => { namespace: string; name: string } | undefined;

/** The credentials reference of an object that holds our finalizer: `namespace/refName`, else undefined. */
function referenceOf(object: unknown): string | undefined {
  if (!isRecord(object) || !isRecord(object.metadata)) return undefined;
  const { namespace, finalizers } = object.metadata;
  if (typeof namespace !== "string" || !Array.isArray(finalizers) || !finalizers.includes(FINALIZER)) return undefined;
  return `${namespace}/${credentialsRefNameOf(object) ?? DEFAULT_CREDENTIALS_SECRET}`;
}

function namesOf(object: unknown): { namespace: string; name: string } | undefined {
  if (!isRecord(object) || !isRecord(object.metadata)) return undefined;
  const { namespace, name } = object.metadata;
  return typeof namespace === "string" && typeof name === "string" ? { namespace, name } : undefined;
}

/**
 * Which managed objects holding our finalizer refer to which credentials, by reference (`namespace/refName`):
 * the Secret a reference resolves to can change (a Secret of the default name appears in a namespace), so the
 * resolution happens when a Secret is reconciled, over the distinct references (few), never over the objects.
 * Read from the raw object without a schema parse: an object whose spec is invalid still holds the finalizer
 * and still needs its credentials to be deleted.
 */
export class CredentialsUsage {
  /** Each object holding our finalizer → its reference. */
  readonly #references = new ObjectMap<string>();
  /** reference → the objects that hold it. */
  readonly #users = new Map<string, ObjectMap<true>>();
  readonly #resolve: ResolveSecret;

  constructor(resolve: ResolveSecret) {
    this.#resolve = resolve;
  }

  /**
   * An informer event of a managed object. Returns the Secrets (`namespace/name`) whose use changed: the one
   * the object uses now and the one it used before, when it started or stopped using them.
   */
  apply(kind: string, type: "add" | "update" | "delete", object: unknown): string[] {
    const names = namesOf(object);
    if (names === undefined) return [];
    const { namespace, name } = names;
    const before = this.#references.get(kind, namespace, name);
    const referenced = type === "delete" ? undefined : referenceOf(object);
    // Interned: most objects share a handful of references (one string each, not one per object).
    const after = referenced === undefined ? undefined : sharedInterner.intern(referenced);
    if (before === after) return [];
    if (before !== undefined) {
      this.#references.delete(kind, namespace, name);
      const users = this.#users.get(before);
      users?.delete(kind, namespace, name);
      if (users?.size === 0) this.#users.delete(before);
    }
    if (after !== undefined) {
      this.#references.set(kind, namespace, name, after);
      let users = this.#users.get(after);
      if (users === undefined) {
        users = new ObjectMap<true>();
        this.#users.set(after, users);
      }
      users.set(kind, namespace, name, true);
    }
    return [...new Set([before, after].flatMap((reference) => this.#secretOf(reference) ?? []))];
  }

  /** The managed objects holding our finalizer that use this Secret: the count, and the first `limit` by name. */
  usersOf(namespace: string, name: string, limit = 0): Users {
    const result: Users = { count: 0, named: [] };
    for (const [reference, users] of this.#users) {
      if (this.#secretOf(reference) !== `${namespace}/${name}`) continue;
      result.count += users.size;
      // As the Secret's Event names its users: `Kind namespace/name`.
      for (const [kind, namespace, name] of users.entries()) {
        if (result.named.length >= limit) break;
        result.named.push(`${kind} ${namespace}/${name}`);
      }
    }
    return result;
  }

  #secretOf(reference: string | undefined): string | undefined {
    if (reference === undefined) return undefined;
    const slash = reference.indexOf("/");
    const secret = this.#resolve(reference.slice(0, slash), reference.slice(slash + 1));
    return secret === undefined ? undefined : `${secret.namespace}/${secret.name}`;
  }
}

/** The credentials-in-use controller on the runtime, fed by the informers of the kinds that use credentials. */
export function registerSecretUsage(
  manager: Manager,
  options: {
    secrets: SecretSources;
    /** The Secret a reference resolves to (the credential store's rule). */
    resolve: ResolveSecret;
    /** The informers of the kinds whose objects use credentials, by kind. */
    kinds: readonly { kind: string; informer: ObjectInformer }[];
  },
): { usage: CredentialsUsage; controller: Controller } {
  const { secrets } = options;
  const usage = new CredentialsUsage(options.resolve);
  const reconciler = new SecretUsageReconciler({
    kube: manager.kube,
    secrets: { get: secrets.read },
    usersOf: (namespace, name, limit) => usage.usersOf(namespace, name, limit),
    event: (secret, type, reason, note) =>
      manager.events.record(
        { apiVersion: "v1", kind: "Secret", metadata: secret.metadata ?? {} },
        { type, reason, note, action: "Delete" },
      ),
  });
  const defaultSecret = secrets.defaultSecret?.ref;
  const controller = manager.addController({
    name: "credentials-usage",
    resource: SECRETS,
    ...secrets.labelledSelection,
    reconciler,
    workers: 1,
    // A Secret of the default name appearing in (or leaving) a namespace moves that namespace's objects from
    // (or back to) the operator's default Secret: it is looked at again.
    watches: defaultSecret
      ? [
          {
            resource: SECRETS,
            ...secrets.labelledSelection,
            mapToKeys: () => [keyOf(defaultSecret.namespace, defaultSecret.name)],
          },
        ]
      : [],
  });
  for (const { kind, informer } of options.kinds) {
    const apply = (type: "add" | "update" | "delete", object: unknown): void => {
      for (const key of usage.apply(kind, type, object)) {
        const { namespace, name } = parseKey(key);
        if (reconciler.needsLook(namespace, name)) controller.enqueue(key);
      }
    };
    informer.on((event) => apply(event.type, event.object));
    // With sharding, the objects other replicas reconcile are only noted here: they use Secrets all the same.
    informer.onNote((event) => apply(event.type, event.object));
  }
  return { usage, controller };
}
