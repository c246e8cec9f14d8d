// What a controller registers with the manager (Manager.addController): its resource, its reconciler, the other
// resources whose changes concern its objects, and its answers to the manager's questions (is an event the echo of
// its own write; what to do about objects whose shard has no leader).
import type { KubernetesObject } from "@kubernetes/client-node";
import type { Reconciler } from "./controller.ts";
import type { KubeResource } from "./resource.ts";

/** A secondary watch: when an object of `resource` changes, enqueue the keys `mapToKeys` returns. */
export interface WatchMapping<T extends KubernetesObject = KubernetesObject> {
  resource: KubeResource;
  /** Keys (`namespace/name`) of the controller's objects affected by `object`. Must not throw; must be quick. */
  mapToKeys: (object: T) => string[];
  /** Namespaces to watch for this resource (default: the manager's watch namespaces). */
  namespaces?: readonly string[];
  /** Only objects with these labels (the informer is shared with every user of the same selector). */
  labelSelector?: string;
  /** Only objects these fields select (`metadata.name=…`). */
  fieldSelector?: string;
}

export interface ControllerRegistration {
  /** Lower-case name, used in logs and metric labels (e.g. "gpuvm"). */
  name: string;
  resource: KubeResource;
  /** Only objects of `resource` with these labels are reconciled (and cached). */
  labelSelector?: string;
  /** The namespaces whose objects are reconciled; default: the watched namespaces (--watch-namespace). */
  namespaces?: readonly string[];
  reconciler: Reconciler;
  /** Default: --max-concurrent-reconciles. */
  workers?: number;
  /** Default: --sync-period; per object: annotation gpucloud.dev/sync-period. */
  syncPeriodMs?: number;
  watches?: WatchMapping[];
  /**
   * Whether an update of the controller's own object at `resourceVersion` only echoes a write its reconciler made
   * (the pass that wrote decided what comes next): such an event enqueues nothing. May answer later (a promise)
   * when the write is still awaiting its answer. Without it, every event enqueues (controller-runtime's default).
   */
  isEcho?(key: string, resourceVersion: string): boolean | Promise<boolean>;
  /**
   * With sharding and --leader-elect: called on one replica (the leader of the lowest shard led) with the keys
   * of objects whose shard has had no leader for twice the lease duration, every retry period. It may say so in
   * their status (a condition); it must not reconcile them. Must not throw.
   */
  onWithoutOwner?(keys: string[]): void;
}
