// When the operation tracker's next round is due (operations.ts): a round is spent when it can settle something,
// not at every interval. While operations keep being tracked (a burst), it waits until OPERATIONS_PER_ROUND more
// were tracked since the last round, or the first of them has waited MAX_WAIT_MS, or they pause (none tracked for
// QUIET_MS, at least the interval): a burst's polling is then a fixed share of its operations, whatever its length
// or the operator's own pace. A lone operation (the first after a quiet spell, or the only one a round looked at)
// is looked at every interval, as before.

/** Operations per round while they keep coming: a burst's polls cost 2 % of its creates. */
export const OPERATIONS_PER_ROUND = 50;
/** The longest an operation tracked during a stream waits for the round that looks at it (fair progress). */
const MAX_WAIT_MS = 10_000;
/** No operation tracked for this long (at least the interval): the stream has paused. */
const QUIET_MS = 1_000;

export class RoundSchedule {
  readonly #intervalMs: number;
  /** When the last round ended, and the operations tracked since it started. */
  #lastRoundAt = Number.NEGATIVE_INFINITY;
  #trackedSinceRound = 0;
  /** Operations tracked between the round before the last one and the last one. */
  #lastRoundBatch = 0;
  #firstTrackedSinceRoundAt: number | undefined;
  #lastTrackedAt = Number.NEGATIVE_INFINITY;

  constructor(intervalMs: number) {
    this.#intervalMs = intervalMs;
  }

  tracked(now: number): void {
    this.#lastTrackedAt = now;
    this.#firstTrackedSinceRoundAt ??= now;
    this.#trackedSinceRound++;
  }

  /** A round starts: what is tracked from now on waits for the next one. */
  roundStarted(): void {
    this.#lastRoundBatch = this.#trackedSinceRound;
    this.#trackedSinceRound = 0;
    this.#firstTrackedSinceRoundAt = undefined;
  }

  roundEnded(now: number): void {
    this.#lastRoundAt = now;
  }

  /**
   * When the next round is due: `intervalMs` (the interval, doubled while rounds fail) after the last one; when
   * `batched`, while operations keep being tracked, as described above.
   */
  nextRoundAt(intervalMs: number, batched: boolean): number {
    const earliest = this.#lastRoundAt + intervalMs;
    if (!batched || this.#trackedSinceRound >= OPERATIONS_PER_ROUND) return earliest;
    const quietMs = Math.max(QUIET_MS, this.#intervalMs);
    const paused = this.#lastTrackedAt + quietMs;
    const first = this.#firstTrackedSinceRoundAt;
    // Nothing tracked since the last round: what it left is looked at every interval when it was about one
    // operation, and once the stream has paused when it was a batch (the next ones may be on their way).
    if (first === undefined) return this.#lastRoundBatch <= 1 ? earliest : Math.max(earliest, paused);
    if (first - this.#lastRoundAt >= quietMs) return Math.max(earliest, first + intervalMs);
    return Math.max(earliest, Math.min(paused, first + MAX_WAIT_MS));
  }
}
