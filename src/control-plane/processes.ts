// Processes on this machine, as the control plane, Cluster API and workload clusters run them: each in its own
// process group with its log in a folder, stopped together (SIGTERM, then SIGKILL), waited for until ready, and
// swept by the next start when a test runner killed with SIGKILL could not stop them. Free loopback ports, and
// ControlPlaneError, the error of every start-up in this folder.
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { isProcessAlive } from "../util/process-alive.ts";

export class ControlPlaneError extends Error {
  override name = "ControlPlaneError";
}

const CHILD_STOP_TIMEOUT_MS = 10_000;
const TEMP_PREFIX = "gpuvm-kube-";
const OWNER_FILE = "owner.json";

/** A free TCP port on 127.0.0.1 (free when asked: the caller binds it soon after). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject()));
    });
  });
}

/**
 * A test runner killed with SIGKILL cannot stop its children. The next start finds their folders (the owner
 * process is gone), stops the processes that still run from them and removes the folders.
 */
async function sweepAbandoned(log: (line: string) => void): Promise<void> {
  const root = tmpdir();
  for (const entry of await readdir(root).catch(() => [] as string[])) {
    if (!entry.startsWith(TEMP_PREFIX)) continue;
    const dir = path.join(root, entry);
    let owner: { ownerPid?: unknown; pids?: unknown };
    try {
      owner = JSON.parse(await readFile(path.join(dir, OWNER_FILE), "utf8")) as typeof owner;
    } catch {
      continue; // being created, or not ours
    }
    if (typeof owner.ownerPid !== "number" || isProcessAlive(owner.ownerPid)) continue;
    for (const pid of Array.isArray(owner.pids) ? owner.pids : []) {
      if (typeof pid !== "number") continue;
      // Only a process that still runs from this folder: the pid may have been reused since.
      const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
      if (cmdline.includes(dir)) {
        try {
          process.kill(-pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
    }
    await rm(dir, { recursive: true, force: true });
    log(`control plane: removed ${dir}, left by a stopped test run`);
  }
}

/** Child processes, each in its own process group with its log in logDir, stopped together. */
export class ChildSet {
  readonly #children: { name: string; child: ChildProcess; exited: Promise<number | null> }[] = [];
  readonly #logDir: string;
  readonly #onSpawn: () => Promise<void>;

  constructor(logDir: string, onSpawn: () => Promise<void>) {
    this.#logDir = logDir;
    this.#onSpawn = onSpawn;
  }

  pids(): number[] {
    return this.#children.flatMap(({ child }) => (child.pid === undefined ? [] : [child.pid]));
  }

  /** Starts a child; resolves with it and a promise of its exit code (listened to from the start). */
  async spawn(
    name: string,
    command: string,
    args: string[],
    env?: NodeJS.ProcessEnv,
  ): Promise<{ child: ChildProcess; exited: Promise<number | null> }> {
    const logFile = openSync(path.join(this.#logDir, `${name}.log`), "a");
    // Its own process group, killed as a group; stopped by close() or, at worst, when this process exits.
    const child = spawn(command, args, { detached: true, stdio: ["ignore", logFile, logFile], env });
    closeSync(logFile);
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    child.once("error", () => {}); // a missing binary shows as an exit; the log tells why
    const killOnExit = (): void => killGroup(child, "SIGKILL");
    process.once("exit", killOnExit);
    void exited.then(() => process.off("exit", killOnExit));
    this.#children.push({ name, child, exited });
    await this.#onSpawn();
    return { child, exited };
  }

  async tail(name: string): Promise<string> {
    const text = await readFile(path.join(this.#logDir, `${name}.log`), "utf8").catch(() => "");
    return text.slice(-3000);
  }

  exited(name: string): boolean {
    const entry = this.#children.find((candidate) => candidate.name === name);
    return entry !== undefined && (entry.child.exitCode !== null || entry.child.signalCode !== null);
  }

  /** Stops the children in reverse start order: SIGTERM, then SIGKILL after a timeout. */
  async stopAll(): Promise<void> {
    for (const { child, exited } of this.#children.reverse()) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      killGroup(child, "SIGTERM");
      const timer = setTimeout(() => killGroup(child, "SIGKILL"), CHILD_STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    }
    this.#children.length = 0;
  }
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    child.kill(signal);
  }
}

/** Polls `check` every 100 ms until true; throws ControlPlaneError on `failed` (a child exited) or the timeout. */
export async function waitUntil(
  what: string,
  check: () => Promise<boolean>,
  options: { timeoutMs: number; failed: () => Promise<string | undefined>; timeoutMessage?: string },
): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    const failure = await options.failed();
    if (failure !== undefined) throw new ControlPlaneError(`${what}: ${failure}`);
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) {
      const timedOut = options.timeoutMessage ?? `not ready within ${options.timeoutMs} ms`;
      throw new ControlPlaneError(`${what}: ${timedOut}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * The folder and the child set of a group of processes: `dataDir`, or a fresh temporary folder whose owner file
 * lets the next start stop its processes and remove it if this process is killed with SIGKILL. Logs go to
 * `<dataDir>/logs`.
 */
export async function processFolder(
  dataDir: string | undefined,
  log: (line: string) => void,
): Promise<{ dataDir: string; children: ChildSet }> {
  await sweepAbandoned(log);
  const folder = dataDir ?? (await mkdtemp(path.join(tmpdir(), TEMP_PREFIX)));
  const logDir = path.join(folder, "logs");
  await mkdir(logDir, { recursive: true });
  const writeOwner = async (): Promise<void> => {
    if (dataDir !== undefined) return; // a chosen folder (the playground's) is never swept
    await writeFile(path.join(folder, OWNER_FILE), JSON.stringify({ ownerPid: process.pid, pids: children.pids() }));
  };
  const children = new ChildSet(logDir, writeOwner);
  await writeOwner();
  return { dataDir: folder, children };
}
