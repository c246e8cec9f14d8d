// The operator's controllers, composed on the runtime's Manager: the managed kinds' controllers (managed/, one per
// kind of kinds/), the GpuVmPool controller (pool/), the credentials-in-use controller and the accounts behind the
// credentials (accounts/), the sweep of claims whose holder is gone, and the operator's gauges. Only composition
// lives here; every piece is in its folder (docs/architecture.md).
import type { KubernetesObject } from "@kubernetes/client-node";
import { gpuDiskKind } from "../api/gpu-disk.ts";
import { gpuFirewallRuleKind } from "../api/gpu-firewall-rule.ts";
import { gpuNetworkKind } from "../api/gpu-network.ts";
import { gpuVmKind } from "../api/gpu-vm.ts";
import { gpuVmPoolKind } from "../api/gpu-vm-pool.ts";
import { CONFIG_MAPS, type Controller, type Manager, ownsKey } from "../runtime/index.ts";
import { createCredentialStore } from "./accounts/account-store.ts";
import type { CloudAccount } from "./accounts/cloud-account.ts";
import type { CredentialStore } from "./accounts/credentials.ts";
import { watchSecrets } from "./accounts/secret-sources.ts";
import { registerSecretUsage } from "./accounts/secret-usage.ts";
import { registerClusterApiControllers } from "./cluster-api/register.ts";
import type { ReconcileTiming } from "./core/lifecycle.ts";
import { cloudOperationsSample, registerOperatorMetrics } from "./core/metrics.ts";
import { watchForeignAttachments } from "./kinds/attachment-changes.ts";
import { type CachedConfigMap, kindDeps } from "./kinds/deps.ts";
import { MANAGED_KINDS } from "./kinds/index.ts";
import { ManagedCaches } from "./managed/caches.ts";
import { watchClaims } from "./managed/claim-records.ts";
import { registerClaimSweep } from "./managed/claim-sweep.ts";
import { DependencyIndex } from "./managed/dependency-index.ts";
import { registerManagedKind } from "./managed/register.ts";
import { installShardViews } from "./managed/shard-view.ts";
import { ManagedWakes } from "./managed/wakes.ts";
import { registerPoolController } from "./pool/controller.ts";

export { clusterApiServed } from "./cluster-api/register.ts";

export interface RegisterOptions {
  /** Overrides of the reconciler's timing (tests use short fallbacks). */
  timing?: Partial<ReconcileTiming>;
  now?: () => number;
  /**
   * Register the Cluster API provider's controllers (GpuCluster, GpuMachine, GpuMachineTemplate): only where the
   * API server serves Cluster API's Clusters and Machines (clusterApiServed), whose informers they need.
   */
  clusterApi?: boolean;
}

export interface OperatorControllers {
  controllers: ReadonlyMap<string, Controller>;
  credentials: CredentialStore<CloudAccount>;
  /** Stop the trackers of every cloud account (after the manager stopped). */
  stop(): void;
}

