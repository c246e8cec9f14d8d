// Per-credential list snapshots of one resource family. Observing N objects costs ~N/500 list calls per resync
// period instead of N reads: every reconcile reads the snapshot, and a refresh is shared by all callers that
// ask at once (coalesced). A caller that knows something changed after the last refresh (an operation settled,
// its spec changed) passes `notBefore` and gets a refresh that started after that moment.
// A family whose list can be filtered by ids (VMs) and is larger than one page refreshes one resource without
// listing the family:
// `readOne` collects the ids asked for and lists them together (at most 150 per call, one such list in flight,
// at most one a second), so a VM whose operation settled costs a share of one call, not ceil(N/500) calls.
// With `pollEveryMs`, a family that is read lists itself again in the background once its last list is that old
// (ADR 0024): a resource changed or deleted outside the operator (a VM stopped with another client) shows in the
// next list, and `onChanged`/`onVanished` wake its holder then, not at its next resync. That costs one list of
// the family per interval (ceil(N/500) calls), shared by every object, and no read per object.
import { setTimeout as sleep } from "node:timers/promises";
import { type StringInterner, sharedInterner } from "../../util/intern.ts";
import { sameJson } from "../../util/json-values.ts";

export interface SnapshotView<T> {
  byId: ReadonlyMap<string, T>;
  byName: ReadonlyMap<string, T>;
  /**
   * Name → id of each resource the last full list showed and the view does not hold (see `holds`): a name looked
   * up is read by its id before anyone takes it for free.
   */
  othersByName?: ReadonlyMap<string, string>;
  /** When the list that produced this view was started (ms since epoch). */
  fetchedAt: number;
}

export interface SnapshotOptions<T> {
  /**
   * Fetch the whole family (following pages). An async iterable is taken item by item as its pages arrive: an
   * item listed alike before is dropped at once (see #kept), so a list of 10,000 holds no second copy of them.
   */
  list(signal: AbortSignal): AsyncIterable<T> | Promise<Iterable<T>>;
  idOf(item: T): string;
  nameOf(item: T): string;
  /** A view older than this is refreshed on the next read. */
  maxAgeMs: number;
  now?: () => number;
  /** Called once per list, for metrics and tests. */
  onRefresh?(count: number, durationMs: number): void;
  /** Ids the previous list had and this one has not: resources deleted meanwhile (their holders look at once). */
  onVanished?(ids: string[]): void;
  /**
   * Ids a list shows otherwise than the view held them: resources changed since they were last read (by the
   * operator's own operations or by anyone else). Their holders look at once.
   */
  onChanged?(ids: string[]): void;
  /**
   * List the family again in the background once its last list is this old, as long as the snapshot is read
   * (see `idleAfterMs`): changes made outside the operator are seen within this interval. Off when undefined.
   */
  pollEveryMs?: number;
  /**
   * Background lists stop once nothing has read the snapshot for this long (default twice maxAgeMs: every object
   * reads it at least once per sync period); the next read lists and starts them again.
   */
  idleAfterMs?: number;
  /** A background list failed (the next one is tried an interval later; the objects' own reads say why). */
  onPollError?(error: unknown): void;
  /**
   * Minimum spacing of lists (default 500 ms): a refresh asked for sooner waits, and every caller arriving
   * meanwhile shares it. Operations settling one by one thus cost one list per window, not one each. Lists by
   * ids are spaced the same way, apart from full lists.
   */
  minIntervalMs?: number;
  /**
   * Minimum spacing of lists by ids (default 1 s): every id asked for meanwhile rides along, so a burst of
   * settled operations costs about one call per second, not one each.
   */
  idsIntervalMs?: number;
  /** List the resources with these ids (one call); a family without it refreshes whole for `readOne`. */
  listIds?(ids: string[], signal: AbortSignal): Promise<T[]>;
  /** Ids per list by ids (default 150: the query stays well below the 8 KiB many servers allow a URL). */
  maxIdsPerList?: number;
  /**
   * Lists by ids only for a family larger than this (default 500, one page): below it a full list costs one
   * call too, and it also shows what vanished meanwhile.
   */
  fullListUpTo?: number;
  /** One copy of each repeated string of the resources held (default: the process's shared table). */
  interner?: StringInterner;
  /**
   * Whether the view holds a resource a full list shows (default: every one). A shard's replica holds the
   * resources of the objects it reconciles and drops the others' as they come: every replica lists the whole
   * project. A resource read on its own (by id, an operation's answer) is held whatever this says: an object of
   * this replica asked for it. With `listIds`, the background lists (`pollEveryMs`) read the held resources by id
   * instead of the whole family while that costs at most a quarter more calls and the view is younger than
   * maxAgeMs.
   */
  holds?(item: T): boolean;
}

