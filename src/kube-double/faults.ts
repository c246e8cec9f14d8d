// Fault injection for tests: abrupt watch drops, history compaction, failing the next requests, latency.
export interface FailNextOptions {
  /** Only requests whose path contains this text count (and fail). */
  path?: string;
}

export interface KubeDoubleFaults {
  /** End every open watch abruptly (the connection is destroyed, no final event). */
  dropWatches(): void;
  /**
   * End every open watch cleanly, as the server's timeout does: clients watch again from their last
   * resourceVersion (after compact(), that is a 410 Gone).
   */
  endWatches(): void;
  /** Forget the event history: watches from an older resourceVersion get 410 Gone. */
  compact(): void;
  /** Answer the next `count` matching requests with `status` (429 carries Retry-After: 1). */
  failNext(count: number, status: number, options?: FailNextOptions): void;
  /** Delay every answer by `ms` milliseconds. */
  setLatency(ms: number): void;
  /** How many answers failNext injected, by status. */
  injected(): Record<number, number>;
  /** How many watches were answered 410 Gone (after compact(), or from a resourceVersion too old). */
  watchesGone(): number;
}

interface PendingFailure {
  remaining: number;
  status: number;
  path: string | undefined;
}

export class FaultState {
  latencyMs = 0;
  #failures: PendingFailure[] = [];
  readonly #injected = new Map<number, number>();

  injected(): Record<number, number> {
    return Object.fromEntries(this.#injected);
  }

  addFailure(count: number, status: number, options?: FailNextOptions): void {
    if (!Number.isInteger(count) || count < 1)
      throw new RangeError(`failNext count must be a positive integer, got ${count}`);
    if (!Number.isInteger(status) || status < 400 || status > 599)
      throw new RangeError(`failNext status must be 4xx or 5xx, got ${status}`);
    this.#failures.push({ remaining: count, status, path: options?.path });
  }

  /** The status to fail this request with, if a pending failure matches it. */
  take(path: string): number | undefined {
    const failure = this.#failures.find((candidate) => candidate.path === undefined || path.includes(candidate.path));
    if (!failure) return undefined;
    failure.remaining -= 1;
    if (failure.remaining <= 0) this.#failures.splice(this.#failures.indexOf(failure), 1);
    this.#injected.set(failure.status, (this.#injected.get(failure.status) ?? 0) + 1);
    return failure.status;
  }
}
