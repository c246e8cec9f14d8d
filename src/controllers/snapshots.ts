// Per-credential list snapshots of one resource family. Observing N objects costs ~N/500 list calls per resync
// period instead of N reads: every reconcile reads the snapshot, and a refresh is shared by all callers that
// ask at once (coalesced). A caller that knows something changed after the last refresh (an operation settled)
// passes `notBefore` and gets a refresh that started after that moment.

export interface SnapshotView<T> {
  byId: ReadonlyMap<string, T>;
  byName: ReadonlyMap<string, T>;
  /** When the list that produced this view was started (ms since epoch). */
  fetchedAt: number;
}

export interface SnapshotOptions<T> {
  /** Fetch the whole family (following pages). */
  list(signal: AbortSignal): Promise<T[]>;
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
   * Minimum spacing of lists (default 500 ms): a refresh asked for sooner waits, and every caller arriving
   * meanwhile shares it. Operations settling one by one thus cost one list per window, not one each.
   */
  minIntervalMs?: number;
}

export class FamilySnapshot<T> {
  readonly #options: SnapshotOptions<T>;
  readonly #now: () => number;
  #view: SnapshotView<T> | undefined;
  #inFlight: { startedAt: number; promise: Promise<SnapshotView<T>> } | undefined;
  #invalidatedAt = 0;
  #lastStartedAt = Number.NEGATIVE_INFINITY;

  constructor(options: SnapshotOptions<T>) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /** A view at least as fresh as `notBefore` (and not older than maxAgeMs, nor than the last invalidation). */
  async read(notBefore = 0): Promise<SnapshotView<T>> {
    // Strictly after notBefore/invalidation: a list started in the same millisecond may predate the change.
    const wanted = Math.max(
      notBefore > 0 ? notBefore + 1 : 0,
      this.#invalidatedAt,
      this.#now() - this.#options.maxAgeMs,
    );
    if (this.#view !== undefined && this.#view.fetchedAt >= wanted) return this.#view;
    if (this.#inFlight !== undefined && this.#inFlight.startedAt >= wanted) return this.#inFlight.promise;
    if (this.#inFlight !== undefined) {
      // A refresh is running but began too early for this caller: wait for it, then start a new one (shared
      // by everyone else who arrives meanwhile).
      await this.#inFlight.promise.catch(() => undefined);
      return this.read(notBefore);
    }
    return this.#refresh();
  }

  /** The next read refreshes (an operation of this family settled). */
  invalidate(at: number = this.#now()): void {
    this.#invalidatedAt = Math.max(this.#invalidatedAt, at + 1);
  }

  /** Put one freshly read item into the current view (a direct GET is newer than the list). */
  remember(item: T): void {
    if (this.#view === undefined) return;
    const byId = new Map(this.#view.byId);
    const byName = new Map(this.#view.byName);
    byId.set(this.#options.idOf(item), item);
    byName.set(this.#options.nameOf(item), item);
    this.#view = { byId, byName, fetchedAt: this.#view.fetchedAt };
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

  async #list(): Promise<SnapshotView<T>> {
    const startedAt = this.#now();
    const items = await this.#options.list(new AbortController().signal);
    const byId = new Map<string, T>();
    const byName = new Map<string, T>();
    for (const item of items) {
      byId.set(this.#options.idOf(item), item);
      byName.set(this.#options.nameOf(item), item);
    }
    const view = { byId, byName, fetchedAt: startedAt };
    const previous = this.#view;
    if (previous === undefined || previous.fetchedAt <= startedAt) {
      this.#view = view;
      const vanished = previous === undefined ? [] : [...previous.byId.keys()].filter((id) => !byId.has(id));
      if (vanished.length > 0) this.#options.onVanished?.(vanished);
    }
    this.#options.onRefresh?.(items.length, this.#now() - startedAt);
    return view;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
