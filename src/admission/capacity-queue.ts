// The capacity queue: objects whose create (or START) found no capacity wait in one queue per (VM type, location),
// ordered by priority, then by since, then by UID. When capacity returns the head goes first, and no later joiner of
// the same priority overtakes an earlier one: a waiter may try only while its position is within the room the last
// probe (or create) showed. Availability is probed at most once per interval per pair, not once per waiter.
//
// Where the order lives: nowhere but in the objects. A waiter is (priority, since, uid, type, its location list and
// where it is in it), all read from its object (spec.priority capped by its budgets, creationTimestamp or the
// START's request time, status.locationIndex); every replica, shard or restarted process builds the same queues from
// the same informer caches and computes the same order. What is in memory only is the room per pair and the time of
// its last probe: lost at a restart, it costs one probe.
//
// Shards: every replica caches every object, so each sees whole queues; it probes a pair only while it owns one of
// its waiters, and lets only its own waiters try. With K shards a pair is probed at most K times per interval; each
// shard admits only its own keys among the first `room` of the global order, so the set that gets the capacity is
// the same as with one replica (the order in time may differ by up to one interval).
//
// Location fallback: a probe that finds no room moves the pair's waiters that have another location to their next
// one (wrapping around, as the GpuVm's walk does); they keep their priority and since, so they do not lose their
// place by moving. The caller writes the new status.locationIndex (the queue has already moved them).
import { comparePrecedence } from "./priority.ts";

export interface CapacityWaiter {
  /** What the caller wakes (a work-queue key); unique per object. */
  key: string;
  uid: string;
  type: string;
  /** The location fallback list in order (one entry for a fixed location). */
  locations: readonly string[];
  /** Where in `locations` it waits now; its queue is (type, locations[locationIndex]). */
  locationIndex: number;
  /** Its priority, capped by its budgets' maxPriority. */
  priority: number;
  /** Milliseconds since the epoch its wait counts from: the object's creation for a create, the START's request. */
  sinceMs: number;
}

/** What the cloud said of a pair: the spec's yes/no, and the count of free VMs where the server gives one. */
export interface Availability {
  available: boolean;
  count?: number | undefined;
}

export interface QueueReading {
  type: string;
  location: string;
  length: number;
  /** The longest any waiter of the pair has waited, in seconds (0 when empty). */
  oldestWaitSeconds: number;
  /** Probes made for the pair since this process started. */
  probes: number;
}

export interface QueuePosition {
  type: string;
  location: string;
  /** 1 for the head. */
  position: number;
  length: number;
  /** Whether it may try its create now. */
  admitted: boolean;
}

export interface CapacityQueueOptions {
  now?: () => number;
  /** The shortest time between two probes of one pair. Default 60 s (the capacity retry period). */
  probeIntervalMs?: number;
  /** Whether this replica acts for a key (its shard). Default: every key. */
  owns?: (key: string) => boolean;
  /**
   * One at a time, in the queue's order: of this replica's waiters within the room, only the first may try; the
   * next once it has started (`started` names it). So this replica's creates reach the cloud in the order of the
   * queue, not in whatever order concurrent passes get there. Default: every waiter within the room at once.
   */
  inOrder?: boolean;
}

interface Pair {
  type: string;
  location: string;
  /** How many of the heads may try now. */
  room: number;
  /** Whether `room` came from a count (else from a yes: slow start, grown by each create that succeeds). */
  counted: boolean;
  probedAt: number | undefined;
  probes: number;
}

const pairKey = (type: string, location: string): string => `${type}\u0000${location}`;
/** Each create that succeeds where the cloud only says yes lets two more try: the room doubles per round. */
const SLOW_START_GROWTH = 2;

export class CapacityQueue {
  readonly #now: () => number;
  readonly #intervalMs: number;
  readonly #owns: (key: string) => boolean;
  readonly #inOrder: boolean;
  readonly #waiters = new Map<string, CapacityWaiter>();
  readonly #pairs = new Map<string, Pair>();
  /** The keys waiting in each pair, and each pair's line once sorted (dropped when the pair changes). */
  readonly #members = new Map<string, Set<string>>();
  readonly #lines = new Map<string, CapacityWaiter[]>();

  constructor(options: CapacityQueueOptions = {}) {
    this.#now = options.now ?? Date.now;
    this.#intervalMs = options.probeIntervalMs ?? 60_000;
    this.#owns = options.owns ?? (() => true);
    this.#inOrder = options.inOrder ?? false;
  }

