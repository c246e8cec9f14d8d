// A small heap while nothing happens. After `idleAfterMs` with no reconcile but periodic resyncs, V8 is told to
// optimize for memory (`--optimize-for-size`, read by its heap at every collection: what Chrome gets for a
// background tab through the isolate's priority, which Node does not expose); the first pass of real work (an
// event, a settled operation, a spec change) lifts it at once.
//
// Why: V8 keeps the pages its collections free in a pool for reuse, resident, and gives them back only in a
// memory-reducing collection. Those run when the allocation rate is low (its memory reducer) or when the heap is
// told to optimize for memory. An operator at rest still allocates (every object is resynced against a fresh
// list each period), so the reducer never starts: at 10,000 objects the pool and the headroom held 60–110 MiB
// beside 85–115 MiB of heap. While optimizing for memory, each major collection reduces memory (incremental, so
// without a long pause) and the heap grows more slowly; in a burst it would cost CPU, at rest it costs little.
import { setFlagsFromString } from "node:v8";
import type { Logger } from "pino";
import { type Clock, systemClock, type TimerHandle } from "./time.ts";

export const OPTIMIZE_FOR_SIZE = "--optimize-for-size";

export interface IdleMemorySaverOptions {
  /** How long without work before the heap optimizes for memory; 0 or less: never. */
  idleAfterMs: number;
  logger: Logger;
  clock?: Clock;
  /** Node's command line: a --optimize-for-size there stays on for good, and this saver keeps out of the way. */
  execArgv?: readonly string[];
  setFlags?: (flags: string) => void;
  /** Whether the heap optimizes for memory now (a gauge). */
  onChange?: (saving: boolean) => void;
}

export class IdleMemorySaver {
  readonly #options: IdleMemorySaverOptions;
  readonly #clock: Clock;
  readonly #setFlags: (flags: string) => void;
  readonly #enabled: boolean;
  #lastWorkAt = 0;
  #saving = false;
  #timer: TimerHandle | undefined;

  constructor(options: IdleMemorySaverOptions) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#setFlags = options.setFlags ?? setFlagsFromString;
    const execArgv = options.execArgv ?? process.execArgv;
    const alwaysOn = execArgv.some((arg) => arg.replaceAll("_", "-") === OPTIMIZE_FOR_SIZE);
    this.#enabled = options.idleAfterMs > 0 && !alwaysOn;
  }

  get saving(): boolean {
    return this.#saving;
  }

  start(): void {
    if (!this.#enabled || this.#timer !== undefined) return;
    this.#lastWorkAt = this.#clock.now();
    this.#arm();
  }

  /** A pass of work began (not a periodic resync): the heap stops optimizing for memory, and idleness starts over. */
  work(): void {
    if (!this.#enabled) return;
    this.#lastWorkAt = this.#clock.now();
    if (this.#saving) this.#set(false);
  }

  stop(): void {
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#saving) this.#set(false);
  }

  /** Checked four times per idle period: idleness is seen at most a quarter period late. */
  #arm(): void {
    const every = Math.max(1000, this.#options.idleAfterMs / 4);
    this.#timer = this.#clock.setTimeout(() => {
      if (!this.#saving && this.#clock.now() - this.#lastWorkAt >= this.#options.idleAfterMs) this.#set(true);
      this.#arm();
    }, every);
  }

  #set(saving: boolean): void {
    this.#saving = saving;
    this.#setFlags(saving ? OPTIMIZE_FOR_SIZE : "--no-optimize-for-size");
    this.#options.onChange?.(saving);
    this.#options.logger.debug(
      saving ? "idle: the heap optimizes for memory" : "work: the heap no longer optimizes for memory",
    );
  }
}
