// Wiring: the four managed controllers and the GpuVmPool controller on the runtime's Manager, the credentials store and per-credential cloud
// accounts, the dependency index (a change of a target wakes its dependents), the credentials-in-use finalizer
// on Secrets, and the operator's own metrics.

import type { KubernetesObject } from "@kubernetes/client-node";
import type { z } from "zod";
import type { KindInfo } from "../api/common.ts";
import {
  DEFAULT_CREDENTIALS_SECRET,
  FINALIZER,
  GROUP,
  type Reason,
  SECRET_WATCH_LABEL,
  SECRET_WATCH_SELECTOR,
  VERSION,
} from "../api/common.ts";
import { structuralSchemaOf } from "../api/crd.ts";
import type { OperationFamily } from "../cloud/wire.ts";
import type { Controller, KubeResource, Manager } from "../runtime/index.ts";
import { CONFIG_MAPS, KubeApiError, NAMESPACES, ownsKey, SECRETS } from "../runtime/index.ts";
import { ApiUrlPolicy } from "../util/api-url.ts";
import { isRecord } from "../util/is-record.ts";
import { type Account, accountOf } from "./accounts/account.ts";
import { AccountAdmissions } from "./accounts/account-admission.ts";
import { CloudAccount } from "./accounts/cloud-account.ts";
import {
  CredentialStore,
  clientFor,
  credentialsRefNameOf,
  type SecretLike,
  unlabelledMessage,
} from "./accounts/credentials.ts";
import { CREDENTIALS_FINALIZER, CredentialsUsage, SecretUsageReconciler } from "./accounts/secret-usage.ts";
import type { KubeAccess } from "./core/kube-access.ts";
import type { ReconcileTiming } from "./core/lifecycle.ts";
import { cloudOperationsSample, registerOperatorMetrics } from "./core/metrics.ts";
import type { ManagedObject, ManagedSpecBase, ManagedStatusBase } from "./core/object-model.ts";
import { ManagedParser } from "./core/object-model.ts";
import { fitStatusInPlace } from "./core/status-limits.ts";
import { attachmentChange } from "./kinds/attachment-changes.ts";
import { gpuDisk } from "./kinds/gpu-disk.ts";
import { gpuFirewallRule } from "./kinds/gpu-firewall-rule.ts";
import { gpuNetwork } from "./kinds/gpu-network.ts";
import { gpuVm } from "./kinds/gpu-vm.ts";
import { CLAIMS_RESOURCE, claimOfObject, kubeClaimRecords } from "./managed/claim-records.ts";
import { registerClaimSweep } from "./managed/claim-sweep.ts";
import { type Claim, ClaimStore, claimedKind } from "./managed/claims.ts";
import { DependencyIndex } from "./managed/dependency-index.ts";
import type { KindDefinition, KindDeps, OwnedObject } from "./managed/external.ts";
import { ManagedReconciler } from "./managed/reconciler.ts";
import { markWithoutOwner } from "./managed/without-owner.ts";
import { POOL_RESOURCE, registerPoolController } from "./pool/controller.ts";

export const MANAGED_KINDS: readonly KindDefinition<ManagedSpecBase>[] = [gpuVm, gpuDisk, gpuNetwork, gpuFirewallRule];

/** The Kubernetes resource of a kind, as its descriptor in src/api names it. */
export function resourceOf(info: Pick<KindInfo, "group" | "version" | "plural" | "kind">): KubeResource {
  return { group: info.group, version: info.version, plural: info.plural, kind: info.kind, namespaced: true };
}

export interface RegisterOptions {
  /** Overrides of the reconciler's timing (tests use short fallbacks). */
  timing?: Partial<ReconcileTiming>;
  now?: () => number;
}

export interface OperatorControllers {
  controllers: ReadonlyMap<string, Controller>;
  credentials: CredentialStore<CloudAccount>;
  /** Stop the trackers of every cloud account (after the manager stopped). */
  stop(): void;
}

function decodeSecretValue(secret: SecretLike, key: string): string | undefined {
  const plain = secret.stringData?.[key];
  if (plain !== undefined) return plain;
  const encoded = secret.data?.[key];
  return encoded === undefined ? undefined : Buffer.from(encoded, "base64").toString("utf8");
}