interface IdWaiter<T> {
  notBefore: number;
  /** Asked for a change somebody made (a spec change): listed at once, not after the spacing. */
  urgent: boolean;
  resolve: (item: T | undefined) => void;
  reject: (error: unknown) => void;
}

export class FamilySnapshot<T> {
  readonly #options: SnapshotOptions<T>;
  readonly #now: () => number;
  #view: SnapshotView<T> | undefined;
  #inFlight: { startedAt: number; promise: Promise<SnapshotView<T>> } | undefined;
  #invalidatedAt = 0;
  #lastStartedAt = Number.NEGATIVE_INFINITY;
  /** When each resource was last read on its own (list by ids, GET), if after the view was listed. */
  readonly #itemFetchedAt = new Map<string, number>();
  /** Ids waiting for the next list by ids, with their callers. */
  readonly #wantedIds = new Map<string, IdWaiter<T>[]>();
  /** Wanted ids with an urgent caller. */
  readonly #urgentIds = new Set<string>();
  #idsTimer: ReturnType<typeof setTimeout> | undefined;
  #idsRunning = false;
  #lastIdsStartedAt = Number.NEGATIVE_INFINITY;
  /** The background list's timer (pollEveryMs), due an interval after the last list started. */
  #pollTimer: ReturnType<typeof setTimeout> | undefined;
  /** When a caller last read the snapshot (the background lists are not callers). */
  #lastReadAt: number;
  #stopped = false;
  /** How many resources the last full list showed (held or not): the family's size, whatever the view holds. */
  #listedCount = 0;

  readonly #interner: StringInterner;

  constructor(options: SnapshotOptions<T>) {
    this.#options = options;
    this.#interner = options.interner ?? sharedInterner;
    this.#now = options.now ?? Date.now;
    this.#lastReadAt = this.#now();
  }

