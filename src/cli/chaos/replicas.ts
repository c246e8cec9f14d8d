// The operator under test as real processes: two replicas with leader election, each started with POD_NAME set so
// that the Lease's holderIdentity names it. SIGKILL hits the leader; the killed replica comes back after a moment
// (a Deployment would restart it), so the other one takes the Lease over. SIGSTOP freezes the leader past its
// Lease, SIGCONT resumes it: it must then act on nothing it decided while it led. Every start writes its own log file.
// Resident memory and open file descriptors are sampled from /proc. Each replica runs as the image runs the
// operator: with its V8 flags and its environment (src/cli/node-flags.ts), so that what the chaos run measures
// (memory flatness, restarts) is what a Deployment gets.
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { OPERATOR_NODE_FLAGS, operatorEnvironment } from "../node-flags.ts";
import type { Thaw } from "./checks.ts";

export interface ReplicaExit {
  replica: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** A SIGKILL of ours, or the SIGTERM of the end of the run. */
  expected: boolean;
}

export interface ResourceSample {
  atMs: number;
  replica: string;
  rssBytes: number;
  fds: number;
}

interface Running {
  name: string;
  child: ChildProcess;
  logFile: string;
  expectedExit: boolean;
  exited: Promise<void>;
}

export class Replicas {
  readonly #mainScript: string;
  readonly #args: string[];
  readonly #logDir: string;
  readonly #running = new Map<string, Running>();
  readonly exits: ReplicaExit[] = [];
  readonly samples: ResourceSample[] = [];
  readonly logFiles: string[] = [];
  #starts = 0;
  #stopping = false;
  readonly #started = performance.now();

  constructor(options: { mainScript: string; args: string[]; logDir: string }) {
    this.#mainScript = options.mainScript;
    this.#args = options.args;
    this.#logDir = options.logDir;
  }

  start(name: string): void {
    const logFile = path.join(this.#logDir, `${name}-${++this.#starts}.log`);
    this.logFiles.push(logFile);
    const fd = openSync(logFile, "a", 0o600);
    const child = spawn(process.execPath, [...OPERATOR_NODE_FLAGS, this.#mainScript, "run", ...this.#args], {
      env: { ...operatorEnvironment(), POD_NAME: name },
      stdio: ["ignore", fd, fd],
    });
    closeSync(fd);
    const running: Running = {
      name,
      child,
      logFile,
      expectedExit: false,
      exited: new Promise((resolve) =>
        child.once("exit", (code, signal) => {
          this.exits.push({ replica: name, code, signal, expected: running.expectedExit });
          if (this.#running.get(name) === running) this.#running.delete(name);
          // A replica that died on its own comes back, as its Deployment would bring it back (the exit is
          // recorded and breaks an invariant).
          if (!running.expectedExit && !this.#stopping) setTimeout(() => this.start(name), 2000);
          resolve();
        }),
      ),
    };
    this.#running.set(name, running);
  }

  get names(): string[] {
    return [...this.#running.keys()];
  }

  /** SIGKILL a replica; it is started again after `restartAfterMs`. */
  async kill(name: string, restartAfterMs: number): Promise<void> {
    const running = this.#running.get(name);
    if (running === undefined) return;
    running.expectedExit = true;
    running.child.kill("SIGKILL");
    await running.exited;
    await new Promise((resolve) => setTimeout(resolve, restartAfterMs));
    this.start(name);
  }

  /**
   * SIGSTOP a replica for `ms`, then SIGCONT: frozen mid-work as a paused container or a long pause would freeze
   * it (its Lease runs out meanwhile). Resolves once it runs again (or has died meanwhile).
   */
  /** When each frozen replica was thawed (writes it passed through its fence before the freeze leave then). */
  readonly thaws: Thaw[] = [];

  async freeze(name: string, ms: number): Promise<void> {
    const running = this.#running.get(name);
    if (running === undefined) return;
    running.child.kill("SIGSTOP");
    await new Promise((resolve) => setTimeout(resolve, ms));
    if (this.#running.get(name) !== running) return;
    running.child.kill("SIGCONT");
    this.thaws.push({ replica: name, at: Date.now() });
  }

  /** Memory and descriptors of every running replica (Linux /proc; nothing elsewhere). */
  async sample(): Promise<void> {
    for (const running of this.#running.values()) {
      const pid = running.child.pid;
      if (pid === undefined) continue;
      try {
        const status = await readFile(`/proc/${pid}/status`, "utf8");
        const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
        const fds = (await readdir(`/proc/${pid}/fd`)).length;
        if (Number.isFinite(rssKb)) {
          const atMs = Math.round(performance.now() - this.#started);
          this.samples.push({ atMs, replica: running.name, rssBytes: rssKb * 1024, fds });
        }
      } catch {
        // The process ended between the list and the read.
      }
    }
  }

  /** SIGTERM every replica and wait for it to exit (SIGKILL after `timeoutMs`). */
  async stopAll(timeoutMs = 40_000): Promise<void> {
    this.#stopping = true;
    const all = [...this.#running.values()];
    for (const running of all) {
      running.expectedExit = true;
      // A frozen process would not see SIGTERM until it runs again.
      running.child.kill("SIGCONT");
      running.child.kill("SIGTERM");
    }
    await Promise.all(
      all.map(async (running) => {
        const timer = setTimeout(() => running.child.kill("SIGKILL"), timeoutMs);
        await running.exited;
        clearTimeout(timer);
      }),
    );
  }

  /** Milliseconds since this set was made (the clock of `samples`). */
  elapsedMs(): number {
    return Math.round(performance.now() - this.#started);
  }

  /** Killed by anything but us: a crash. */
  unexpectedExits(): ReplicaExit[] {
    return this.exits.filter((exit) => !exit.expected);
  }
}
