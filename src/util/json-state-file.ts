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

/**
 * Debounced atomic writer: `markDirty()` schedules one write of `snapshot()`. One write at a time, and the state
 * is read (`snapshot()` serialized) only when the previous write has ended: however fast changes come and however
 * slow the disk, the writer holds at most one serialized state, and the file catches up with the newest state.
 */
export class JsonStateFileWriter {
  readonly #path: string;
  readonly #snapshot: () => unknown;
  readonly #debounceMs: number;
  readonly #onError: (error: unknown) => void;
  readonly #writeText: (path: string, text: string) => Promise<void>;
  #timer: NodeJS.Timeout | undefined;
  /** The write in flight, if any. */
  #writing: Promise<void> | undefined;
  /** Changed since the write in flight read the state: write again once it ends. */
  #dirtyDuringWrite = false;
  /** The wait before the next write: the debounce, or as long as the last write took (half the time at most). */
  #pauseMs: number;

  constructor(options: {
    path: string;
    snapshot: () => unknown;
    debounceMs: number;
    onError: (error: unknown) => void;
    /** How the text reaches the file (default: `writeFileAtomic`, mode 0600). */
    writeText?: (path: string, text: string) => Promise<void>;
  }) {
    this.#path = options.path;
    this.#snapshot = options.snapshot;
    this.#debounceMs = options.debounceMs;
    this.#pauseMs = options.debounceMs;
    this.#onError = options.onError;
    // 0600 also replaces an older file with looser permissions (the mode of the renamed file is the temp's).
    this.#writeText = options.writeText ?? ((path, text) => writeFileAtomic(path, text, { mode: 0o600 }));
  }

  markDirty(): void {
    if (this.#writing !== undefined) {
      this.#dirtyDuringWrite = true;
      return;
    }
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#startWrite();
    }, this.#pauseMs);
  }

  #startWrite(): void {
    this.#dirtyDuringWrite = false;
    const started = Date.now();
    let text: string;
    try {
      text = JSON.stringify(this.#snapshot());
    } catch (error) {
      this.#onError(error);
      return;
    }
    this.#writing = this.#writeText(this.#path, text)
      .catch(this.#onError)
      .finally(() => {
        this.#writing = undefined;
        this.#pauseMs = Math.max(this.#debounceMs, Date.now() - started);
        if (this.#dirtyDuringWrite) this.markDirty();
      });
  }

  /** Write pending changes now (on close) and wait for every write to finish. */
  async flush(): Promise<void> {
    for (;;) {
      if (this.#writing !== undefined) {
        await this.#writing;
        continue;
      }
      if (this.#timer === undefined && !this.#dirtyDuringWrite) return;
      clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#startWrite();
    }
  }
}
