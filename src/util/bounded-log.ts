// An append-only log that keeps its newest `max` entries (the oldest go first): the write logs of the simulator
// and the Kubernetes API test double.

export class BoundedLog<T> {
  readonly #max: number;
  readonly #entries: T[] = [];

  constructor(max: number) {
    this.#max = max;
  }

  /** Appends `entry` and returns it (the caller may complete it later, e.g. with an answer's status). */
  push(entry: T): T {
    this.#entries.push(entry);
    if (this.#entries.length > this.#max) this.#entries.splice(0, this.#entries.length - this.#max);
    return entry;
  }

  entries(): readonly T[] {
    return this.#entries;
  }

  clear(): void {
    this.#entries.length = 0;
  }
}
