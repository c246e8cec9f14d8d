// `--state-file`: the state is written atomically (temp file + rename), debounced, and read back at start.
import { readFile, rename, writeFile } from "node:fs/promises";
import type { SimState } from "./state.ts";

export class StateFileError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "StateFileError";
  }
}

/** Read a state file; `undefined` when it does not exist yet. */
export async function readStateFile(path: string): Promise<SimState | undefined> {
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
  const candidate = parsed as Partial<SimState> | null;
  const arrays = [
    "organizations",
    "projects",
    "users",
    "apiKeys",
    "vms",
    "disks",
    "networks",
    "firewallRules",
    "operations",
  ] as const;
  if (
    candidate === null ||
    typeof candidate !== "object" ||
    candidate.version !== 1 ||
    arrays.some((key) => !Array.isArray(candidate[key])) ||
    typeof candidate.capacity !== "object" ||
    typeof candidate.usage !== "object" ||
    typeof candidate.addressCounter !== "number"
  ) {
    throw new StateFileError(`state file ${path} is not a simulator state (version 1)`);
  }
  return candidate as SimState;
}

/** Debounced atomic writer. */
export class StateFileWriter {
  readonly #path: string;
  readonly #snapshot: () => SimState;
  readonly #debounceMs: number;
  readonly #onError: (error: unknown) => void;
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> = Promise.resolve();
  #sequence = 0;

  constructor(path: string, snapshot: () => SimState, debounceMs: number, onError: (error: unknown) => void) {
    this.#path = path;
    this.#snapshot = snapshot;
    this.#debounceMs = debounceMs;
    this.#onError = onError;
  }

  markDirty(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#write();
    }, this.#debounceMs);
  }

  #write(): Promise<void> {
    const text = JSON.stringify(this.#snapshot());
    const temp = `${this.#path}.${process.pid}.${this.#sequence++}.tmp`;
    this.#writing = this.#writing
      .then(async () => {
        await writeFile(temp, text);
        await rename(temp, this.#path);
      })
      .catch(this.#onError);
    return this.#writing;
  }

  /** Write now if anything is pending (or always, with `force`), and wait for it. */
  async flush(force = false): Promise<void> {
    const pending = this.#timer !== undefined;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (pending || force) await this.#write();
    await this.#writing;
  }
}
