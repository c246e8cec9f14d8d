// Wiring of the GpuVmPool controller on the runtime: its members' access (the GpuVm and GpuDisk informers for
// reads, guarded creates, deletes and patches for writes), the availability reads through the pool's credentials
// (and the capacity queue's room), the watches that wake a pool when one of its members changes, and the per-pool
// replica gauges.

import type { KubernetesObject } from "@kubernetes/client-node";
import { Gauge } from "prom-client";
import { POOL_LABELS } from "../../api/common.ts";
import { gpuVmPoolKind } from "../../api/gpu-vm-pool.ts";
import type { Controller, KubeResource, Manager, ObjectInformer } from "../../runtime/index.ts";
import type { AvailabilityReading, CloudAccount } from "../accounts/cloud-account.ts";
import type { CredentialStore } from "../accounts/credentials.ts";
import { kubeAccessFor, resourceOf } from "../core/kube-access.ts";
import type { ReconcileTiming } from "../core/lifecycle.ts";
import type { MemberAccess, MemberKind } from "./actions.ts";
import { PoolReconciler } from "./reconciler.ts";

export const POOL_RESOURCE: KubeResource = resourceOf(gpuVmPoolKind);

export interface PoolControllerDeps {
  /** The informers of the members' kinds (shared with their own controllers). */
  informers: Record<MemberKind, ObjectInformer>;
  credentials: CredentialStore<CloudAccount>;
  /**
   * The capacity queue: the room it leaves per (type, location) for new replicas, and what the pool's availability
   * reads tell it (each counts as a probe of the pair).
   */
  queue?: {
    roomFor(type: string, location: string): number | undefined;
    record(type: string, location: string, reading: AvailabilityReading): void;
  };
  timing?: Partial<ReconcileTiming>;
  now?: () => number;
}

/** The pool a member belongs to (its controller reference, else its pool label), as a work-queue key. */
export function poolKeyOf(object: KubernetesObject): string[] {
  const namespace = object.metadata?.namespace ?? "";
  const controller = object.metadata?.ownerReferences?.find((reference) => reference.controller === true);
  if (controller?.kind === "GpuVmPool") return [`${namespace}/${controller.name}`];
  const label = object.metadata?.labels?.[POOL_LABELS.pool];
  return label !== undefined && controller === undefined ? [`${namespace}/${label}`] : [];
}

function memberAccess(manager: Manager, informers: PoolControllerDeps["informers"]): MemberAccess {
  const resource = (kind: MemberKind) => informers[kind].resource;
  return {
    list: (kind, namespace) => informers[kind].list(namespace),
    create: async (kind, namespace, body) =>
      (await manager.kube.createObject(resource(kind), namespace, body)).type === "created" ? "created" : "exists",
    delete: (kind, namespace, name, uid) => manager.kube.deleteObject(resource(kind), namespace, name, uid),
    patch: async (kind, namespace, name, patch) => {
      const result = await manager.kube.patchObject(resource(kind), namespace, name, patch);
      switch (result.type) {
        case "written":
        case "unchanged":
          return {
            type: "written",
            generation: result.type === "written" ? (result.object.metadata?.generation ?? 0) : 0,
          };
        case "conflict":
          return { type: "conflict" };
        case "notFound":
          return { type: "gone" };
      }
    },
  };
}

export function registerPoolController(manager: Manager, deps: PoolControllerDeps): Controller {
  const pools = manager.informerFor(POOL_RESOURCE);
  const reconciler = new PoolReconciler({
    kube: kubeAccessFor(manager, POOL_RESOURCE, (namespace, name) => pools.get(namespace, name)),
    members: memberAccess(manager, deps.informers),
    availability: async (pool, type, location, signal, notBefore) => {
      const resolved = deps.credentials.resolve(pool.metadata.namespace, pool.spec.template.spec.credentialsRef?.name);
      if (resolved.type === "missing") return undefined;
      try {
        const reading = await resolved.handle.account.availability(type, location, signal, notBefore);
        deps.queue?.record(type, location, reading);
        return reading;
      } catch (error) {
        manager.logger.debug({ err: error, type, location }, "availability unknown; placing without it");
        return undefined;
      }
    },
    ...(deps.queue ? { queueRoom: (type: string, location: string) => deps.queue?.roomFor(type, location) } : {}),
    ...(deps.timing ? { timing: deps.timing } : {}),
    ...(deps.now ? { now: deps.now } : {}),
  });
  registerPoolMetrics(manager, pools);
  return manager.addController({
    name: "gpuvmpool",
    resource: POOL_RESOURCE,
    reconciler,
    watches: Object.values(deps.informers).map(({ resource }) => ({ resource, mapToKeys: poolKeyOf })),
  });
}

interface PoolView {
  metadata?: { namespace?: string; name?: string };
  spec?: { replicas?: unknown };
  status?: { readyReplicas?: unknown; pendingReplicas?: unknown };
}

function numberOr0(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) ? value : 0;
}

/** Desired, ready and pending replicas per pool, read from the informer cache at scrape time. */
function registerPoolMetrics(manager: Manager, pools: ObjectInformer): void {
  const gauge = (name: string, help: string, value: (pool: PoolView) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ["namespace", "pool"],
      registers: [manager.metrics.registry],
      collect(this: Gauge<"namespace" | "pool">) {
        this.reset();
        for (const object of pools.list() as PoolView[]) {
          const labels = { namespace: object.metadata?.namespace ?? "", pool: object.metadata?.name ?? "" };
          this.set(labels, value(object));
        }
      },
    });
  gauge("gpucloud_pool_desired_replicas", "Replicas a GpuVmPool asks for (spec.replicas)", (pool) =>
    numberOr0(pool.spec?.replicas),
  );
  gauge("gpucloud_pool_ready_replicas", "Ready replicas of a GpuVmPool (status.readyReplicas)", (pool) =>
    numberOr0(pool.status?.readyReplicas),
  );
  gauge(
    "gpucloud_pool_pending_replicas",
    "Replicas of a GpuVmPool without a place for lack of capacity (status.pendingReplicas)",
    (pool) => numberOr0(pool.status?.pendingReplicas),
  );
}