  /** No more background lists (the account is dropped, the operator stops). */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#pollTimer);
    this.#pollTimer = undefined;
  }

  /**
   * One resource as fresh as `notBefore`: from the view when it is fresh enough, else from a list by ids shared
   * with every caller asking meanwhile. Undefined when the cloud did not list it. Without `notBefore` (or
   * without `listIds`), the whole snapshot is read as `read` does. An `urgent` read (a spec change somebody is
   * waiting for) does not wait for the spacing between lists by ids: it goes as soon as none is in flight, and
   * whatever else is waiting rides along; settled operations, many at once in a burst, keep the spacing.
   */
  async readOne(id: string, notBefore = 0, urgent = false): Promise<T | undefined> {
    this.#lastReadAt = this.#now();
    const view = this.#view;
    // Read on its own (an operation's answer showed it) since the change asked about: no list needed.
    const itemFetchedAt = this.#itemFetchedAt.get(id);
    if (view !== undefined && notBefore > 0 && itemFetchedAt !== undefined && itemFetchedAt >= this.#wanted(notBefore))
      return view.byId.get(id);
    // Without a reason to look at this one resource (a periodic look), the periodic full list serves it: lists
    // by ids for every object would cost more calls per period than the full list.
    if (this.#options.listIds === undefined || notBefore <= 0 || this.#small()) {
      return (await this.#read(notBefore)).byId.get(id);
    }
    const wanted = Math.max(notBefore + 1, this.#invalidatedAt);
    const fetchedAt = Math.max(view?.fetchedAt ?? Number.NEGATIVE_INFINITY, itemFetchedAt ?? 0);
    if (view !== undefined && fetchedAt >= wanted) return view.byId.get(id);
    if (this.#inFlight !== undefined && this.#inFlight.startedAt >= wanted) {
      return (await this.#inFlight.promise).byId.get(id);
    }
    return new Promise<T | undefined>((resolve, reject) => {
      const waiters = this.#wantedIds.get(id) ?? [];
      waiters.push({ notBefore: wanted, urgent, resolve, reject });
      this.#wantedIds.set(id, waiters);
      if (urgent) this.#urgentIds.add(id);
      this.#scheduleIds();
    });
  }

  /** A view at least as fresh as `notBefore` (and not older than maxAgeMs, nor than the last invalidation). */
  async read(notBefore = 0): Promise<SnapshotView<T>> {
    this.#lastReadAt = this.#now();
    return this.#read(notBefore);
  }

  async #read(notBefore: number): Promise<SnapshotView<T>> {
    const wanted = this.#wanted(notBefore);
    if (this.#view !== undefined && this.#view.fetchedAt >= wanted) return this.#view;
    if (this.#inFlight !== undefined && this.#inFlight.startedAt >= wanted) return this.#inFlight.promise;
    if (this.#inFlight !== undefined) {
      // A refresh is running but began too early for this caller: wait for it, then start a new one (shared
      // by everyone else who arrives meanwhile).
      await this.#inFlight.promise.catch(() => undefined);
      return this.#read(notBefore);
    }
    return this.#refresh();
  }

  /** The next background list, an interval after the list that started at `from`. */
  #schedulePoll(from: number): void {
    const every = this.#options.pollEveryMs;
    if (every === undefined || this.#stopped) return;
    clearTimeout(this.#pollTimer);
    this.#pollTimer = setTimeout(() => this.#poll(every), Math.max(0, from + every - this.#now()));
    this.#pollTimer.unref?.();
  }

  /** A background list, unless nobody reads the snapshot any more (its next read lists, and polls again). */
  #poll(every: number): void {
    this.#pollTimer = undefined;
    const idleAfterMs = this.#options.idleAfterMs ?? 2 * this.#options.maxAgeMs;
    if (this.#stopped || this.#now() - this.#lastReadAt > idleAfterMs) return;
    const startedAt = this.#now();
    const listIds = this.#options.listIds;
    // A shard's replica (`holds`) looks again at what it holds, by id, when that costs about the calls of the whole
    // project's pages (a third of the answers' bytes at 3 shards). A full list still comes once the view is older
    // than maxAgeMs or was invalidated (and for every lookup by name that asks for a fresh one).
    if (listIds !== undefined && this.#heldByIdsIsCheap() && (this.#view?.fetchedAt ?? -1) >= this.#wanted(0)) {
      this.#pollHeld(listIds).then(
        () => this.#schedulePoll(startedAt),
        (error: unknown) => {
          this.#options.onPollError?.(error);
          this.#schedulePoll(startedAt);
        },
      );
      return;
    }
    this.#read(startedAt - every).then(
      // Every list schedules the next one; a view that needed none (it cannot be fresher) still does.
      (view) => {
        if (this.#pollTimer === undefined) this.#schedulePoll(Math.max(view.fetchedAt, startedAt - every));
      },
      (error: unknown) => {
        this.#options.onPollError?.(error);
        this.#schedulePoll(startedAt);
      },
    );
  }

  /**
   * Whether listing the held resources by id costs at most a quarter more calls than a full list (pages of
   * `fullListUpTo`): true for a shard's replica at rest (3 shards: 67 calls for its 10,000 VMs of 30,000, against 60
   * for the whole project's pages, and a third of the bytes), false while most resources are nobody's yet (every
   * replica holds the unclaimed ones: an adoption) or without `holds`.
   */
  #heldByIdsIsCheap(): boolean {
    if (this.#options.holds === undefined) return false;
    const held = this.#view?.byId.size ?? 0;
    const byIds = Math.ceil(held / (this.#options.maxIdsPerList ?? 150));
    const full = Math.ceil(this.#listedCount / (this.#options.fullListUpTo ?? 500));
    return byIds <= full * 1.25;
  }

  /**
   * The background look of a view that holds part of the family (`holds`): its resources listed by id, what
   * changed and what vanished told as after a full list (a vanished one is confirmed by its holder's read).
   */
  async #pollHeld(listIds: NonNullable<SnapshotOptions<T>["listIds"]>): Promise<void> {
    const max = this.#options.maxIdsPerList ?? 150;
    const ids = [...(this.#view?.byId.keys() ?? [])];
    const seen = { changed: [] as string[], vanished: [] as string[] };
    try {
      for (let start = 0; start < ids.length; start += max) {
        const chunk = ids.slice(start, start + max);
        const askedAt = this.#now();
        const found = new Map<string, T>();
        for (const item of await listIds(chunk, new AbortController().signal))
          found.set(this.#options.idOf(item), item);
        this.#takeHeld(chunk, found, askedAt, seen);
      }
    } finally {
      if (seen.vanished.length > 0) this.#options.onVanished?.(seen.vanished);
      if (seen.changed.length > 0) this.#options.onChanged?.(seen.changed);
    }
  }

  /** What a list of held ids asked at `askedAt` found, into the view (unless something newer is there). */
  #takeHeld(
    ids: readonly string[],
    found: ReadonlyMap<string, T>,
    askedAt: number,
    seen: { changed: string[]; vanished: string[] },
  ): void {
    const view = this.#view;
    // A full list started since shows them as fresh as this.
    if (view === undefined || view.fetchedAt >= askedAt) return;
    for (const id of ids) {
      const known = view.byId.get(id);
      // Gone meanwhile, or read on its own since (a newer answer).
      if (known === undefined || (this.#itemFetchedAt.get(id) ?? Number.NEGATIVE_INFINITY) >= askedAt) continue;
      const listed = found.get(id);
      const item = listed === undefined ? undefined : this.#kept(known, listed);
      if (item === known) continue;
      (item === undefined ? seen.vanished : seen.changed).push(id);
      this.#put(id, item, view);
      this.#itemFetchedAt.set(id, askedAt);
    }
  }

  /** The oldest start a list may have to serve a caller asking with `notBefore`. */
  #wanted(notBefore: number): number {
    // Strictly after notBefore/invalidation: a list started in the same millisecond may predate the change.
    return Math.max(notBefore > 0 ? notBefore + 1 : 0, this.#invalidatedAt, this.#now() - this.#options.maxAgeMs);
  }

  /**
   * An operation on one resource of the family settled at `at`. A small family (or one without lists by id)
   * lists again on its next read, whoever reads; a large one leaves it to the owner, whose next pass asks for
   * that resource as fresh as the settlement (readOne), which refreshes it in the shared view: the other
   * objects' reads keep the snapshot instead of paying a full list of the family for every settled operation.
   */
  settled(at: number): void {
    if (this.#options.listIds === undefined || this.#small()) this.invalidate(at);
  }

  #small(): boolean {
    return Math.max(this.#listedCount, this.#view?.byId.size ?? 0) <= (this.#options.fullListUpTo ?? 500);
  }

  /** The next read refreshes (an operation of this family settled). */
  invalidate(at: number = this.#now()): void {
    this.#invalidatedAt = Math.max(this.#invalidatedAt, at + 1);
  }

  /** Put one freshly read item into the current view (a direct GET is newer than the list). */
  remember(item: T): void {
    if (this.#view === undefined) return;
    this.#interner.internDeep(item);
    this.#put(this.#options.idOf(item), item, this.#view);
  }

  /** The resource as the view holds it now, without reading (undefined when not held). */
  held(id: string): T | undefined {
    return this.#view?.byId.get(id);
  }

  /**
   * A resource as an answer showed it (a settled operation's result), read as fresh as `at`: the owner's next
   * look (`readOne` with a `notBefore` before `at`) takes it from the view instead of listing it, and a list
   * started before `at` does not replace it (as after a list by ids).
   */
  observed(item: T, at: number): void {
    const id = this.#options.idOf(item);
    this.#view ??= { byId: new Map(), byName: new Map(), fetchedAt: Number.NEGATIVE_INFINITY };
    this.#put(id, this.#kept(this.#view.byId.get(id), item), this.#view);
    this.#itemFetchedAt.set(id, Math.max(at, this.#itemFetchedAt.get(id) ?? Number.NEGATIVE_INFINITY));
  }

  /** Replace (or, with no item, drop) one resource of the view, in place: O(1), whatever the family's size. */
  #put(id: string, item: T | undefined, view: SnapshotView<T>): void {
    const byId = view.byId as Map<string, T>;
    const byName = view.byName as Map<string, T>;
    const old = byId.get(id);
    if (old !== undefined && byName.get(this.#options.nameOf(old)) === old) byName.delete(this.#options.nameOf(old));
    if (item === undefined) {
      byId.delete(id);
      return;
    }
    byId.set(id, item);
    byName.set(this.#options.nameOf(item), item);
  }

  #scheduleIds(): void {
    if (this.#idsRunning || this.#wantedIds.size === 0) return;
    if (this.#urgentIds.size > 0) {
      clearTimeout(this.#idsTimer);
      this.#idsTimer = undefined;
      void this.#listIds();
      return;
    }
    if (this.#idsTimer !== undefined) return;
    const delayMs = Math.max(0, this.#lastIdsStartedAt + (this.#options.idsIntervalMs ?? 1000) - this.#now());
    this.#idsTimer = setTimeout(() => {
      this.#idsTimer = undefined;
      void this.#listIds();
    }, delayMs);
  }

  /** One list by ids for the ids asked for first; the others wait for the next one. */
  async #listIds(): Promise<void> {
    const listIds = this.#options.listIds;
    if (listIds === undefined) return;
    const max = this.#options.maxIdsPerList ?? 150;
    const batch = new Map<string, IdWaiter<T>[]>();
    // Urgent ids first: a list of the 150 ids asked for first must not leave a spec change behind.
    for (const id of this.#urgentIds) {
      if (batch.size >= max) break;
      const waiters = this.#wantedIds.get(id);
      if (waiters !== undefined) batch.set(id, waiters);
    }
    for (const [id, waiters] of this.#wantedIds) {
      if (batch.size >= max) break;
      batch.set(id, waiters);
    }
    for (const id of batch.keys()) {
      this.#wantedIds.delete(id);
      this.#urgentIds.delete(id);
    }
    this.#idsRunning = true;
    const startedAt = this.#now();
    this.#lastIdsStartedAt = startedAt;
    try {
      const items = await listIds([...batch.keys()], new AbortController().signal);
      const held = this.#view;
      const found = new Map(items.map((item) => [this.#options.idOf(item), item]));
      for (const [id, item] of found) found.set(id, this.#kept(held?.byId.get(id), item));
      this.#view ??= { byId: new Map(), byName: new Map(), fetchedAt: Number.NEGATIVE_INFINITY };
      for (const [id, waiters] of batch) {
        const item = found.get(id);
        this.#put(id, item, this.#view);
        this.#itemFetchedAt.set(id, startedAt);
        for (const waiter of waiters) waiter.resolve(item);
      }
    } catch (error) {
      for (const waiters of batch.values()) for (const waiter of waiters) waiter.reject(error);
    } finally {
      this.#idsRunning = false;
      this.#scheduleIds();
    }
  }

  #refresh(): Promise<SnapshotView<T>> {
    const now = this.#now();
    const delayMs = Math.max(0, this.#lastStartedAt + (this.#options.minIntervalMs ?? 500) - now);
    const plannedStart = now + delayMs;
    this.#lastStartedAt = plannedStart;
    const promise = (delayMs > 0 ? sleep(delayMs) : Promise.resolve()).then(() => this.#list());
    const inFlight = { startedAt: plannedStart, promise };
    this.#inFlight = inFlight;
    const clear = (): void => {
      if (this.#inFlight === inFlight) this.#inFlight = undefined;
    };
    promise.then(clear, clear);
    return promise;
  }

  /**
   * The copy to hold of a listed resource. One shown alike before keeps its old copy: the listed one dies young
   * instead of replacing a long-lived one at every list (10,000 VMs: hundreds of MiB promoted to the old
   * generation in a burst, only to be collected by full collections), needs no interning, and keeps its identity,
   * which is how a quiet resync knows nothing changed (quiet-resyncs.ts). A new or changed one is held with one
   * copy of each repeated string (project, location, state, type).
   */
  #kept(known: T | undefined, listed: T): T {
    return known !== undefined && sameJson(known, listed) ? known : this.#interner.internDeep(listed);
  }

  async #list(): Promise<SnapshotView<T>> {
    const startedAt = this.#now();
    const byId = new Map<string, T>();
    const byName = new Map<string, T>();
    const changed: string[] = [];
    const holds = this.#options.holds;
    const othersByName = holds === undefined ? undefined : new Map<string, string>();
    let count = 0;
    try {
      // Each item is compared as it comes, not after the last page: the copies of the unchanged ones die young
      // instead of living through the whole list (seconds for 10,000) into the old generation.
      for await (const listed of await this.#options.list(new AbortController().signal)) {
        count++;
        if (othersByName !== undefined && holds?.(listed) === false) {
          othersByName.set(this.#options.nameOf(listed), this.#options.idOf(listed));
          continue;
        }
        // The view as held now: reads on their own (observed, lists by ids) may have changed it since the list began.
        const known = this.#view?.byId.get(this.#options.idOf(listed));
        const item = this.#kept(known, listed);
        // Keyed by the held copy's own id: the listed copy's string would be a second one per resource.
        const id = this.#options.idOf(item);
        if (known !== undefined && item !== known) changed.push(id);
        byId.set(id, item);
        byName.set(this.#options.nameOf(item), item);
      }
    } finally {
      this.#schedulePoll(startedAt);
    }
    this.#listedCount = count;
    const previous = this.#view;
    const view = { byId, byName, fetchedAt: startedAt, ...(othersByName !== undefined ? { othersByName } : {}) };
    if (previous === undefined || previous.fetchedAt <= startedAt) {
      this.#view = view;
      // Resources read on their own after this list started are newer than what it shows.
      const readSince = (id: string): boolean => (this.#itemFetchedAt.get(id) ?? 0) > startedAt;
      const vanished =
        previous === undefined || previous.fetchedAt === Number.NEGATIVE_INFINITY
          ? []
          : [...previous.byId]
              // One no longer held (another shard's object holds it now) is not gone: its holder is not ours.
              .filter(([id, item]) => !byId.has(id) && !readSince(id) && (holds === undefined || holds(item)))
              .map(([id]) => id);
      const changedSince = changed.filter((id) => !readSince(id));
      for (const [id, at] of this.#itemFetchedAt) {
        if (at <= startedAt) this.#itemFetchedAt.delete(id);
        else this.#put(id, previous?.byId.get(id), view);
      }
      if (vanished.length > 0) this.#options.onVanished?.(vanished);
      if (changedSince.length > 0) this.#options.onChanged?.(changedSince);
    }
    this.#options.onRefresh?.(count, this.#now() - startedAt);
    return view;
  }
}
