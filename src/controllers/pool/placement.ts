// Where a GpuVmPool's new replicas go, and how many each location may take now. The room of a location comes
// from the cloud's count of free VMs when the availability endpoint gives one (an extension beyond the spec), from
// its yes/no otherwise, and from what the pool's own replicas taught: a location where a replica's create failed
// for capacity lately (or one waits there now) takes none. Where the cloud only says yes, replicas are placed in
// growing batches (slow start): never more starting at once than already hold a place there, at least
// SLOW_START_BATCH, and only SLOW_START_BATCH at a time once a create failed there, so that a "yes" never sends a
// whole scale-up into a location that holds a few. Spread: the location with room that has the fewest replicas
// (ties: the earlier in the list); Pack: the first location with room. A replica that fits nowhere is not placed.
import type { PlacementStrategy } from "../../api/gpu-vm-pool.ts";
import type { AvailabilityReading } from "../accounts/cloud-account.ts";

/** Replicas starting at once in a location the cloud does not count, before any of them holds a place. */
export const SLOW_START_BATCH = 8;

interface LocationMemory {
  /** Remembered as full until then (ms). */
  fullUntil: number;
  /** A create failed there for capacity (in this process). */
  failed: boolean;
  /** The pool's replicas there as last seen (holding/starting), and since when (ms). */
  seen: string;
  seenSince: number;
}

