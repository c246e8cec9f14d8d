// Budgets and the capacity queue on the runtime (docs/budgets.md): the GpuBudget informer and its controller (the
// budget reconciler of admission/budget-reconciler.ts, over the caches' inventory and the live holder check), the
// ledger every reservation goes through, a SpendGuard per kind that bills (guard.ts), the capacity queue's driver
// (capacity.ts), the price table in force (prices.ts) and the metrics. Waking waiters is every replica's business:
// a budget's controller runs in one shard, but each replica sees every budget change and wakes its own waiters
// that fit now (in the budget's order), and all of a deleted budget's.
import type { KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { effectivePriority, subjectOf } from "../../admission/actions.ts";
import { BudgetLedger } from "../../admission/budget-ledger.ts";
import { BudgetReconciler } from "../../admission/budget-reconciler.ts";
import { BUDGETS_RESOURCE, kubeBudgetRecords } from "../../admission/budget-records.ts";
import { admissibleWaiters } from "../../admission/ledger.ts";
import { registerAdmissionMetrics } from "../../admission/metrics.ts";
import type { BudgetedKind, Waiter } from "../../api/gpu-budget.ts";
import { gpuDiskKind } from "../../api/gpu-disk.ts";
import { gpuVmKind } from "../../api/gpu-vm.ts";
import { keyOf, type Manager, ownsKey } from "../../runtime/index.ts";
import type { CloudAccount } from "../accounts/cloud-account.ts";
import type { CredentialStore } from "../accounts/credentials.ts";
import { resourceOf } from "../core/kube-access.ts";
import type { ManagedObject } from "../core/object-model.ts";
import type { ManagedCaches } from "../managed/caches.ts";
import type { ClaimStore } from "../managed/claims.ts";
import type { SpendGuard } from "../managed/pass.ts";
import { BudgetCache } from "./budget-cache.ts";
import { CapacityDriver } from "./capacity.ts";
import { BudgetGuard } from "./guard.ts";
import { holderCheck, spendInventory } from "./holders.ts";
import { type PriceSource, watchPrices } from "./prices.ts";

export interface BudgetsDeps {
  caches: ManagedCaches;
  claims: ClaimStore;
  credentials: CredentialStore<CloudAccount>;
  /** Wake an object of a managed kind (its controller: only this replica's keys), ahead of others by default. */
  wake(kind: BudgetedKind, key: string, priority?: "high" | "normal"): void;
  now?: () => number;
}

export interface Budgets {
  /** The guard of a kind that bills (GpuVm, GpuDisk); undefined for the others. */
  guardFor(kind: string): SpendGuard | undefined;
  prices: PriceSource;
  capacity: CapacityDriver;
  /** Start the capacity probes (with the manager). */
  start(): void;
  stop(): void;
}

const BUDGETED: readonly BudgetedKind[] = ["GpuVm", "GpuDisk"];

export function registerBudgets(manager: Manager, deps: BudgetsDeps): Budgets {
  const { config } = manager;
  const logger = manager.logger.child({ component: "budgets" });
  const budgets = new BudgetCache(manager.informerFor(BUDGETS_RESOURCE));
  const prices = watchPrices(manager, config.claimsNamespace, logger);
  const records = kubeBudgetRecords(manager.kube);
  const ledger = new BudgetLedger({ records, ...(deps.now ? { now: deps.now } : {}) });
  const wakeWaiters = (namespace: string, waiters: readonly { waiter: Waiter }[]) => {
    for (const { waiter } of waiters) deps.wake(waiter.kind, keyOf(namespace, waiter.name));
  };
  const priorityOf = (vm: ManagedObject) => {
    const subject = subjectOf("GpuVm", vm.metadata, vm.spec as { priority?: number });
    return effectivePriority(subject, budgets.list(vm.metadata.namespace));
  };
  const capacity = capacityDriver(manager, deps, priorityOf, logger);
  budgets.on(({ type, budget }) => {
    const waiters = type === "delete" ? Object.values(budget.waiting) : admissibleWaiters(budget).map(([, w]) => w);
    wakeWaiters(
      budget.namespace,
      waiters.map((waiter) => ({ waiter })),
    );
    capacity.refresh(budget.namespace);
  });

  manager.addController({
    name: "gpubudget",
    resource: BUDGETS_RESOURCE,
    reconciler: new BudgetReconciler({
      records,
      cached: (namespace, name) => budgets.get(namespace, name),
      check: holderCheck({
        kube: manager.kube,
        resources: { GpuVm: resourceOf(gpuVmKind), GpuDisk: resourceOf(gpuDiskKind) },
        claims: deps.claims,
      }),
      inventory: spendInventory(deps.caches, () => prices.current()),
      wake: wakeWaiters,
      ...(deps.now ? { now: deps.now } : {}),
    }),
    workers: 2,
  });
  registerAdmissionMetrics(manager.metrics.registry, { budgets: () => budgets.list(), queue: () => capacity.queue });

  const guards = new Map(
    BUDGETED.map((kind) => [
      kind,
      new BudgetGuard({
        kind,
        ledger,
        cached: (namespace) => budgets.list(namespace),
        prices: () => prices.current(),
        ...(kind === "GpuVm" ? { capacity } : {}),
        logger,
        ...(deps.now ? { now: deps.now } : {}),
      }),
    ]),
  );
  return {
    guardFor: (kind) => guards.get(kind as BudgetedKind),
    prices,
    capacity,
    start: () => capacity.start(),
    stop: () => capacity.stop(),
  };
}

/** The capacity queue over the GpuVm informer, probing through the waiters' own credentials. */
function capacityDriver(
  manager: Manager,
  deps: BudgetsDeps,
  priorityOf: (vm: ManagedObject) => number,
  logger: Logger,
): CapacityDriver {
  const informer = deps.caches.informer(gpuVmKind.kind);
  if (informer === undefined) throw new Error("no GpuVm informer for the capacity queue");
  return new CapacityDriver({
    informer,
    parse: (raw: KubernetesObject) => deps.caches.parse(gpuVmKind.kind, raw),
    priorityOf,
    async availability(vm, type, location) {
      const resolved = deps.credentials.resolve(vm.metadata.namespace, vm.spec.credentialsRef?.name);
      if (resolved.type === "missing") return undefined;
      const signal = AbortSignal.timeout(manager.config.apiTimeoutMs);
      return resolved.handle.account.availability(type, location, signal, Date.now());
    },
    owns: (key) => ownsKey(manager.config.shard, key),
    leading: () => manager.isLeader(),
    wake: (key, priority) => deps.wake("GpuVm", key, priority),
    probeIntervalMs: manager.config.capacityProbeIntervalMs,
    logger,
    ...(deps.now ? { now: deps.now } : {}),
  });
}
