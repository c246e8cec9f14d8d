// `stateFile`: the objects survive a restart. Writes are debounced and atomic (temp file + rename).
import { readFile, rename, writeFile } from "node:fs/promises";
import type { Logger } from "pino";
import type { ObjectStore, StoreSnapshot } from "./store.ts";
import { isRecord, type KubeObject } from "./types.ts";

export class StateFileError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "StateFileError";
  }
}

export async function readState(path: string): Promise<StoreSnapshot | undefined> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new StateFileError(`cannot read state file ${path}`, { cause: error });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new StateFileError(`state file ${path} is not valid JSON`, { cause: error });
  }
  if (!isRecord(parsed) || typeof parsed.resourceVersion !== "number" || !Array.isArray(parsed.objects)) {
    throw new StateFileError(`state file ${path} does not hold { resourceVersion, objects }`);
  }
  const objects = parsed.objects.filter(
    (entry): entry is { storageKey: string; object: KubeObject } =>
      isRecord(entry) &&
      typeof entry.storageKey === "string" &&
      isRecord(entry.object) &&
      isRecord(entry.object.metadata),
  );
  return { resourceVersion: parsed.resourceVersion, objects };
}

export class StatePersister {
  #path: string;
  #store: ObjectStore;
  #debounceMs: number;
  #logger: Logger;
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> = Promise.resolve();

  constructor(options: { path: string; store: ObjectStore; debounceMs: number; logger: Logger }) {
    this.#path = options.path;
    this.#store = options.store;
    this.#debounceMs = options.debounceMs;
    this.#logger = options.logger;
  }

  schedule(): void {
    if (this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#writing = this.#writing.then(() => this.#write());
    }, this.#debounceMs);
  }

  async #write(): Promise<void> {
    const temporary = `${this.#path}.${process.pid}.tmp`;
    try {
      await writeFile(temporary, JSON.stringify(this.#store.snapshot()));
      await rename(temporary, this.#path);
    } catch (error) {
      this.#logger.error({ err: error, path: this.#path }, "could not write the state file");
    }
  }

  /** Write pending changes now (on close). */
  async flush(): Promise<void> {
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#writing = this.#writing.then(() => this.#write());
    }
    await this.#writing;
  }
}