/** What one pool learned of each location from its replicas. One per process (a restart learns again). */
export class CapacityMemory {
  readonly #memory = new Map<string, Map<string, LocationMemory>>();
  /** Per pool, the replicas seen waiting for capacity that hold no place yet. */
  readonly #waiting = new Map<string, Set<string>>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  #entry(poolKey: string, location: string): LocationMemory {
    let perPool = this.#memory.get(poolKey);
    if (perPool === undefined) {
      perPool = new Map();
      this.#memory.set(poolKey, perPool);
    }
    let entry = perPool.get(location);
    if (entry === undefined) {
      entry = { fullUntil: 0, failed: false, seen: "", seenSince: 0 };
      perPool.set(location, entry);
    }
    return entry;
  }

  /** Remember that a replica's create found no capacity in `location`: it takes none for `forMs`. */
  markFull(poolKey: string, location: string, forMs: number): void {
    const entry = this.#entry(poolKey, location);
    entry.fullUntil = Math.max(entry.fullUntil, this.#now() + forMs);
    entry.failed = true;
  }

  /** Whether `location` is remembered as full now. */
  isFull(poolKey: string, location: string): boolean {
    return (this.#memory.get(poolKey)?.get(location)?.fullUntil ?? 0) > this.#now();
  }

  /** Whether a create of the pool's replicas failed for capacity in `location` before (in this process). */
  failedBefore(poolKey: string, location: string): boolean {
    return this.#memory.get(poolKey)?.get(location)?.failed ?? false;
  }

  /**
   * Note the pool's replicas in `location` as this pass sees them; the time from which an availability reading
   * shows them as they are (their last change: a replica placed there, or one that began to hold its place).
   * An older reading may count as free what the pool's own replicas took since.
   */
  readingNotBefore(poolKey: string, location: string, holding: number, starting: number): number {
    const entry = this.#entry(poolKey, location);
    const seen = `${holding}/${starting}`;
    if (entry.seen !== seen) {
      entry.seen = seen;
      entry.seenSince = this.#now();
    }
    return entry.seenSince;
  }

  /**
   * Whether a replica waits for capacity: its create found none (`failedNow`), or did before and it has not
   * stopped waiting since (`doneWaiting`: its VM holds a place, or it stalled for another reason): the GpuVm is
   * trying again, still pending, not starting.
   */
  waits(poolKey: string, name: string, failedNow: boolean, doneWaiting: boolean): boolean {
    let names = this.#waiting.get(poolKey);
    if (failedNow) {
      names ??= new Set();
      names.add(name);
      this.#waiting.set(poolKey, names);
      return true;
    }
    if (doneWaiting) names?.delete(name);
    return !doneWaiting && (names?.has(name) ?? false);
  }

  /** Forget the waiting replicas that are no longer the pool's. */
  keepWaiting(poolKey: string, names: ReadonlySet<string>): void {
    const waiting = this.#waiting.get(poolKey);
    for (const name of waiting ?? []) if (!names.has(name)) waiting?.delete(name);
  }

  forget(poolKey: string): void {
    this.#memory.delete(poolKey);
    this.#waiting.delete(poolKey);
  }
}

/** What a pass knows of one location for the pool's VM type. */
export interface LocationEvidence {
  /** The availability endpoint's answer; undefined when it could not be read. */
  availability: AvailabilityReading | undefined;
  /** The pool's replicas there whose VM holds its place (created in the cloud). */
  holding: number;
  /** The pool's replicas there that do not hold a place yet: to be created, or their create in flight. */
  starting: number;
  /** Remembered as full: a replica's create failed there for capacity lately, or one waits there now. */
  full: boolean;
  /** A replica's create failed there for capacity before (slow start begins again, at its first batch). */
  failedBefore: boolean;
  /**
   * What the capacity queue leaves there (counted room less the objects already waiting for it), when it knows: a
   * pool's new replicas never jump the queue of GpuVms waiting for the same type and location.
   */
  queued?: number | undefined;
}

export interface Room {
  /** How many more replicas the location may take now. */
  count: number;
  /** capacity: the cloud (or a failure) says no more fit; batch: more may fit once the starting ones hold. */
  limitedBy: "capacity" | "batch";
}

/** How many more replicas a location may take now, and why not more. */
export function roomIn(evidence: LocationEvidence): Room {
  const room = roomWithoutQueue(evidence);
  const queued = evidence.queued;
  return queued !== undefined && queued < room.count ? { count: Math.max(0, queued), limitedBy: "capacity" } : room;
}

function roomWithoutQueue(evidence: LocationEvidence): Room {
  if (evidence.full || evidence.availability?.available === false) return { count: 0, limitedBy: "capacity" };
  const counted = evidence.availability?.count;
  // The count may not show the replicas still starting there: they are taken off it.
  if (counted !== undefined) return { count: Math.max(0, counted - evidence.starting), limitedBy: "capacity" };
  const batch = evidence.failedBefore ? SLOW_START_BATCH : Math.max(SLOW_START_BATCH, evidence.holding);
  return { count: Math.max(0, batch - evidence.starting), limitedBy: "batch" };
}

export interface PlacementInput {
  locations: readonly string[];
  strategy: PlacementStrategy;
  /** Replicas already placed per location (kept ones, after this pass's removals). */
  placed: ReadonlyMap<string, number>;
  /** Room per location (a location missing takes none). */
  room: ReadonlyMap<string, Room>;
}

export interface Placement {
  /** Locations for the replicas placed, in order. */
  locations: string[];
  /** Replicas that fit nowhere for lack of capacity: pending. */
  noCapacity: number;
  /** Replicas held back until the starting ones of a location without counts hold their place. */
  batched: number;
}

/** Locations for `count` new replicas; the ones that fit nowhere, and why. */
export function placeReplicas(count: number, input: PlacementInput): Placement {
  const left = new Map(input.locations.map((location) => [location, input.room.get(location)?.count ?? 0]));
  const placed = new Map(input.locations.map((location) => [location, input.placed.get(location) ?? 0]));
  const chosen: string[] = [];
  for (let index = 0; index < count; index++) {
    const open = input.locations.filter((location) => (left.get(location) ?? 0) > 0);
    let location: string | undefined;
    if (input.strategy === "Pack") location = open[0];
    else {
      for (const candidate of open) {
        if (location === undefined || (placed.get(candidate) ?? 0) < (placed.get(location) ?? 0)) location = candidate;
      }
    }
    if (location === undefined) break;
    chosen.push(location);
    placed.set(location, (placed.get(location) ?? 0) + 1);
    left.set(location, (left.get(location) ?? 0) - 1);
  }
  const unplaced = count - chosen.length;
  // Held back by a batch when some location may take more once its starting replicas hold their place.
  const batching = input.locations.some((location) => input.room.get(location)?.limitedBy === "batch");
  return {
    locations: chosen,
    noCapacity: batching ? 0 : unplaced,
    batched: batching ? unplaced : 0,
  };
}
