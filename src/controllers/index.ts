// The operator's controllers, composed on the runtime's Manager: the managed kinds' controllers (managed/, one per
// kind of kinds/), the GpuVmPool controller (pool/), the credentials-in-use controller and the accounts behind the
// credentials (accounts/), the sweep of claims whose holder is gone, budgets and the capacity queue in front of the
// cloud calls that raise spend (budgets/), the Cluster API provider's controllers where Cluster API is served
// (cluster-api/), and the operator's gauges. Only composition lives here; every piece is
// in its folder (docs/architecture.md).
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
import { type Budgets, registerBudgets } from "./budgets/controller.ts";
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
import { installShardViews, shardHoldsVm } from "./managed/shard-view.ts";
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
  /** Budgets, prices and the capacity queue. */
  budgets: Budgets;
  /** Stop the trackers of every cloud account (after the manager stopped). */
  stop(): void;
}

/** Register every controller of the operator on a Manager before start(). */
export function registerControllers(manager: Manager, options: RegisterOptions = {}): OperatorControllers {
  const config = manager.config;
  const logger = manager.logger.child({ component: "controllers" });
  // With sharding, a replica holds in full only its GpuVms and GpuFirewallRules (and what its objects refer to),
  // and notes the others: set before their informers are made. GpuDisks and GpuNetworks, which others refer to,
  // are few next to the VMs and held whole (ADR 0032).
  const views =
    config.shard.count > 1 ? installShardViews(manager, [gpuVmKind, gpuFirewallRuleKind], config.shard) : undefined;
  const caches = new ManagedCaches(manager, MANAGED_KINDS);
  const secrets = watchSecrets(manager);
  const configMaps = manager.informerFor<CachedConfigMap>(CONFIG_MAPS);
  const controllers = new Map<string, Controller>();
  const claims = watchClaims(manager, config.claimsNamespace, (kind, key) => controllers.get(kind)?.enqueue(key));
  const dependencies = new DependencyIndex();
  const wakes = new ManagedWakes({ kinds: MANAGED_KINDS, controllers, caches, claims, dependencies });
  // A shard's replica holds in its VM snapshots the VMs of its own objects (and unclaimed ones): every replica
  // lists the whole project, and would otherwise hold every other shard's VMs too.
  const holdsVm = config.shard.count > 1 ? shardHoldsVm(claims, config.shard) : undefined;
  const credentials = createCredentialStore(manager, secrets, wakes, logger, holdsVm);
  const managedInformers = MANAGED_KINDS.flatMap(({ info }) => {
    const informer = caches.informer(info.kind);
    return informer === undefined ? [] : [{ kind: info.kind, informer }];
  });
  const usage = registerSecretUsage(manager, {
    secrets,
    resolve: (namespace, refName) => credentials.secretFor(namespace, refName),
    kinds: managedInformers,
  });
  // Budgets and the capacity queue: their waiters are woken through the kinds' controllers (only this shard's keys).
  const budgets = registerBudgets(manager, {
    caches,
    claims,
    credentials,
    wake: (kind, key, priority = "high") => controllers.get(kind)?.wake(key, priority),
    ...(options.now ? { now: options.now } : {}),
  });
  const prices = () => budgets.prices.current();
  const deps = kindDeps({
    manager,
    caches,
    claims,
    secrets,
    configMaps,
    usage: usage.usage,
    prices,
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
    spendGuard: (kind: string) => budgets.guardFor(kind),
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

  registerOwners(manager, { caches, credentials, budgets, controllers, options });
  registerClaimSweep(manager, claims, managedInformers);

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

  budgets.start();
  return {
    controllers,
    credentials,
    budgets,
    stop: () => {
      budgets.stop();
      credentials.stop();
    },
  };
}

/**
 * The kinds that own managed objects and write Kubernetes objects only: GpuVmPools (GpuVms and GpuDisks) and,
 * where Cluster API is served, its provider's kinds (GpuVms, GpuNetworks, GpuFirewallRules).
 */
function registerOwners(
  manager: Manager,
  wiring: {
    caches: ManagedCaches;
    credentials: CredentialStore<CloudAccount>;
    budgets: Budgets;
    controllers: Map<string, Controller>;
    options: RegisterOptions;
  },
): void {
  const { caches, credentials, budgets, controllers, options } = wiring;
  const vms = caches.informer(gpuVmKind.kind);
  const disks = caches.informer(gpuDiskKind.kind);
  if (vms === undefined || disks === undefined) throw new Error("no informer for the pools' members");
  const pool = {
    informers: { GpuVm: vms, GpuDisk: disks },
    credentials,
    // A pool places no more than the capacity queue leaves (ADR 0020's room), and what it reads counts as a probe.
    queue: {
      roomFor: (type: string, location: string) => budgets.capacity.roomFor(type, location),
      record: budgets.capacity.record.bind(budgets.capacity),
    },
    timing: { ...options.timing },
    ...(options.now ? { now: options.now } : {}),
  };
  controllers.set(gpuVmPoolKind.kind, registerPoolController(manager, pool));
  if (options.clusterApi !== true) return;
  const networks = caches.informer(gpuNetworkKind.kind);
  const rules = caches.informer(gpuFirewallRuleKind.kind);
  if (networks === undefined || rules === undefined)
    throw new Error("no informer for the clusters' networks and rules");
  const informers = { GpuVm: vms, GpuNetwork: networks, GpuFirewallRule: rules };
  for (const [kind, controller] of Object.entries(registerClusterApiControllers(manager, { informers, credentials }))) {
    controllers.set(kind, controller);
  }
}
