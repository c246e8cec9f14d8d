// What the project prints or documents for a person to type runs as printed, in a shell whose `node` is the
// machine's own (which may be older than the Node 24 the npm scripts run on, and cannot run TypeScript before
// 22.18): the playground's operator command and gpuvmctl lines, `npx gpuvmctl` without npm's warnings, and no
// documented `node <file>.ts` that the machine's Node would refuse.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, type Playground, REPO_ROOT, startPlayground } from "./harness.ts";

const execFileAsync = promisify(execFile);

/** PATH without the project's node_modules/.bin (npm puts it first for `npm test`): the shell a person has. */
function machinePath(): string {
  return (process.env.PATH ?? "")
    .split(path.delimiter)
    .filter((entry) => entry !== "" && !entry.split(path.sep).includes("node_modules"))
    .join(path.delimiter);
}

let npmCache = "";
let configDir = "";

/** The environment of a person's shell: the machine's PATH, a fresh npm cache (a first `npx` in a new clone). */
function shellEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: machinePath(), npm_config_cache: npmCache, ...extra };
  for (const name of ["GPUCLOUD_API_KEY", "GPUCLOUD_API_URL", "KUBECONFIG", "NODE_OPTIONS"]) {
    if (!(name in extra)) delete env[name];
  }
  // npm exports these to the scripts it runs (npm test): a shell has none of them.
  for (const name of Object.keys(env)) if (name.startsWith("npm_") && name !== "npm_config_cache") delete env[name];
  env.GPUVMCTL_CONFIG_DIR = configDir;
  env.npm_config_update_notifier = "false";
  return env;
}

async function shell(
  command: string,
  extra: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync("bash", ["-c", command], {
      cwd: REPO_ROOT,
      env: shellEnv(extra),
      timeout: 120_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? 1, stdout: failed.stdout ?? "", stderr: failed.stderr ?? "" };
  }
}

beforeAll(async () => {
  npmCache = await mkdtemp(path.join(tmpdir(), "as-printed-npm-"));
  configDir = await mkdtemp(path.join(tmpdir(), "as-printed-gpuvmctl-"));
});
afterAll(async () => {
  await rm(npmCache, { recursive: true, force: true });
  await rm(configDir, { recursive: true, force: true });
});

describe("npx gpuvmctl on the machine's own Node", () => {
  it("runs without npm's warnings, also the first time in a clone", async () => {
    const version = await shell("node --version");
    expect(version.code).toBe(0);
    const help = await shell("npx gpuvmctl --help");
    expect(help.stderr).not.toMatch(/npm warn|EBADENGINE/i);
    expect(help).toMatchObject({ code: 0, stdout: expect.stringContaining("Usage: gpuvmctl <command>") });
  });
});

describe("documented commands", () => {
  it("never run a .ts file with the machine's `node` (npm scripts or `npx node` do)", async () => {
    const files = ["README.md", ...(await readdir(path.join(REPO_ROOT, "docs"))).map((f) => path.join("docs", f))];
    const offenders: string[] = [];
    for (const file of files.filter((f) => f.endsWith(".md"))) {
      const text = await readFile(path.join(REPO_ROOT, file), "utf8");
      // A command in a code span or block: `node [flags] <relative path>.ts`, not after `npx ` (the installed Node);
      // `/app/…` is the image's own Node 24.
      for (const match of text.matchAll(/(^|[`\n]|\s)(npx )?node (--?\S+ )*([\w./-]+\.ts)\b/g)) {
        if (match[2] === undefined && !match[4]?.startsWith("/app/")) offenders.push(`${file}: ${match[0].trim()}`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it("`npm run kube-double` (the README's command) runs on the machine's Node", async () => {
    const help = await shell("npm run --silent kube-double -- --help");
    expect(help).toMatchObject({ code: 0, stdout: expect.stringContaining("Usage: gpuvm-operator kube-double") });
  });
});

describe("the playground's banner, as printed", () => {
  let playground: Playground;
  let output = "";
  beforeAll(async () => {
    playground = await startPlayground({ latencyMs: 200, withoutOperator: true });
    output = playground.process.output;
  }, 150_000);
  afterAll(async () => {
    await playground?.close();
  });

  const printedLine = (start: string): string => {
    const line = output.split("\n").find((l) => l.trimStart().startsWith(start));
    if (line === undefined) throw new Error(`no line starting with "${start}" in:\n${output}`);
    return line.trim();
  };

  it("the operator command it prints runs the operator against the playground", async () => {
    const command = printedLine("npm run operator --");
    const operator: ChildProcess = spawn("bash", ["-c", command], {
      cwd: REPO_ROOT,
      env: shellEnv(),
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let log = "";
    operator.stdout?.on("data", (chunk: Buffer) => {
      log += chunk.toString("utf8");
    });
    operator.stderr?.on("data", (chunk: Buffer) => {
      log += chunk.toString("utf8");
    });
    const exited = new Promise<void>((resolve) => operator.once("exit", () => resolve()));
    try {
      const synced = await eventually(
        `the printed operator command to sync its caches (${command})`,
        async () => (log.includes("caches synced") ? "synced" : operator.exitCode !== null ? "exited" : undefined),
        60_000,
      );
      expect(synced, log).toBe("synced");
    } finally {
      if (operator.pid !== undefined && operator.exitCode === null) process.kill(-operator.pid, "SIGTERM");
      await exited;
    }
  }, 90_000);

  it("says how to sign in with gpuvmctl, and the lines it prints work", async () => {
    const [login, password] = printedLine("npx gpuvmctl login").split(/\s+# password: /);
    expect(password).toBe("simulator-password");
    const signedIn = await shell(`printf '%s\\n' '${password}' | ${login} --password-stdin`);
    expect(signedIn.stderr).not.toMatch(/npm warn/i);
    expect(signedIn).toMatchObject({ code: 0, stdout: expect.stringContaining("Signed in to") });
    expect((await shell(printedLine("npx gpuvmctl vms list").split(" #")[0] ?? "")).code).toBe(0);

    const exportLine = printedLine("export GPUCLOUD_API_URL=");
    const withKey = await shell(`${exportLine}; npx gpuvmctl whoami`);
    expect(withKey).toMatchObject({ code: 0, stdout: expect.stringContaining("API key (GPUCLOUD_API_KEY)") });
    expect(withKey.stdout).toContain(playground.cloud.projectId);
  });
});
