// What a kind reads of Kubernetes (KindDeps, managed/external.ts), over the informer caches: other managed objects
// with the id their claim records (never the id their status says: a status edit must not point a reference, a
// disk attachment or a firewall rule at another namespace's resource), keys of Secrets and ConfigMaps, and the
// connection details a GpuVm publishes (never into a Secret of a credentials name), and the price table in force.
import type { KubernetesObject } from "@kubernetes/client-node";
import type { PriceTable } from "../../admission/prices.ts";
import { DEFAULT_CREDENTIALS_SECRET } from "../../api/common.ts";
import type { Manager, ObjectInformer } from "../../runtime/index.ts";
import type { SecretLike } from "../accounts/credentials.ts";
import type { SecretSources } from "../accounts/secret-sources.ts";
import type { CredentialsUsage } from "../accounts/secret-usage.ts";
import type { ManagedObject } from "../core/object-model.ts";
import type { ManagedCaches } from "../managed/caches.ts";
import { type ClaimStore, claimedKind } from "../managed/claims.ts";
import type { KindDeps, OwnedObject } from "../managed/external.ts";
import type { ShardViews } from "../managed/shard-view.ts";
import { deleteOwnedObjects, type OwnableObject, publishConnectionDetails } from "./owned-objects.ts";

export type CachedConfigMap = KubernetesObject & { data?: Record<string, string> };

export interface KindDepsSources {
  manager: Manager;
  caches: ManagedCaches;
  claims: ClaimStore;
  secrets: SecretSources;
  configMaps: ObjectInformer<CachedConfigMap>;
  /** Who uses which credentials Secret: a connection-details Secret never takes such a name. */
  usage: Pick<CredentialsUsage, "usersOf">;
  /** With sharding: what this replica holds of the sharded kinds, and reading in what its objects refer to. */
  views?: ShardViews;
  /** The price table in force (the operator's ConfigMap over the seed's prices). */
  prices?: () => PriceTable;
}

/** A Secret key as written (stringData) or stored (base64 data). */
function decodeSecretValue(secret: SecretLike, key: string): string | undefined {
  const plain = secret.stringData?.[key];
  if (plain !== undefined) return plain;
  const encoded = secret.data?.[key];
  return encoded === undefined ? undefined : Buffer.from(encoded, "base64").toString("utf8");
}

export function kindDeps(sources: KindDepsSources): KindDeps & {
  /** Delete what an object wrote (what still carries its owner reference). */
  deleteOwned(owner: ManagedObject, objects: readonly OwnedObject[]): Promise<void>;
} {
  const { manager, caches, claims, secrets, configMaps, usage, views } = sources;
  const cachedObject = (kind: "Secret" | "ConfigMap", namespace: string, name: string): OwnableObject | undefined =>
    kind === "Secret" ? secrets.labelled.get(namespace, name) : configMaps.get(namespace, name);
  const claimedView = (kind: string, object: ManagedObject | undefined): ManagedObject | undefined => {
    if (object === undefined) return undefined;
    const id = claims.heldBy(claimedKind(kind), object.metadata.uid)?.id;
    if (id === object.status.id) return object;
    const { id: _unbacked, ...status } = object.status;
    return { ...object, status: id === undefined ? status : { ...status, id } };
  };
  return {
    ...(sources.prices !== undefined ? { prices: sources.prices } : {}),
    managed: (kind, namespace, name) => claimedView(kind, caches.get(kind, namespace, name)),
    listManaged: (kind, namespace) => caches.list(kind, namespace).flatMap((object) => claimedView(kind, object) ?? []),
    ...(views !== undefined ? { fetching: (kind, namespace, name) => views.fetching(kind, namespace, name) } : {}),
    managedById: (kind, namespace, account, id) => {
      // The claims know who holds an id: names an attachment without a scan.
      const holder = claims.ofId(claimedKind(kind), account, id)?.holder;
      if (holder === undefined || holder.namespace !== namespace) return undefined;
      return claimedView(kind, caches.get(kind, namespace, holder.name));
    },
    dataKey: (kind, namespace, name, key) => {
      if (kind === "Secret") {
        const secret = secrets.labelled.get(namespace, name);
        return secret === undefined ? undefined : decodeSecretValue(secret, key);
      }
      return configMaps.get(namespace, name)?.data?.[key];
    },
    publish: (kind, owner, name, data) => {
      // A Secret of a credentials name would shadow the credentials of this namespace's objects.
      const namespace = owner.metadata.namespace;
      if (kind === "Secret" && (name === DEFAULT_CREDENTIALS_SECRET || usage.usersOf(namespace, name, 0).count > 0)) {
        return Promise.resolve(
          `Secret ${namespace}/${name} is a credentials Secret name in this namespace: connection details are never written there; choose another spec.connectionDetails.secretName`,
        );
      }
      return publishConnectionDetails(manager, kind, owner, name, data, cachedObject(kind, namespace, name));
    },
    deleteOwned: (owner, objects) => deleteOwnedObjects(manager, owner, objects, cachedObject),
  };
}
