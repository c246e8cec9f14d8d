// A GpuVmPool's replicas as one pass sees them, for the plan and the placement: how many the pool has in each
// location (holding a place, or starting), each slot's state for the plan (rollout.ts), the availability readings
// the pass takes, and the room each location has for more (placement.ts).
import type { GpuVmPoolSpec, PoolSlot } from "../../api/gpu-vm-pool.ts";
import type { AvailabilityReading } from "../accounts/cloud-account.ts";
import type { Expectations } from "./expectations.ts";
import {
  deleteFirst,
  hasCapacityFailure,
  holdsPlace,
  inPlaceChangeOf,
  isReplicaReady,
  type Member,
} from "./members.ts";
import { type CapacityMemory, type Room, roomIn } from "./placement.ts";
import type { SlotState } from "./rollout.ts";

/** The replicas of a pass: its slots, their live GpuVms, and those of them waiting for capacity. */
export interface Replicas {
  slots: readonly PoolSlot[];
  live: ReadonlyMap<string, Member>;
  waiting: ReadonlySet<string>;
}

/** What the availability endpoint says per location (undefined: unknown, or not read). */
export type Readings = ReadonlyMap<string, AvailabilityReading | undefined>;

/** Slots per location. */
export function perLocation(slots: readonly PoolSlot[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const slot of slots) counts.set(slot.location, (counts.get(slot.location) ?? 0) + 1);
  return counts;
}

/**
 * The pool's replicas in a location: holding a place (their VM created), and starting (to be created, or their
 * create in flight). Replicas waiting for capacity are neither: their location is remembered as full.
 */
export function replicasIn(location: string, replicas: Replicas) {
  let holding = 0;
  let starting = 0;
  for (const slot of replicas.slots) {
    if (slot.location !== location || replicas.waiting.has(slot.name)) continue;
    const vm = replicas.live.get(slot.name);
    if (vm !== undefined && holdsPlace(vm)) holding++;
    else starting++;
  }
  return { holding, starting };
}

/** One pool's view of its locations, in one pass. */
export interface PoolLocations {
  spec: GpuVmPoolSpec;
  /** The pool's key (what CapacityMemory remembers per pool). */
  key: string;
  capacity: CapacityMemory;
  /** The capacity queue's room for the pool's VM type in a location (undefined: unknown). */
  queueRoom?: ((location: string) => number | undefined) | undefined;
}

/**
 * The availability endpoint's answer per location, read only when the pass may place a replica (one is missing,
 * or one waits for capacity and may move); none for a location remembered as full. A reading must be newer than
 * the last change of the pool's replicas there, so that a count never offers again what they took. Pending
 * replicas are tried again every capacity retry period: with a reading at most that old.
 */
export async function readAvailability(
  pool: PoolLocations,
  replicas: Replicas,
  revision: string,
  oldestReading: number,
  read: (location: string, notBefore: number) => Promise<AvailabilityReading | undefined>,
): Promise<Map<string, AvailabilityReading | undefined>> {
  const { spec, key, capacity } = pool;
  const { slots, waiting } = replicas;
  const current = slots.filter(
    (slot) => slot.revision === revision && spec.placement.locations.includes(slot.location) && !waiting.has(slot.name),
  ).length;
  const mayPlace = current < spec.replicas || waiting.size > 0;
  const readings = new Map<string, AvailabilityReading | undefined>();
  for (const location of spec.placement.locations) {
    const { holding, starting } = replicasIn(location, replicas);
    const notBefore = Math.max(capacity.readingNotBefore(key, location, holding, starting), oldestReading);
    if (!mayPlace || capacity.isFull(key, location)) continue;
    readings.set(location, await read(location, notBefore));
  }
  return readings;
}

/** How many more replicas each location may take, given the pool's replicas there (placement.ts). */
export function roomsOf(pool: PoolLocations, replicas: Replicas, readings: Readings): Map<string, Room> {
  const { spec, key, capacity } = pool;
  return new Map(
    spec.placement.locations.map((location) => [
      location,
      roomIn({
        availability: readings.get(location),
        ...replicasIn(location, replicas),
        full: capacity.isFull(key, location),
        failedBefore: capacity.failedBefore(key, location),
        queued: pool.queueRoom?.(location),
      }),
    ]),
  );
}

/** A slot as the plan sees it (rollout.ts): started, ready, outdated, movable, the change it needs in place. */
export function slotStateOf(
  pool: PoolLocations & { expectations: Expectations },
  slot: PoolSlot,
  vm: Member | undefined,
  revision: string,
  room: ReadonlyMap<string, Room>,
): SlotState {
  const { spec, key } = pool;
  const outdated = slot.revision !== revision || !spec.placement.locations.includes(slot.location);
  const capacityFailed = vm !== undefined && hasCapacityFailure(vm);
  const elsewhere = spec.placement.locations.some(
    (location) => location !== slot.location && (room.get(location)?.count ?? 0) > 0,
  );
  const own = slot.revision === revision ? spec : undefined;
  const ready = vm !== undefined && isReplicaReady(own, vm) && !pool.expectations.isChanging(key, vm.name);
  const createdAt = Date.parse(vm?.creationTimestamp ?? slot.recordedAt);
  return {
    name: slot.name,
    started: vm !== undefined,
    ready,
    outdated,
    deleteFirst: deleteFirst(vm),
    createdAtMs: Number.isNaN(createdAt) ? 0 : createdAt,
    movable: capacityFailed && elsewhere,
    change: vm !== undefined && !outdated ? inPlaceChangeOf(spec, vm) : undefined,
  };
}
