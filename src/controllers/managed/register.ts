// One managed kind as a controller on the runtime: its reconciler (the one lifecycle, reconciler.ts) behind the
// account admission, its writes guarded and fitted to its CRD, and the watches that wake an object when something
// it refers to changes (other kinds, Secrets, ConfigMaps, its credentials, what it publishes), as the dependency
// index learned from its passes; budgets and the capacity queue guard the changes of a kind that bills.
import type { KubernetesObject } from "@kubernetes/client-node";
import type { z } from "zod";
import { structuralSchemaOf } from "../../api/crd.ts";
import {
  CONFIG_MAPS,
  type Controller,
  type Manager,
  parseKey,
  SECRETS,
  type WatchMapping,
} from "../../runtime/index.ts";
import { AccountAdmissions } from "../accounts/account-admission.ts";
import type { CloudAccount } from "../accounts/cloud-account.ts";
import { type CredentialStore, credentialsRefNameOf } from "../accounts/credentials.ts";
import type { SecretSources } from "../accounts/secret-sources.ts";
import { kubeAccessFor, resourceOf } from "../core/kube-access.ts";
import type { ReconcileTiming } from "../core/lifecycle.ts";
import type { ManagedObject, ManagedSpecBase, ManagedStatusBase } from "../core/object-model.ts";
import { fitStatusInPlace } from "../core/status-limits.ts";
import type { ManagedCaches } from "./caches.ts";
import { type ClaimStore, claimedKind } from "./claims.ts";
import { connectFor } from "./connection.ts";
import type { DependencyIndex } from "./dependency-index.ts";
import type { KindDefinition, KindDeps, OwnedObject } from "./external.ts";
import type { SpendGuard } from "./pass.ts";
import { ManagedReconciler } from "./reconciler.ts";
import type { ManagedNote } from "./shard-view.ts";
import { markWithoutOwner } from "./without-owner.ts";

/** What every managed kind's controller shares. */
export interface ManagedWiring {
  manager: Manager;
  /** Every managed kind (each watches the others it may refer to). */
  kinds: readonly KindDefinition<ManagedSpecBase>[];
  caches: ManagedCaches;
  claims: ClaimStore;
  credentials: CredentialStore<CloudAccount>;
  secrets: SecretSources;
  dependencies: DependencyIndex;
  /** What kinds read of Kubernetes, and the deletion of what an object wrote. */
  deps: KindDeps & { deleteOwned(owner: ManagedObject, objects: readonly OwnedObject[]): Promise<void> };
  timing: Partial<ReconcileTiming>;
  now?: () => number;
  /** The budgets' guard of a kind (undefined: its changes are not guarded). */
  spendGuard?(kind: string): SpendGuard | undefined;
}

/** Fit statuses of a kind to its CRD schema in place (the structural schema the CRD is generated with). */
function fitterFor(statusSchema: z.ZodType): (status: ManagedStatusBase) => string[] {
  const schema = structuralSchemaOf(statusSchema);
  return (status) => fitStatusInPlace(status, schema);
}

