// One copy of each repeated string in long-lived parsed JSON. JSON.parse makes a new string for every value it
// reads, so 10,000 cached objects hold 10,000 copies of the same namespace, location, project id, condition
// reason and message, finalizer, timestamp of the same second. Interning replaces each by the copy seen before:
// the duplicates die young instead of living as long as the objects (ADR 0027 has the measurement).
//
// The table is bounded: two generations of `maxEntries` each. A string found in the old generation moves to
// the new one; when the new one is full it becomes the old one and the previous old one is dropped. Strings
// seen again and again (the common values) stay; unique ones (ids, names, resource versions) pass through and
// are forgotten after two generations, so the table never holds more than 2 × maxEntries strings.

export interface InternerOptions {
  /** Entries per generation (default 8192). */
  maxEntries?: number;
  /** Longer strings are left alone (default 256): long values are rarely repeated. */
  maxLength?: number;
}

export class StringInterner {
  readonly #maxEntries: number;
  readonly #maxLength: number;
  #young = new Map<string, string>();
  #old = new Map<string, string>();
  #hits = 0;

  constructor(options: InternerOptions = {}) {
    this.#maxEntries = options.maxEntries ?? 8192;
    this.#maxLength = options.maxLength ?? 256;
  }

  /** The copy of `value` seen before (or `value` itself, remembered from now on). */
  intern(value: string): string {
    if (value.length > this.#maxLength) return value;
    const young = this.#young.get(value);
    if (young !== undefined) {
      this.#hits++;
      return young;
    }
    const old = this.#old.get(value);
    if (old !== undefined) this.#hits++;
    const canonical = old ?? value;
    if (this.#young.size >= this.#maxEntries) {
      this.#old = this.#young;
      this.#young = new Map();
    }
    this.#young.set(canonical, canonical);
    return canonical;
  }

  /** Interns, in place, every string of a JSON-shaped value (object values, array elements); returns it. */
  internDeep<T>(value: T): T {
    this.#walk(value, 0);
    return value;
  }

  /** Strings the table holds (both generations). */
  get size(): number {
    return this.#young.size + this.#old.size;
  }

  /** Strings replaced by a copy seen before, since the start. */
  get hits(): number {
    return this.#hits;
  }

  #walk(value: unknown, depth: number): void {
    // Parsed JSON is a tree; the depth bound only guards against a cyclic value passed by mistake.
    // Equal strings compare equal whatever their copy, so every string is written back; a frozen value (not
    // parsed JSON) is left alone rather than thrown at.
    if (depth > 64 || typeof value !== "object" || value === null || Object.isFrozen(value)) return;
    if (Array.isArray(value)) {
      for (let index = 0; index < value.length; index++) {
        const item: unknown = value[index];
        if (typeof item !== "string") this.#walk(item, depth + 1);
        else if (item.length <= this.#maxLength) value[index] = this.intern(item);
      }
      return;
    }
    const record = value as Record<string, unknown>;
    for (const key in record) {
      if (!Object.hasOwn(record, key)) continue;
      const item = record[key];
      if (typeof item !== "string") this.#walk(item, depth + 1);
      else if (item.length <= this.#maxLength) record[key] = this.intern(item);
    }
  }
}

/** The operator's one table: the Kubernetes objects its informers cache and the cloud resources it snapshots
 * share their strings (a VM's id, name and location appear in both). */
export const sharedInterner = new StringInterner();
