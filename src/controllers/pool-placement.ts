// Where a GpuVmPool's new replicas go. Spread: the location with capacity that has the fewest replicas (ties: the
// earlier in the list); Pack: the first location with capacity. A location has no capacity when the availability
// endpoint says so or when a replica's create there failed for capacity lately (remembered for the capacity
// retry period). A replica that fits nowhere is not placed: it stays pending and is tried again later.
import type { PlacementStrategy } from "../api/gpu-vm-pool.ts";

/** Locations where a pool's replicas failed for capacity, each until a time (ms). One per pool. */
export class CapacityMemory {
  readonly #until = new Map<string, Map<string, number>>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** Remember that `location` had no capacity for the pool's replicas, for `forMs`. */
  markFull(poolKey: string, location: string, forMs: number): void {
    const perPool = this.#until.get(poolKey) ?? new Map<string, number>();
    perPool.set(location, Math.max(perPool.get(location) ?? 0, this.#now() + forMs));
    this.#until.set(poolKey, perPool);
  }

  /** The locations remembered as full now, with how long each stays so (ms). */
  full(poolKey: string): Map<string, number> {
    const result = new Map<string, number>();
    for (const [location, until] of this.#until.get(poolKey) ?? []) {
      const remaining = until - this.#now();
      if (remaining > 0) result.set(location, remaining);
    }
    return result;
  }

  forget(poolKey: string): void {
    this.#until.delete(poolKey);
  }
}

export interface PlacementInput {
  locations: readonly string[];
  strategy: PlacementStrategy;
  /** Replicas already placed per location (kept ones, after this pass's removals). */
  placed: ReadonlyMap<string, number>;
  /** Locations that cannot take a replica now. */
  full: ReadonlySet<string>;
}

/** Locations for `count` new replicas, in order; `undefined` for each that fits nowhere. */
export function placeReplicas(count: number, input: PlacementInput): (string | undefined)[] {
  const open = input.locations.filter((location) => !input.full.has(location));
  const placed = new Map(input.locations.map((location) => [location, input.placed.get(location) ?? 0]));
  const result: (string | undefined)[] = [];
  for (let index = 0; index < count; index++) {
    let chosen: string | undefined;
    if (input.strategy === "Pack") chosen = open[0];
    else {
      for (const location of open) {
        if (chosen === undefined || (placed.get(location) ?? 0) < (placed.get(chosen) ?? 0)) chosen = location;
      }
    }
    result.push(chosen);
    if (chosen !== undefined) placed.set(chosen, (placed.get(chosen) ?? 0) + 1);
  }
  return result;
}
