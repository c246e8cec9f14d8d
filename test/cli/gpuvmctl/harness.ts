// Runs gpuvmctl in-process against the simulator: streams captured, a temporary config directory, the clock of
// the simulator, a recording `run` (ssh). Terminal behaviour is faked per stream (isTTY) where a test asks.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { PassThrough, Readable } from "node:stream";
import { runCli } from "../../../src/cli/gpuvmctl/cli.ts";
import type { InputStream, Io, OutputStream } from "../../../src/cli/gpuvmctl/io.ts";
import type { SimulatorOptions } from "../../../src/simulator/index.ts";
import { type RunningSimulator, startSimulator } from "../../../src/simulator/index.ts";

export interface Result {
  code: number;
  stdout: string;
  stderr: string;
  /** Programs `run` was asked to start (ssh). */
  ran: { command: string; args: string[] }[];
}

export interface RunOptions {
  env?: Record<string, string | undefined>;
  /** Standard input (a pipe). */
  stdin?: string;
  /** Pretend stdout / stderr are terminals. */
  stdoutTty?: boolean;
  stderrTty?: boolean;
}

function capture(tty: boolean): { stream: OutputStream; text: () => string } {
  const chunks: Buffer[] = [];
  const stream = new PassThrough() as PassThrough & OutputStream;
  stream.on("data", (chunk: Buffer) => chunks.push(chunk));
  if (tty) stream.isTTY = true;
  return { stream, text: () => Buffer.concat(chunks).toString("utf8") };
}

export interface Cli {
  sim: RunningSimulator;
  configDir: string;
  /** The environment every run gets (config dir, HOME, API URL); a run's env is merged over it. */
  env: Record<string, string | undefined>;
  run(argv: string[], options?: RunOptions): Promise<Result>;
  close(): Promise<void>;
}

export async function startCli(options: SimulatorOptions = {}): Promise<Cli> {
  const sim = await startSimulator({ port: 0, latencyMs: 0, rateLimit: false, ...options });
  const configDir = await mkdtemp(path.join(tmpdir(), "gpuvmctl-"));
  const env: Record<string, string | undefined> = {
    GPUVMCTL_CONFIG_DIR: path.join(configDir, "config"),
    HOME: configDir,
    GPUCLOUD_API_URL: sim.url,
  };
  return {
    sim,
    configDir,
    env,
    async run(argv, runOptions = {}) {
      const stdout = capture(runOptions.stdoutTty ?? false);
      const stderr = capture(runOptions.stderrTty ?? false);
      const ran: Result["ran"] = [];
      const io: Io = {
        stdout: stdout.stream,
        stderr: stderr.stream,
        stdin: Readable.from(runOptions.stdin === undefined ? [] : [runOptions.stdin]) as InputStream,
        env: { ...env, ...runOptions.env },
        now: () => sim.clock.now(),
        pollIntervalMs: 5,
        async run(command, args) {
          ran.push({ command, args });
          return 0;
        },
      };
      const code = await runCli(argv, io);
      return { code, stdout: stdout.text(), stderr: stderr.text(), ran };
    },
    async close() {
      await sim.close();
      await rm(configDir, { recursive: true, force: true });
    },
  };
}

/** Signs in with the simulator's user (password from stdin). */
export async function login(cli: Cli): Promise<Result> {
  return cli.run(["login", "--email", cli.sim.user.email, "--password-stdin"], { stdin: `${cli.sim.user.password}\n` });
}

/** Terminal escapes made visible (ESC as `⎋`), so that assertions can match them with plain patterns. */
export function visible(text: string): string {
  return text.replaceAll("\u001b", "⎋");
}
