// A JSON state file that survives a restart: read back at start (absent → `undefined`), written debounced and
// atomically (temp file + rename), readable by its owner only (0600: the files hold API keys and passwords).
// The caller checks the shape of what it reads. Depends on nothing of ours.
import { chmod, open, readFile, rename, rm } from "node:fs/promises";

export class StateFileError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "StateFileError";
  }
}

/** Read and parse a JSON file; `undefined` when it does not exist yet (JSON never parses to `undefined`). */
export async function readJsonStateFile(path: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new StateFileError(`cannot read state file ${path}`, { cause: error });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new StateFileError(`state file ${path} is not valid JSON`, { cause: error });
  }
}

let temporarySequence = 0;

/**
 * Replace `path` with `text` atomically: a reader sees the old file or the new one, never a part. The temporary
 * file is created with `mode` (e.g. 0o600 for secrets) so the content is never readable by others, even briefly.
 * `durable` flushes it to disk before the rename (a spent single-use token must not come back after a crash).
 */
export async function writeFileAtomic(
  path: string,
  text: string,
  options: { mode?: number; durable?: boolean } = {},
): Promise<void> {
  const temp = `${path}.${process.pid}.${temporarySequence++}.tmp`;
  const mode = options.mode ?? 0o644;
  const handle = await open(temp, "wx", mode);
  try {
    await handle.writeFile(text);
    if (options.durable === true) await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    // The umask may have narrowed the mode; never widened. Set it exactly.
    await chmod(temp, mode);
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
}

/** Debounced atomic writer: `markDirty()` schedules one write of `snapshot()`; writes never overlap. */
export class JsonStateFileWriter {
  readonly #path: string;
  readonly #snapshot: () => unknown;
  readonly #debounceMs: number;
  readonly #onError: (error: unknown) => void;
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> = Promise.resolve();

  constructor(options: {
    path: string;
    snapshot: () => unknown;
    debounceMs: number;
    onError: (error: unknown) => void;
  }) {
    this.#path = options.path;
    this.#snapshot = options.snapshot;
    this.#debounceMs = options.debounceMs;
    this.#onError = options.onError;
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
    // 0600 also replaces an older file with looser permissions (the mode of the renamed file is the temp's).
    this.#writing = this.#writing.then(() => writeFileAtomic(this.#path, text, { mode: 0o600 })).catch(this.#onError);
    return this.#writing;
  }

  /** Write pending changes now (on close) and wait for every write to finish. */
  async flush(): Promise<void> {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
      await this.#write();
    }
    await this.#writing;
  }
}