  /** Join or refresh (from the object as the informer shows it). */
  upsert(waiter: CapacityWaiter): void {
    if (waiter.locations.length === 0) return;
    const count = waiter.locations.length;
    this.#set({ ...waiter, locationIndex: ((waiter.locationIndex % count) + count) % count });
  }

  /** It left the queue: created, deleted, or no longer waiting. */
  remove(key: string): void {
    const before = this.#waiters.get(key);
    if (before === undefined) return;
    this.#waiters.delete(key);
    const pair = pairKey(before.type, locationOf(before));
    this.#members.get(pair)?.delete(key);
    this.#lines.delete(pair);
  }

  /** Where a waiter stands; undefined when it does not wait. */
  position(key: string): QueuePosition | undefined {
    const waiter = this.#waiters.get(key);
    if (waiter === undefined) return undefined;
    const location = locationOf(waiter);
    const line = this.#line(waiter.type, location);
    const index = line.findIndex((candidate) => candidate.key === key);
    const room = this.#pairs.get(pairKey(waiter.type, location))?.room ?? 0;
    return { type: waiter.type, location, position: index + 1, length: line.length, admitted: index < room };
  }

  /**
   * Whether this waiter may send its create now: it is ours, and within the room from the head (in order: and no
   * waiter of ours is ahead of it).
   */
  mayTry(key: string): boolean {
    if (!this.#owns(key) || !(this.position(key)?.admitted ?? false)) return false;
    if (!this.#inOrder) return true;
    const waiter = this.#waiters.get(key);
    if (waiter === undefined) return false;
    return this.#admittedOurs(waiter.type, locationOf(waiter))[0] === key;
  }

  /**
   * The pairs to probe now: those with a waiter of ours whose last probe is an interval old. Each is taken as
   * probed at once, so a second call in the same interval gives nothing, whatever the probe's fate.
   */
  dueProbes(): { type: string; location: string }[] {
    const now = this.#now();
    const due = new Map<string, { type: string; location: string }>();
    for (const waiter of this.#waiters.values()) {
      if (!this.#owns(waiter.key)) continue;
      const location = locationOf(waiter);
      const pair = this.#pair(waiter.type, location);
      if (pair.probedAt !== undefined && now - pair.probedAt < this.#intervalMs) continue;
      due.set(pairKey(waiter.type, location), { type: waiter.type, location });
    }
    for (const [key, probe] of due) {
      const pair = this.#pairs.get(key) ?? this.#pair(probe.type, probe.location);
      pair.probedAt = now;
      pair.probes++;
    }
    return [...due.values()];
  }

  /**
   * What the cloud said of a pair (a probe, or the availability a pool read): sets the room. No room moves our
   * waiters with another location to their next one. Returns our waiters that may try now, and those that moved
   * (their status.locationIndex to write).
   */
  record(
    type: string,
    location: string,
    availability: Availability,
  ): { admitted: string[]; moved: { key: string; locationIndex: number }[] } {
    const pair = this.#pair(type, location);
    pair.probedAt = this.#now();
    const count = availability.count;
    const hasCount = availability.available && count !== undefined && Number.isInteger(count) && count > 0;
    if (!availability.available) {
      pair.room = 0;
      pair.counted = false;
    } else if (hasCount) {
      pair.room = count;
      pair.counted = true;
    } else {
      // A yes without a count: at least the head may try; more as creates succeed.
      pair.room = Math.max(pair.counted ? 0 : pair.room, 1);
      pair.counted = false;
    }
    const moved = pair.room === 0 ? this.#moveOn(type, location) : [];
    return { admitted: this.#admittedOurs(type, location), moved };
  }

  /**
   * Our waiter's create was sent: it takes one unit of room and leaves the queue. Returns our waiters that may try
   * now (in order: the next one), for the caller to wake.
   */
  started(key: string): string[] {
    const waiter = this.#waiters.get(key);
    if (waiter === undefined) return [];
    const pair = this.#pairs.get(pairKey(waiter.type, locationOf(waiter)));
    if (pair !== undefined) pair.room = Math.max(0, pair.room - 1);
    this.remove(key);
    return this.#admittedOurs(waiter.type, locationOf(waiter));
  }

  /** Our waiters of the pair that may try now (a waiter of ours left it: the next may go). */
  admitted(type: string, location: string): string[] {
    return this.#admittedOurs(type, location);
  }

  /** A create (or START) there failed out of stock: no room until the next probe; the waiter rejoins by upsert. */
  outOfStock(type: string, location: string): void {
    const pair = this.#pair(type, location);
    pair.room = 0;
    pair.counted = false;
    pair.probedAt = this.#now();
  }

  /** A create there succeeded: where the cloud gives no count, more may try now. Returns ours that may. */
  succeeded(type: string, location: string): string[] {
    const pair = this.#pair(type, location);
    if (!pair.counted) pair.room += SLOW_START_GROWTH;
    return this.#admittedOurs(type, location);
  }

  /** Room known from a count, less the waiters ahead of any newcomer; undefined without a count (for placement). */
  roomFor(type: string, location: string): number | undefined {
    const pair = this.#pairs.get(pairKey(type, location));
    if (pair === undefined || !pair.counted) return undefined;
    return Math.max(0, pair.room - this.#line(type, location).length);
  }

  /** Every pair with waiters (and every pair probed), for the metrics. */
  readings(): QueueReading[] {
    const now = this.#now();
    const byPair = new Map<string, QueueReading>();
    for (const pair of this.#pairs.values()) {
      byPair.set(pairKey(pair.type, pair.location), {
        type: pair.type,
        location: pair.location,
        length: 0,
        oldestWaitSeconds: 0,
        probes: pair.probes,
      });
    }
    for (const waiter of this.#waiters.values()) {
      const location = locationOf(waiter);
      const key = pairKey(waiter.type, location);
      const reading = byPair.get(key) ?? { type: waiter.type, location, length: 0, oldestWaitSeconds: 0, probes: 0 };
      reading.length++;
      reading.oldestWaitSeconds = Math.max(reading.oldestWaitSeconds, Math.max(0, (now - waiter.sinceMs) / 1000));
      byPair.set(key, reading);
    }
    return [...byPair.values()];
  }

  /** The waiters of a pair in the order they go. */
  #line(type: string, location: string): CapacityWaiter[] {
    const key = pairKey(type, location);
    let line = this.#lines.get(key);
    if (line === undefined) {
      line = [...(this.#members.get(key) ?? [])]
        .flatMap((member) => this.#waiters.get(member) ?? [])
        .sort(comparePrecedence);
      this.#lines.set(key, line);
    }
    return line;
  }

  #set(waiter: CapacityWaiter): void {
    this.remove(waiter.key);
    this.#waiters.set(waiter.key, waiter);
    const key = pairKey(waiter.type, locationOf(waiter));
    const members = this.#members.get(key) ?? new Set<string>();
    members.add(waiter.key);
    this.#members.set(key, members);
    this.#lines.delete(key);
  }

  #admittedOurs(type: string, location: string): string[] {
    const room = this.#pairs.get(pairKey(type, location))?.room ?? 0;
    return this.#line(type, location)
      .slice(0, room)
      .filter((waiter) => this.#owns(waiter.key))
      .map((waiter) => waiter.key);
  }

  /** Our waiters of a pair without room go to their next location (those with one). */
  #moveOn(type: string, location: string): { key: string; locationIndex: number }[] {
    const moved: { key: string; locationIndex: number }[] = [];
    for (const waiter of this.#line(type, location)) {
      if (waiter.locations.length < 2 || !this.#owns(waiter.key)) continue;
      const locationIndex = (waiter.locationIndex + 1) % waiter.locations.length;
      this.#set({ ...waiter, locationIndex });
      moved.push({ key: waiter.key, locationIndex });
    }
    return moved;
  }

  #pair(type: string, location: string): Pair {
    const key = pairKey(type, location);
    let pair = this.#pairs.get(key);
    if (pair === undefined) {
      pair = { type, location, room: 0, counted: false, probedAt: undefined, probes: 0 };
      this.#pairs.set(key, pair);
    }
    return pair;
  }
}

function locationOf(waiter: CapacityWaiter): string {
  return waiter.locations[waiter.locationIndex] ?? waiter.locations[0] ?? "";
}

/** The words a waiting object shows: `3rd of 30 waiting for a40.1x in us-east1-a`. */
export function queueMessage(position: QueuePosition): string {
  const ordinal = (n: number) => {
    const tens = n % 100;
    if (tens >= 11 && tens <= 13) return `${n}th`;
    return `${n}${["th", "st", "nd", "rd"][n % 10] ?? "th"}`;
  };
  const state = position.admitted ? "; capacity is there, its create goes next" : "";
  return `${ordinal(position.position)} of ${position.length} waiting for ${position.type} in ${position.location}${state}`;
}
