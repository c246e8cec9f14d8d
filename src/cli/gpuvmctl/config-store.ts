// gpuvmctl's files: `config.json` (API URL and default project) and `session.json` (the sign-in: email and
// tokens, never the password), both 0600 in a 0700 directory, written atomically. The session is renewed by
// one process at a time (a lock file), so that two commands never spend the same single-use refresh token.
import { mkdir, open, rm, stat } from "node:fs/promises";
import { homedir } from "node:os";
import path from "node:path";
import { z } from "zod";
import { readJsonStateFile, StateFileError, writeFileAtomic } from "../../util/json-state-file.ts";
import { AuthError, CliError } from "./errors.ts";

export const StoredConfig = z.looseObject({
  apiUrl: z.string().optional(),
  projectId: z.string().optional(),
});
export type StoredConfig = z.infer<typeof StoredConfig>;

export const StoredSession = z.looseObject({
  apiUrl: z.string(),
  email: z.string(),
  accessToken: z.string(),
  refreshToken: z.string(),
  /** Wall-clock ms after which the access token is no longer accepted. */
  expiresAtMs: z.number(),
  signedInAt: z.string(),
});
export type StoredSession = z.infer<typeof StoredSession>;

/** `$GPUVMCTL_CONFIG_DIR`, else `$XDG_CONFIG_HOME/gpuvmctl`, else `~/.config/gpuvmctl`. */
export function configDirOf(env: Readonly<Record<string, string | undefined>>): string {
  if (env.GPUVMCTL_CONFIG_DIR) return path.resolve(env.GPUVMCTL_CONFIG_DIR);
  if (env.XDG_CONFIG_HOME) return path.join(path.resolve(env.XDG_CONFIG_HOME), "gpuvmctl");
  return path.join(env.HOME || homedir(), ".config", "gpuvmctl");
}

const LOCK_STALE_MS = 30_000;
const LOCK_WAIT_MS = 15_000;

export class ConfigStore {
  readonly dir: string;
  readonly configFile: string;
  readonly sessionFile: string;
  readonly #lockFile: string;

  constructor(dir: string) {
    this.dir = dir;
    this.configFile = path.join(dir, "config.json");
    this.sessionFile = path.join(dir, "session.json");
    this.#lockFile = path.join(dir, "session.lock");
  }

  async readConfig(): Promise<StoredConfig> {
    const parsed = StoredConfig.safeParse((await this.#read(this.configFile)) ?? {});
    if (!parsed.success) {
      throw new CliError(`${this.configFile} is not a gpuvmctl config file: fix or remove it`);
    }
    return parsed.data;
  }

  async updateConfig(change: Partial<StoredConfig>): Promise<StoredConfig> {
    const next = { ...(await this.readConfig()), ...change };
    await this.#write(this.configFile, next);
    return next;
  }

  async readSession(): Promise<StoredSession | undefined> {
    const value = await this.#read(this.sessionFile);
    if (value === undefined) return undefined;
    const parsed = StoredSession.safeParse(value);
    if (!parsed.success) throw new AuthError(`the sign-in in ${this.sessionFile} is unreadable: run 'gpuvmctl login'`);
    return parsed.data;
  }

  async writeSession(session: StoredSession): Promise<void> {
    await this.#write(this.sessionFile, session);
  }

  /** True when there was a session to remove. */
  async deleteSession(): Promise<boolean> {
    const existed = (await this.#read(this.sessionFile)) !== undefined;
    await rm(this.sessionFile, { force: true });
    return existed;
  }

  /** Run `work` holding the session lock (other gpuvmctl processes wait; a lock older than 30 s is stale). */
  async withSessionLock<T>(work: () => Promise<T>): Promise<T> {
    await this.#ensureDir();
    const deadline = Date.now() + LOCK_WAIT_MS;
    for (;;) {
      try {
        const handle = await open(this.#lockFile, "wx", 0o600);
        await handle.writeFile(String(process.pid));
        await handle.close();
        break;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
        const age = await stat(this.#lockFile).then(
          (s) => Date.now() - s.mtimeMs,
          () => 0,
        );
        if (age > LOCK_STALE_MS) await rm(this.#lockFile, { force: true });
        else if (Date.now() > deadline) {
          throw new CliError(`${this.#lockFile} is held by another gpuvmctl: try again, or remove it`);
        } else await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    try {
      return await work();
    } finally {
      await rm(this.#lockFile, { force: true });
    }
  }

  async #read(file: string): Promise<unknown> {
    try {
      return await readJsonStateFile(file);
    } catch (error) {
      if (error instanceof StateFileError)
        throw new CliError(`${error.message}: fix or remove it`, 1, { cause: error });
      throw error;
    }
  }

  async #write(file: string, value: unknown): Promise<void> {
    await this.#ensureDir();
    await writeFileAtomic(file, `${JSON.stringify(value, null, 2)}\n`, { mode: 0o600, durable: true });
  }

  async #ensureDir(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
  }
}