/** Register every controller of the operator on a Manager before start(). */
export function registerControllers(manager: Manager, options: RegisterOptions = {}): OperatorControllers {
  const config = manager.config;
  const logger = manager.logger.child({ component: "controllers" });
  // With sharding, a replica holds in full only its GpuVms and GpuFirewallRules (and what its objects refer to),
  // and notes the others: set before their informers are made. GpuDisks and GpuNetworks, which others refer to,
  // are few next to the VMs and held whole (ADR 0033).
  const views =
    config.shard.count > 1 ? installShardViews(manager, [gpuVmKind, gpuFirewallRuleKind], config.shard) : undefined;
  const caches = new ManagedCaches(manager, MANAGED_KINDS);
  const secrets = watchSecrets(manager);
  const configMaps = manager.informerFor<CachedConfigMap>(CONFIG_MAPS);
  const controllers = new Map<string, Controller>();
  const claims = watchClaims(manager, config.claimsNamespace, (kind, key) => controllers.get(kind)?.enqueue(key));
  const dependencies = new DependencyIndex();
  const wakes = new ManagedWakes({ kinds: MANAGED_KINDS, controllers, caches, claims, dependencies });
  const credentials = createCredentialStore(manager, secrets, wakes, logger);
  const managedInformers = MANAGED_KINDS.flatMap(({ info }) => {
    const informer = caches.informer(info.kind);
    return informer === undefined ? [] : [{ kind: info.kind, informer }];
  });
  const usage = registerSecretUsage(manager, {
    secrets,
    resolve: (namespace, refName) => credentials.secretFor(namespace, refName),
    kinds: managedInformers,
  });
  const deps = kindDeps({
    manager,
    caches,
    claims,
    secrets,
    configMaps,
    usage: usage.usage,
    ...(views !== undefined ? { views } : {}),
  });
  // A recorded action is decided afresh only once the replica that recorded it can no longer send it.
  const timing = { intentHoldMs: config.leaseDurationMs + config.apiTimeoutMs, ...options.timing };
  const now = options.now ? { now: options.now } : {};
  const wiring = {
    manager,
    kinds: MANAGED_KINDS,
    caches,
    claims,
    credentials,
    secrets,
    dependencies,
    deps,
    timing,
    ...now,
  };
  for (const kind of MANAGED_KINDS) controllers.set(kind.info.kind, registerManagedKind(kind, wiring));

  // A GpuVm of another shard attached or detached disks: its shard's settlement refreshed that shard's disk
  // snapshot and woke that shard's disks, not ours. Our own VMs' settlements do both.
  const vms = caches.informer(gpuVmKind.kind);
  if (vms !== undefined) {
    watchForeignAttachments({
      informer: vms,
      ownsKey: (key) => ownsKey(config.shard, key),
      credentials,
      claims,
      wakeDisk: (key) => controllers.get(gpuDiskKind.kind)?.enqueue(key),
    });
  }
  // A change of the default Secret wakes its own finalizer check, and the objects that use it.
  const defaultSecret = secrets.defaultSecret;
  defaultSecret?.informer.on(() => {
    usage.controller.enqueue(`${defaultSecret.ref.namespace}/${defaultSecret.ref.name}`);
    wakes.usersOfSecret(defaultSecret.ref, (namespace, refName) => credentials.secretFor(namespace, refName));
  });

  // GpuVmPools own GpuVms and GpuDisks: their controller writes Kubernetes objects only.
  const disks = caches.informer(gpuDiskKind.kind);
  if (vms === undefined || disks === undefined) throw new Error("no informer for the pools' members");
  const pool = { informers: { GpuVm: vms, GpuDisk: disks }, credentials, timing: { ...options.timing }, ...now };
  controllers.set(gpuVmPoolKind.kind, registerPoolController(manager, pool));
  registerClaimSweep(manager, claims, managedInformers);

  // The Cluster API provider: its kinds own GpuVms, GpuNetworks and GpuFirewallRules, whose controllers do the cloud work.
  if (options.clusterApi === true) {
    const networks = caches.informer(gpuNetworkKind.kind);
    const rules = caches.informer(gpuFirewallRuleKind.kind);
    if (networks === undefined || rules === undefined)
      throw new Error("no informer for the clusters' networks and rules");
    const informers = { GpuVm: vms, GpuNetwork: networks, GpuFirewallRule: rules };
    for (const [kind, controller] of Object.entries(
      registerClusterApiControllers(manager, { informers, credentials }),
    )) {
      controllers.set(kind, controller);
    }
  }

  registerOperatorMetrics(manager.metrics.registry, {
    kinds: managedInformers.map(({ kind, informer }) => ({
      kind,
      list: (): KubernetesObject[] => informer.list(),
      on: informer.on.bind(informer),
    })),
    accounts: () => credentials.accounts(),
    logger,
  });
  manager.metrics.observeCloudOperations(() =>
    cloudOperationsSample(credentials.accounts(), (options.now ?? Date.now)()),
  );

  return { controllers, credentials, stop: () => credentials.stop() };
}