/** Register the four managed controllers (and the Secret usage controller) on a Manager before start(). */
export function registerControllers(manager: Manager, options: RegisterOptions = {}): OperatorControllers {
  const config = manager.config;
  const logger = manager.logger.child({ component: "controllers" });
  // The cloud layer names its own component (cloud-client, operation-tracker, cloud-account): its loggers come
  // from the manager's, without one (pino writes a child's binding beside its parent's, not over it).
  const cloudLogger = (credentialKey: string) => manager.logger.child({ credentialKey });
  const informers = new Map(MANAGED_KINDS.map((kind) => [kind.info.kind, manager.informerFor(resourceOf(kind.info))]));
  // Only labelled Secrets are cached (credentials, keys and scripts objects refer to, and the connection details
  // written here), never every Secret of the cluster.
  const secretSelection = { labelSelector: SECRET_WATCH_SELECTOR };
  const secrets = manager.informerFor<KubernetesObject & SecretLike>(SECRETS, undefined, secretSelection);
  // The default credentials Secret (--credentials-secret) is the administrator's: it needs no label, and usually
  // lives in the operator's own namespace, which the watched namespaces need not include. It gets an informer of
  // its own, of that one object.
  const defaultSecret = config.credentialsSecret;
  const defaultSecretInformer =
    defaultSecret !== undefined
      ? manager.informerForObject<KubernetesObject & SecretLike>(SECRETS, defaultSecret.namespace, defaultSecret.name)
      : undefined;
  const readSecret = (namespace: string, name: string): (KubernetesObject & SecretLike) | undefined =>
    secrets.get(namespace, name) ??
    (namespace === defaultSecret?.namespace && name === defaultSecret.name
      ? defaultSecretInformer?.get(namespace, name)
      : undefined);
  // Secrets of the default credentials name, labelled or not: a namespace that has one never falls back to the
  // operator's default Secret (its own is used, or its objects stall saying how to label it).
  const defaultNamedSelection = { fieldSelector: `metadata.name=${DEFAULT_CREDENTIALS_SECRET}` };
  const defaultNamed = manager.informerFor<KubernetesObject & SecretLike>(SECRETS, undefined, defaultNamedSelection);
  // The namespaces allowed the default Secret, when the operator is told which (else every watched namespace).
  const allowedNamespaces =
    config.defaultCredentialsNamespaces === undefined
      ? undefined
      : manager.informerFor(NAMESPACES, [], { labelSelector: config.defaultCredentialsNamespaces });
  const configMaps = manager.informerFor<KubernetesObject & { data?: Record<string, string> }>(CONFIG_MAPS);
  const kindByName = new Map(MANAGED_KINDS.map((kind) => [kind.info.kind, kind]));
  const controllers = new Map<string, Controller>();
  const kindOfFamily = new Map<OperationFamily, string>(MANAGED_KINDS.map((kind) => [kind.family, kind.info.kind]));
  const dependencies = new DependencyIndex();
  // Who manages which cloud resource: the GpuCloudClaims of the operator's namespace (claims.ts). A key that
  // stopped on another object's claim is woken when that claim changes or goes.
  const claimsNamespace = config.claimsNamespace;
  const claimInformer = manager.informerFor(CLAIMS_RESOURCE, [claimsNamespace]);
  const claims = new ClaimStore(kubeClaimRecords(manager.kube, claimsNamespace), {
    wake: (kindName, key) => controllers.get(kindName)?.enqueue(key),
  });
  claimInformer.on((event) => {
    if (event.type === "delete") {
      const name = event.object.metadata?.name;
      if (name !== undefined) claims.remove(name);
      return;
    }
    const claim = claimOfObject(event.object);
    if (claim !== undefined) claims.upsert(claim);
  });
  /** The id an object's claim records (undefined while it holds none, or none with an id). */
  const claimedId = (kindName: string, object: ManagedObject): string | undefined =>
    claims.heldBy(kindName as Claim["kind"], object.metadata.uid)?.id;

  // One parse per informer object, shared by its reconciler and every kind that reads it as a dependency.
  const parsers = new Map<string, ManagedParser<ManagedSpecBase>>();
  const parserOf = (kind: KindDefinition<ManagedSpecBase>): ManagedParser<ManagedSpecBase> => {
    let parser = parsers.get(kind.info.kind);
    if (parser === undefined) {
      parser = new ManagedParser(kind.info.specSchema, kind.info.statusSchema);
      parsers.set(kind.info.kind, parser);
    }
    return parser;
  };
  const parse = (kindName: string, raw: unknown): ManagedObject | undefined => {
    const kind = kindByName.get(kindName);
    if (kind === undefined || raw === undefined) return undefined;
    const parsed = parserOf(kind).parse(raw);
    return parsed.ok ? parsed.object : undefined;
  };

  /**
   * The objects holding cloud resources that a list showed gone or changed look again now. One with an
   * operation in flight is left to the operation's settlement, which wakes it (a list during a burst shows many
   * resources moving through their own operations).
   */
  const wakeHolders = (family: OperationFamily, account: Account, ids: string[], priority: "high" | "normal") => {
    const kindName = kindOfFamily.get(family);
    const informer = kindName === undefined ? undefined : informers.get(kindName);
    if (kindName === undefined || informer === undefined) return;
    for (const id of ids) {
      const holder = claims.ofId(kindName as Claim["kind"], account, id)?.holder;
      if (holder === undefined) continue;
      if (priority === "normal" && operationInFlight(informer.get(holder.namespace, holder.name))) continue;
      controllers.get(kindName)?.enqueue(`${holder.namespace}/${holder.name}`, priority);
    }
  };

  const credentials = new CredentialStore<CloudAccount>({
    secrets: { getSecret: readSecret },
    defaultNamed: { getSecret: (namespace, name) => defaultNamed.get(namespace, name) },
    ...(allowedNamespaces
      ? { mayUseDefault: (namespace: string) => allowedNamespaces.get("", namespace) !== undefined }
      : {}),
    ...(config.credentialsSecret ? { defaultSecret: config.credentialsSecret } : {}),
    ...(config.apiUrl ? { defaultApiUrl: config.apiUrl } : {}),
    apiUrls: new ApiUrlPolicy(config.allowedApiUrls),
    logger,
    build: (parsed, credentialKey) =>
      new CloudAccount({
        client: clientFor(parsed, credentialKey, {
          ratePerSec: config.apiRateLimit,
          burst: config.apiBurst,
          accountConcurrency: config.apiAccountConcurrency,
          timeoutMs: config.apiTimeoutMs,
          maxResponseBytes: config.apiMaxResponseBytes,
          fence: manager.fence,
          userAgent: manager.userAgent,
          observer: (event) => {
            const code = String(event.status);
            manager.metrics.cloudApiRequestsTotal.inc({ method: event.method, route: event.route, code });
            manager.metrics.cloudApiRequestDurationSeconds.observe(
              { method: event.method, route: event.route },
              event.durationMs / 1000,
            );
          },
          logger: cloudLogger(credentialKey),
        }),
        projectId: parsed.projectId,
        apiUrl: parsed.apiUrl,
        credentialKey,
        onGone: (family, ids) => wakeHolders(family, accountOf(parsed.apiUrl, parsed.projectId), ids, "high"),
        onChanged: (family, ids) => wakeHolders(family, accountOf(parsed.apiUrl, parsed.projectId), ids, "normal"),
        snapshotMaxAgeMs: config.syncPeriodMs,
        pollIntervalMs: Math.min(config.pollIntervalMs, config.syncPeriodMs),
        operationPollMs: config.operationPollIntervalMs,
        operationPolling: config.operationPolling,
        logger: cloudLogger(credentialKey),
        wake: (family, ownerKey, affected) => {
          const kindName = kindOfFamily.get(family);
          if (kindName === undefined) return;
          // An operation finished: the key that owns it goes first (fair progress under a backlog of creates).
          controllers.get(kindName)?.enqueue(ownerKey, "high");
          // A side effect on another family (a VM attached or detached its disks): the owner's targets of that
          // kind, now and before, refresh their status from the invalidated snapshot instead of at the resync.
          const slash = ownerKey.indexOf("/");
          const [namespace, name] = [ownerKey.slice(0, slash), ownerKey.slice(slash + 1)];
          for (const other of affected) {
            const otherKind = kindOfFamily.get(other);
            if (otherKind === undefined) continue;
            for (const key of dependencies.targets(kindName, namespace, name, otherKind)) {
              controllers.get(otherKind)?.enqueue(key);
            }
          }
        },
        onOperationSettled: (family, operation, result, durationMs) =>
          manager.metrics.cloudOperationDurationSeconds.observe({ family, operation, result }, durationMs / 1000),
      }),
    dispose: (account) => account.stop(),
  });

  const cachedObject = (kind: "Secret" | "ConfigMap", namespace: string, name: string): OwnableObject | undefined =>
    kind === "Secret" ? secrets.get(namespace, name) : configMaps.get(namespace, name);
  // What a kind reads of another object: its id as its claim records it, never as its status says (a status edit
  // must not point a reference, a disk attachment or a firewall rule at another namespace's resource).
  const claimedView = (kindName: string, object: ManagedObject | undefined): ManagedObject | undefined => {
    if (object === undefined) return undefined;
    const id = claimedId(kindName, object);
    if (id === object.status.id) return object;
    const { id: _unbacked, ...status } = object.status;
    return { ...object, status: id === undefined ? status : { ...status, id } };
  };
  const deps: KindDeps = {
    managed: (kind, namespace, name) => claimedView(kind, parse(kind, informers.get(kind)?.get(namespace, name))),
    listManaged: (kind, namespace) =>
      (informers.get(kind)?.list(namespace) ?? []).flatMap((raw) => claimedView(kind, parse(kind, raw)) ?? []),
    managedById: (kind, namespace, account, id) => {
      // The claims know who holds an id: names an attachment without a scan.
      const holder = claims.ofId(kind as Claim["kind"], account, id)?.holder;
      if (holder === undefined || holder.namespace !== namespace) return undefined;
      return claimedView(kind, parse(kind, informers.get(kind)?.get(namespace, holder.name)));
    },
    dataKey: (kind, namespace, name, key) => {
      if (kind === "Secret") {
        const secret = secrets.get(namespace, name);
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
  };

  // Who uses which credentials Secret, kept from informer events: a Secret is woken only when an object starts
  // or stops using it, and its reconcile counts users over the distinct references, never over every object.
  // A recorded action is decided afresh only once the replica that recorded it can no longer send it.
  const timing: Partial<ReconcileTiming> = {
    intentHoldMs: config.leaseDurationMs + config.apiTimeoutMs,
    ...options.timing,
  };
  const usage = new CredentialsUsage((namespace, refName) => credentials.secretFor(namespace, refName));
  const secretUsage = new SecretUsageReconciler({
    kube: manager.kube,
    secrets: { get: readSecret },
    usersOf: (namespace, name, limit) => usage.usersOf(namespace, name, limit),
    event: (secret, type, reason, note) =>
      manager.events.record(
        { apiVersion: "v1", kind: "Secret", metadata: secret.metadata ?? {} },
        { type, reason, note, action: "Delete" },
      ),
  });
  const usageController = manager.addController({
    name: "credentials-usage",
    resource: SECRETS,
    ...secretSelection,
    reconciler: secretUsage,
    workers: 1,
    // A Secret of the default name appearing in (or leaving) a namespace moves that namespace's objects from
    // (or back to) the operator's default Secret: it is looked at again.
    watches: defaultSecret
      ? [
          {
            resource: SECRETS,
            ...secretSelection,
            mapToKeys: () => [`${defaultSecret.namespace}/${defaultSecret.name}`],
          },
        ]
      : [],
  });
  for (const kind of MANAGED_KINDS) {
    informers.get(kind.info.kind)?.on((event) => {
      for (const key of usage.apply(kind.info.kind, event.type, event.object)) {
        const slash = key.indexOf("/");
        if (secretUsage.needsLook(key.slice(0, slash), key.slice(slash + 1))) usageController.enqueue(key);
      }
    });
  }

  for (const kind of MANAGED_KINDS) {
    const resource = resourceOf(kind.info);
    const informer = informers.get(kind.info.kind);
    if (informer === undefined) continue;
    const kube = kubeAccessFor(manager, resource, (namespace, name) => informer.get(namespace, name));
    const admissions = new AccountAdmissions(kind.info.kind.toLowerCase());
    const parser = parserOf(kind);
    const managed = new ManagedReconciler<ManagedSpecBase>({
      kind: claimedKind(kind.info.kind),
      parse: (raw) => parser.parse(raw),
      locations: (spec) => kind.locations(spec),
      kube,
      claims,
      claimNamespace: claimsNamespace,
      allowCrossNamespaceObserve: config.allowCrossNamespaceObserve,
      fitStatus: fitterFor(kind.info.statusSchema),
      ...(options.now ? { now: options.now } : {}),
      timing,
      connect: async (mr) => {
        const resolved = credentials.resolve(mr.metadata.namespace, mr.spec.credentialsRef?.name);
        if (resolved.type === "missing") {
          const name = mr.spec.credentialsRef?.name;
          const read = name === undefined || readSecret(mr.metadata.namespace, name) !== undefined;
          return read ? resolved : explainMissing(manager, mr, resolved);
        }
        const { account, usingCached, secret, keys } = resolved.handle;
        // A slot of the account's bulkhead, or a requeue: a busy or failing account never takes every worker.
        admissions.admit(`${mr.metadata.namespace}/${mr.metadata.name}`, account.client.bulkhead);
        return {
          type: "connected",
          connection: {
            external: kind.external(account, deps),
            projectId: account.projectId,
            account: { apiUrl: account.apiUrl, projectId: account.projectId },
            usingCachedCredentials: usingCached,
            credentialsSource: `Secret ${secret.namespace}/${secret.name} (${keys})`,
            paymentProblem: (signal, options) => account.paymentProblem(signal, options),
            operation: (operationId, ownerKey, startedAt) =>
              account.operation(kind.family, operationId, ownerKey, startedAt),
            nextFollowTurnMs: () => account.nextFollowTurnMs(kind.family),
            findOperations: (resourceId, name, sinceMs, signal) =>
              account.findOperations(kind.family, resourceId, name, sinceMs, signal),
          },
        };
      },
      onReleased: async (mr) => {
        const owned = kind.ownedObjects?.(mr.spec) ?? [];
        if (owned.length > 0) await deleteOwnedObjects(manager, mr, owned, cachedObject);
      },
      onReconciled: (mr) => {
        const secret = credentials.secretFor(mr.metadata.namespace, mr.spec.credentialsRef?.name);
        // What it publishes to as well: a connection Secret changed or deleted by someone else is written again
        // at once (controller-runtime's Owns), not at the next resync, which ends early when nothing it reads
        // changed (quiet-resyncs.ts).
        const owned = (kind.ownedObjects?.(mr.spec) ?? []).map((object) => `${object.kind}/${object.name}`);
        const references = [...kind.references(mr.spec), ...(secret ? [`Secret/${secret.name}`] : []), ...owned];
        dependencies.record(kind.info.kind, mr.metadata.namespace, mr.metadata.name, references);
      },
    });
    const reconciler = admissions.wrap(managed, (request) => {
      const raw = informer.get(request.namespace, request.name);
      if (raw === undefined) return undefined;
      const resolved = credentials.resolve(request.namespace, credentialsRefNameOf(raw));
      return resolved.type === "ok" ? resolved.handle.account.client.bulkhead : undefined;
    });
    const watched = new Set([
      "Secret",
      "ConfigMap",
      ...MANAGED_KINDS.map((k) => k.info.kind).filter((k) => k !== kind.info.kind),
    ]);
    const dependentsOfSecret = (object: KubernetesObject) =>
      dependencies.dependents(kind.info.kind, "Secret", object.metadata?.namespace ?? "", object.metadata?.name ?? "");
    const controller = manager.addController({
      name: kind.info.kind.toLowerCase(),
      resource,
      reconciler,
      isEcho: (key, resourceVersion) => managed.isEcho(key, resourceVersion),
      onWithoutOwner: (keys) =>
        void markWithoutOwner(keys, {
          read: (key) => parse(kind.info.kind, informer.get(...splitKey(key))),
          kube,
          now: options.now ?? Date.now,
          logger,
        }),
      watches: [...watched]
        .map((watchedKind) => ({
          resource:
            watchedKind === "Secret"
              ? SECRETS
              : watchedKind === "ConfigMap"
                ? CONFIG_MAPS
                : resourceOf((kindByName.get(watchedKind) ?? kind).info),
          ...(watchedKind === "Secret" ? secretSelection : {}),
          mapToKeys: (object: KubernetesObject) =>
            dependencies.dependents(
              kind.info.kind,
              watchedKind,
              object.metadata?.namespace ?? "",
              object.metadata?.name ?? "",
            ),
        }))
        .concat([
          // A credentials Secret of the default name appearing, going or losing its label, labelled or not.
          { resource: SECRETS, ...defaultNamedSelection, mapToKeys: dependentsOfSecret },
        ]),
    });
    admissions.wakeWith((key, priority, position) => controller.wake(key, priority, position));
    controllers.set(kind.info.kind, controller);
  }

  // A GpuVm of another shard attached or detached disks: its shard's settlement refreshed that shard's disk
  // snapshot and woke that shard's disks, not ours (attachment-changes.ts). Our own VMs' settlements do both.
  informers.get(gpuVm.info.kind)?.on((event) => {
    const namespace = event.object.metadata?.namespace ?? "";
    if (ownsKey(config.shard, `${namespace}/${event.object.metadata?.name ?? ""}`)) return;
    const deleted = event.type === "delete";
    const change = attachmentChange(deleted ? event.object : event.previous, deleted ? undefined : event.object);
    if (change === undefined) return;
    const resolved = credentials.resolve(namespace, credentialsRefNameOf(event.object));
    if (resolved.type !== "ok" || resolved.handle.account.projectId !== change.projectId) return;
    const account = resolved.handle.account;
    account.disks.invalidate();
    for (const id of change.diskIds) {
      const holder = claims.ofId("GpuDisk", account, id)?.holder;
      if (holder !== undefined) controllers.get(gpuDisk.info.kind)?.enqueue(`${holder.namespace}/${holder.name}`);
    }
  });

  // A change of the default Secret wakes the objects that use it (they live in other namespaces, so the
  // per-namespace dependency index does not know them), and the Secret's own finalizer check.
  defaultSecretInformer?.on(() => {
    if (defaultSecret === undefined) return;
    usageController.enqueue(`${defaultSecret.namespace}/${defaultSecret.name}`);
    for (const kind of MANAGED_KINDS) {
      for (const raw of informers.get(kind.info.kind)?.list() ?? []) {
        const object = parse(kind.info.kind, raw);
        if (object === undefined) continue;
        const used = credentials.secretFor(object.metadata.namespace, object.spec.credentialsRef?.name);
        if (used?.namespace === defaultSecret.namespace && used.name === defaultSecret.name) {
          controllers.get(kind.info.kind)?.enqueue(`${object.metadata.namespace}/${object.metadata.name}`);
        }
      }
    }
  });

  // GpuVmPools own GpuVms and GpuDisks: their controller writes Kubernetes objects only.
  const poolInformer = manager.informerFor(POOL_RESOURCE);
  const memberInformer = (kind: "GpuVm" | "GpuDisk") => {
    const definition = kindByName.get(kind);
    const informer = informers.get(kind);
    if (definition === undefined || informer === undefined) throw new Error(`no informer for ${kind}`);
    return { resource: resourceOf(definition.info), informer };
  };
  controllers.set(
    "GpuVmPool",
    registerPoolController(manager, {
      kube: kubeAccessFor(manager, POOL_RESOURCE, (namespace, name) => poolInformer.get(namespace, name)),
      informers: { GpuVm: memberInformer("GpuVm"), GpuDisk: memberInformer("GpuDisk") },
      credentials,
      timing: { ...options.timing },
      ...(options.now ? { now: options.now } : {}),
    }),
  );

  registerClaimSweep(manager, {
    claims,
    claimsNamespace,
    kinds: new Map(
      MANAGED_KINDS.map((kind) => [
        kind.info.kind,
        {
          resource: resourceOf(kind.info),
          cachedUid: (namespace: string, name: string) => {
            const raw = informers.get(kind.info.kind)?.get(namespace, name) as
              | { metadata?: { uid?: string } }
              | undefined;
            return raw?.metadata?.uid;
          },
        },
      ]),
    ),
    kube: manager.kube,
    watchNamespaces: config.watchNamespaces,
    syncPeriodMs: config.syncPeriodMs,
  });

  registerOperatorMetrics(manager.metrics.registry, {
    kinds: MANAGED_KINDS.flatMap((kind) => {
      const informer = informers.get(kind.info.kind);
      return informer === undefined
        ? []
        : [{ kind: kind.info.kind, list: () => informer.list(), on: informer.on.bind(informer) }];
    }),
    accounts: () => credentials.accounts(),
    logger,
  });
  manager.metrics.observeCloudOperations(() =>
    cloudOperationsSample(credentials.accounts(), (options.now ?? Date.now)()),
  );

  return { controllers, credentials, stop: () => credentials.stop() };
}

/**
 * A credentials Secret of another name than the default that the (labelled) cache lacks may exist without the
 * label: one read says which, so the message gives the exact command (only objects without credentials pay it;
 * the default name's Secrets are all cached, labelled or not).
 */
async function explainMissing(
  manager: Manager,
  mr: ManagedObject,
  missing: { type: "missing"; message: string; reason?: Reason },
): Promise<{ type: "missing"; message: string; reason?: Reason }> {
  const name = mr.spec.credentialsRef?.name;
  if (missing.reason !== undefined || name === undefined || name === DEFAULT_CREDENTIALS_SECRET) return missing;
  const secret = await manager.kube.getSecret(mr.metadata.namespace, name);
  return secret === undefined ? missing : { ...missing, message: unlabelledMessage(mr.metadata.namespace, name) };
}

/** `namespace/name` as informer.get's arguments. */
function splitKey(key: string): [string, string] {
  const slash = key.indexOf("/");
  return [key.slice(0, slash), key.slice(slash + 1)];
}

/** Whether an object's status records a cloud operation still in progress (its settlement wakes the object). */
function operationInFlight(object: unknown): boolean {
  const status = isRecord(object) && isRecord(object.status) ? object.status : undefined;
  return isRecord(status?.operation) && status.operation.state === "IN_PROGRESS";
}

/** Fit statuses of a kind to its CRD schema in place (the structural schema the CRD is generated with). */
function fitterFor(statusSchema: z.ZodType): (status: ManagedStatusBase) => string[] {
  const schema = structuralSchemaOf(statusSchema);
  return (status) => fitStatusInPlace(status, schema);
}

function kubeAccessFor(
  manager: Manager,
  resource: KubeResource,
  get: (namespace: string, name: string) => unknown,
): KubeAccess {
  const envelope = (mr: ManagedObject) => ({
    apiVersion: mr.apiVersion || `${GROUP}/${VERSION}`,
    kind: mr.kind || resource.kind,
    metadata: {
      namespace: mr.metadata.namespace,
      name: mr.metadata.name,
      uid: mr.metadata.uid,
      resourceVersion: mr.metadata.resourceVersion,
      finalizers: mr.metadata.finalizers,
    },
    status: mr.status,
  });
  const mapResult = (
    mr: ManagedObject,
    result: Awaited<ReturnType<Manager["kube"]["patchStatus"]>>,
  ): Awaited<ReturnType<KubeAccess["writeStatus"]>> => {
    switch (result.type) {
      case "written":
        return {
          type: "written",
          resourceVersion: result.object.metadata?.resourceVersion ?? mr.metadata.resourceVersion,
        };
      case "unchanged":
        return { type: "written", resourceVersion: mr.metadata.resourceVersion };
      case "conflict":
        return { type: "conflict" };
      case "notFound":
        return { type: "gone" };
    }
  };
  return {
    get,
    writeStatus: async (mr, status) => {
      try {
        return mapResult(mr, await manager.kube.patchStatus(resource, envelope(mr), status));
      } catch (error) {
        // 422 (or 400): the API server refused the status. A bug on our side; the reconciler stalls loudly.
        if (error instanceof KubeApiError && (error.status === 422 || error.status === 400)) {
          return { type: "invalid", message: error.message };
        }
        throw error;
      }
    },
    setFinalizer: async (mr, present) =>
      mapResult(
        mr,
        present
          ? await manager.kube.addFinalizer(resource, envelope(mr), FINALIZER)
          : await manager.kube.removeFinalizer(resource, envelope(mr), FINALIZER),
      ),
    event: (mr, type, reason, note) =>
      manager.events.record(envelope(mr), { type, reason, note, action: type === "Warning" ? "Reconcile" : reason }),
  };
}

/**
 * The labels on every Secret/ConfigMap the operator writes; the watch label keeps them in the (label-selected)
 * Secret cache, so that an unchanged value costs no request.
 */
const MANAGED_BY = { "app.kubernetes.io/managed-by": "gpuvm-operator", [SECRET_WATCH_LABEL]: "true" };

interface OwnableObject {
  metadata?: { uid?: string; ownerReferences?: { uid?: string }[]; labels?: Record<string, string> };
  data?: Record<string, string>;
}

/** Written by this object: it carries an owner reference to it (the label alone could be copied). */
function ownedBy(object: OwnableObject, owner: ManagedObject): boolean {
  return (object.metadata?.ownerReferences ?? []).some((reference) => reference.uid === owner.metadata.uid);
}

/**
 * Create or update the Secret/ConfigMap holding a VM's connection details, owned by the GpuVm (owner reference
 * and label). One that exists without our owner reference (someone's database password, say) is never written:
 * the answer says so and the GpuVm stalls.
 */
async function publishConnectionDetails(
  manager: Manager,
  kind: "Secret" | "ConfigMap",
  owner: ManagedObject,
  name: string,
  data: Record<string, string>,
  cached: OwnableObject | undefined,
): Promise<string | undefined> {
  const namespace = owner.metadata.namespace;
  const ownerReferences = [
    {
      apiVersion: owner.apiVersion || `${GROUP}/${VERSION}`,
      kind: owner.kind || "GpuVm",
      name: owner.metadata.name,
      uid: owner.metadata.uid,
      controller: true,
      blockOwnerDeletion: false,
    },
  ];
  const metadata = { name, namespace, ownerReferences, labels: MANAGED_BY };
  const wanted =
    kind === "Secret"
      ? Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString("base64")]))
      : data;
  // The informer cache answers "unchanged" without a request; a cache miss reads once before creating.
  if (cached !== undefined && ownedBy(cached, owner) && sameData(cached.data, wanted)) return undefined;
  const existing =
    cached ??
    (kind === "Secret"
      ? await manager.kube.getSecret(namespace, name)
      : await manager.kube.getConfigMap(namespace, name));
  if (existing !== undefined && !ownedBy(existing, owner)) {
    const field = kind === "Secret" ? "secretName" : "configMapName";
    return `${kind} ${namespace}/${name} exists and was not written by this GpuVm: it is left as it is. Choose another spec.connectionDetails.${field}, or delete that ${kind} if it is not needed`;
  }
  if (existing === undefined) {
    if (kind === "Secret") await manager.kube.createSecret(namespace, { metadata, data: wanted, type: "Opaque" });
    else await manager.kube.createConfigMap(namespace, { metadata, data: wanted });
  } else if (!sameData(existing.data, wanted) || existing.metadata?.labels?.[SECRET_WATCH_LABEL] !== "true") {
    // Written before the watch label existed: the label comes with the next write.
    const patch = { metadata: { labels: MANAGED_BY }, data: wanted };
    if (kind === "Secret") await manager.kube.patchSecret(namespace, name, patch);
    else await manager.kube.patchConfigMap(namespace, name, patch);
  }
  return undefined;
}

/** Delete what an object wrote (when it still carries the object's owner reference). */
async function deleteOwnedObjects(
  manager: Manager,
  owner: ManagedObject,
  objects: readonly OwnedObject[],
  cachedOf: (kind: "Secret" | "ConfigMap", namespace: string, name: string) => OwnableObject | undefined,
): Promise<void> {
  const namespace = owner.metadata.namespace;
  for (const { kind, name } of objects) {
    const existing =
      cachedOf(kind, namespace, name) ??
      (kind === "Secret"
        ? await manager.kube.getSecret(namespace, name)
        : await manager.kube.getConfigMap(namespace, name));
    const uid = existing?.metadata?.uid;
    if (existing === undefined || uid === undefined || !ownedBy(existing, owner)) continue;
    await manager.kube.deleteOwned(kind, namespace, name, uid);
  }
}

function sameData(a: Record<string, string> | undefined, b: Record<string, string>): boolean {
  const left = a ?? {};
  return Object.keys(b).length === Object.keys(left).length && Object.entries(b).every(([k, v]) => left[k] === v);
}

export { CREDENTIALS_FINALIZER };
