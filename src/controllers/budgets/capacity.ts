// The capacity queue at run time (admission/capacity-queue.ts; docs/budgets.md, "The capacity queue"): its waiters
// come from the GpuVm informer (a VM whose every location answered no), so every replica and shard builds the same
// queues; a timer probes each (type, location) that has a waiter of this replica at most once per interval, through
// the credentials of one of them, and wakes the waiters the probe admits, in order, and those it moved to their
// next location. A waiter's status says its place ("3rd of 30 waiting for …"): said when it joins, and brought up
// to date at each probe of its pair (at most once per interval, not at every move of the line). The managed lifecycle asks it for a create's turn (managed/spend.ts capacityTurn) through the
// CapacityPort it implements; the pool places no more than its room (roomFor).
import type { KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { capacityWaiterOf } from "../../admission/actions.ts";
import { type Availability, CapacityQueue, type QueuePosition, queueMessage } from "../../admission/capacity-queue.ts";
import type { ObjectInformer } from "../../runtime/index.ts";
import { keyOf } from "../../runtime/index.ts";
import type { ManagedObject } from "../core/object-model.ts";
import type { CapacityPort } from "../managed/pass.ts";

export interface CapacityDriverOptions {
  /** The GpuVm informer (every GpuVm this replica caches, whatever its shard). */
  informer: ObjectInformer<KubernetesObject>;
  /** An informer object parsed (undefined: not a valid GpuVm). */
  parse(raw: KubernetesObject): ManagedObject | undefined;
  /** The priority the object counts with: its own, capped by the budgets that cover it. */
  priorityOf(vm: ManagedObject): number;
  /** What the availability endpoint says of the pair, through the object's credentials (undefined: not readable). */
  availability(vm: ManagedObject, type: string, location: string): Promise<Availability | undefined>;
  /** Whether this replica acts for a key (its shard). */
  owns(key: string): boolean;
  /** Whether this replica may call the cloud now (it leads its shard). */
  leading(): boolean;
  /** Wake a GpuVm's key: its turn came or it moved (`high`), or the place its status shows is out of date. */
  wake(key: string, priority: "high" | "normal"): void;
  probeIntervalMs: number;
  logger: Logger;
  now?: () => number;
  /** How often the due probes are looked for. Default 1 s (or the interval, when shorter). */
  tickMs?: number;
}

export class CapacityDriver implements CapacityPort {
  readonly queue: CapacityQueue;
  readonly #options: CapacityDriverOptions;
  /** The objects of the waiters, by key: a probe reads availability through one of its own. */
  readonly #objects = new Map<string, ManagedObject>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #probing = false;
  readonly #unsubscribe: () => void;

  constructor(options: CapacityDriverOptions) {
    this.#options = options;
    this.queue = new CapacityQueue({
      probeIntervalMs: options.probeIntervalMs,
      owns: options.owns,
      // This replica's creates of a pair go out in the queue's order, one after the other.
      inOrder: true,
      ...(options.now !== undefined ? { now: options.now } : {}),
    });
    this.#unsubscribe = options.informer.on((event) => {
      if (event.type === "delete") this.#forget(keyOfObject(event.object));
      else this.#observe(event.object);
    });
  }

  /** Join, refresh or leave, as the object now says. */
  #observe(raw: KubernetesObject): void {
    const key = keyOfObject(raw);
    const vm = this.#options.parse(raw);
    const spec = vm?.spec as { type?: string; location?: string; locations?: string[] } | undefined;
    const waiter =
      vm === undefined || spec?.type === undefined
        ? undefined
        : capacityWaiterOf(
            {
              metadata: { ...vm.metadata, uid: vm.metadata.uid || undefined },
              spec: { type: spec.type, location: spec.location, locations: spec.locations },
              status: vm.status,
            },
            key,
            this.#options.priorityOf(vm),
          );
    if (vm === undefined || waiter === undefined) {
      this.#leave(key, vm);
      return;
    }
    this.#objects.set(key, vm);
    this.queue.upsert(waiter);
    this.#refreshPlace(key);
  }

  /**
   * The object no longer waits. One whose create began (its intent, or a VM) took a unit of the room when it was
   * admitted: another replica's is counted as started here (so the line behind it does not move up into room it
   * took); one of ours whose create is about to be sent stays in the line until its pass says it was (started),
   * so that this replica's creates go out in order.
   */
  #leave(key: string, vm: ManagedObject | undefined): void {
    if (!this.#objects.has(key)) return;
    const began = vm !== undefined && (vm.status.createPending !== undefined || vm.status.id !== undefined);
    const sending = vm !== undefined && vm.status.createPending !== undefined && vm.status.id === undefined;
    if (sending && this.#options.owns(key)) return;
    const position = this.queue.position(key);
    this.#objects.delete(key);
    if (began && position?.admitted === true) this.queue.started(key);
    else this.queue.remove(key);
    // The one ahead left: the next of ours may go.
    if (position !== undefined) this.#wakeAll(this.queue.admitted(position.type, position.location));
  }

  /** Wake a waiter of ours whose status does not say its place in the line yet. */
  #refreshPlace(key: string): void {
    const position = this.queue.position(key);
    const vm = this.#objects.get(key);
    if (position === undefined || vm === undefined || !this.#options.owns(key)) return;
    const said = vm.status.conditions?.find((condition) => condition.type === "Ready")?.message ?? "";
    if (!said.includes(queueMessage(position))) this.#options.wake(key, "normal");
  }

  #forget(key: string): void {
    if (!this.#objects.has(key)) return;
    this.#objects.delete(key);
    const position = this.queue.position(key);
    this.queue.remove(key);
    if (position !== undefined) this.#wakeAll(this.queue.admitted(position.type, position.location));
  }

  /** Priorities changed (a budget's maxPriority): the waiters of the namespace join again with theirs. */
  refresh(namespace: string): void {
    for (const raw of this.#options.informer.list(namespace)) {
      if (this.#objects.has(keyOfObject(raw))) this.#observe(raw);
    }
  }

  start(): void {
    if (this.#timer !== undefined) return;
    const tickMs = this.#options.tickMs ?? Math.min(1000, this.#options.probeIntervalMs);
    this.#timer = setInterval(() => void this.probe(), tickMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#unsubscribe();
  }

  /** Probe the pairs that are due (at most one at a time per tick); exported for tests. */
  async probe(): Promise<void> {
    if (this.#probing || !this.#options.leading()) return;
    this.#probing = true;
    try {
      for (const pair of this.queue.dueProbes()) {
        const owner = this.#ownWaiterOf(pair.type, pair.location);
        if (owner === undefined) continue;
        let reading: Availability | undefined;
        try {
          reading = await this.#options.availability(owner, pair.type, pair.location);
        } catch (error) {
          this.#options.logger.debug({ err: error, ...pair }, "capacity probe failed; trying at the next interval");
        }
        if (reading !== undefined) this.record(pair.type, pair.location, reading);
      }
    } finally {
      this.#probing = false;
    }
  }

  /** What the cloud said of a pair (a probe, or a pool's reading): admitted waiters and moved ones are woken. */
  record(type: string, location: string, reading: Availability): void {
    const { admitted, moved } = this.queue.record(type, location, reading);
    this.#options.logger.debug({ type, location, reading, admitted: admitted.length, moved: moved.length }, "capacity");
    this.#wakeAll(admitted);
    this.#wakeAll(moved.map((entry) => entry.key));
    // Once per probe of the pair: the places the line's moves changed are said again.
    for (const [key] of this.#objects) {
      const position = this.queue.position(key);
      if (position?.type === type && position.location === location) this.#refreshPlace(key);
    }
  }

  #ownWaiterOf(type: string, location: string): ManagedObject | undefined {
    for (const [key, vm] of this.#objects) {
      if (!this.#options.owns(key)) continue;
      const position = this.queue.position(key);
      if (position?.type === type && position.location === location) return vm;
    }
    return undefined;
  }

  #wakeAll(keys: readonly string[]): void {
    for (const key of keys) this.#options.wake(key, "high");
  }

  position(key: string): QueuePosition | undefined {
    return this.queue.position(key);
  }

  mayTry(key: string): boolean {
    return this.queue.mayTry(key);
  }

  started(key: string): void {
    this.#objects.delete(key);
    this.#wakeAll(this.queue.started(key));
  }

  outOfStock(type: string, location: string): void {
    this.queue.outOfStock(type, location);
  }

  succeeded(type: string, location: string): void {
    this.#wakeAll(this.queue.succeeded(type, location));
  }

  /** What a pool may place in the pair without jumping the queue (undefined: no count known). */
  roomFor(type: string, location: string): number | undefined {
    return this.queue.roomFor(type, location);
  }
}

function keyOfObject(object: KubernetesObject): string {
  return keyOf(object.metadata?.namespace ?? "", object.metadata?.name ?? "");
}