export function registerManagedKind(kind: KindDefinition<ManagedSpecBase>, wiring: ManagedWiring): Controller {
  const { manager, caches, claims, credentials, secrets, dependencies, deps } = wiring;
  const config = manager.config;
  const logger = manager.logger.child({ component: "controllers" });
  const name = kind.info.kind;
  const informer = caches.informer(name);
  const parser = caches.parser(name);
  if (informer === undefined || parser === undefined) throw new Error(`${name} has no informer cache`);
  const resource = resourceOf(kind.info);
  const kube = kubeAccessFor(manager, resource, (namespace, objectName) => informer.get(namespace, objectName));
  const admissions = new AccountAdmissions(name.toLowerCase());
  const guard = wiring.spendGuard?.(name);
  const managed = new ManagedReconciler<ManagedSpecBase>({
    kind: claimedKind(name),
    parse: (raw) => parser.parse(raw),
    locations: (spec) => kind.locations(spec),
    kube,
    claims,
    claimNamespace: config.claimsNamespace,
    allowCrossNamespaceObserve: config.allowCrossNamespaceObserve,
    fitStatus: fitterFor(kind.info.statusSchema),
    ...(guard !== undefined && kind.spend !== undefined ? { spend: { guard, model: kind.spend } } : {}),
    ...(wiring.now ? { now: wiring.now } : {}),
    timing: wiring.timing,
    connect: connectFor(kind, { manager, credentials, secrets, admissions, deps }),
    onReleased: async (mr) => {
      const owned = kind.ownedObjects?.(mr.spec) ?? [];
      if (owned.length > 0) await deps.deleteOwned(mr, owned);
    },
    onReconciled: (mr) => {
      const secret = credentials.secretFor(mr.metadata.namespace, mr.spec.credentialsRef?.name);
      // What it publishes to as well: a connection Secret changed or deleted by someone else is written again
      // at once (controller-runtime's Owns), not at the next resync, which ends early when nothing it reads
      // changed (quiet-resyncs.ts).
      const owned = (kind.ownedObjects?.(mr.spec) ?? []).map((object) => `${object.kind}/${object.name}`);
      const references = [...kind.references(mr.spec), ...(secret ? [`Secret/${secret.name}`] : []), ...owned];
      dependencies.record(name, mr.metadata.namespace, mr.metadata.name, references);
    },
  });
  const reconciler = admissions.wrap(managed, (request) => {
    const raw = informer.get(request.namespace, request.name);
    if (raw === undefined) return undefined;
    const resolved = credentials.resolve(request.namespace, credentialsRefNameOf(raw));
    return resolved.type === "ok" ? resolved.handle.account.client.bulkhead : undefined;
  });
  const controller = manager.addController({
    name: name.toLowerCase(),
    resource,
    reconciler,
    isEcho: (key, resourceVersion) => managed.isEcho(key, resourceVersion),
    onWithoutOwner: (keys) =>
      void markWithoutOwner(keys, {
        read: async (key) => {
          const { namespace, name: objectName } = parseKey(key);
          const held = caches.get(name, namespace, objectName);
          if (held !== undefined) return held;
          // Another shard's object, only noted here: read (once its shard has been without a leader for a while)
          // only when its note says its spec is ahead of its status.
          if ((informer.noteOf(namespace, objectName) as ManagedNote | undefined)?.ahead !== true) return undefined;
          const live = await manager.kube.listObjects(resource, namespace, {
            fieldSelector: `metadata.name=${objectName}`,
          });
          return caches.parse(name, live[0]);
        },
        kube,
        now: wiring.now ?? Date.now,
        logger,
      }),
    watches: watchesOf(kind, wiring),
  });
  admissions.wakeWith((key, priority, position) => controller.wake(key, priority, position));
  return controller;
}

/** The objects whose changes wake an object of `kind`: whatever its last pass recorded it refers to. */
function watchesOf(kind: KindDefinition<ManagedSpecBase>, wiring: ManagedWiring): WatchMapping[] {
  const { dependencies, secrets } = wiring;
  const dependentsOf = (watchedKind: string) => (object: KubernetesObject) =>
    dependencies.dependents(kind.info.kind, watchedKind, object.metadata?.namespace ?? "", object.metadata?.name ?? "");
  const others = wiring.kinds.filter((other) => other.info.kind !== kind.info.kind);
  return [
    { resource: SECRETS, ...secrets.labelledSelection, mapToKeys: dependentsOf("Secret") },
    { resource: CONFIG_MAPS, mapToKeys: dependentsOf("ConfigMap") },
    ...others.map((other) => ({ resource: resourceOf(other.info), mapToKeys: dependentsOf(other.info.kind) })),
    // A credentials Secret of the default name appearing, going or losing its label, labelled or not.
    { resource: SECRETS, ...secrets.defaultNamedSelection, mapToKeys: dependentsOf("Secret") },
  ];
}
