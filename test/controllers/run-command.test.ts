// `gpuvm-operator run` as a real child process on Node 24: flags, the operator default credentials Secret (the
// one cross-namespace exception), a GpuNetwork reaching Ready, and a graceful exit 0 on SIGTERM.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { condition, type Env, startEnv } from "./harness.ts";

const MAIN = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));
let env: Env;
let dir: string;
let child: ChildProcess | undefined;

beforeAll(async () => {
  env = await startEnv({ withoutCredentials: true, start: false });
  dir = await mkdtemp(join(tmpdir(), "gpuvm-run-"));
  await env.core.createNamespace({ body: { metadata: { name: "ops" } } });
  await env.core.createNamespacedSecret({
    namespace: "ops",
    body: { metadata: { name: "cloud" }, stringData: { apiKey: env.sim.apiKey, projectId: env.sim.projectId } },
  });
});
afterAll(async () => {
  if (child?.exitCode === null) child.kill("SIGKILL");
  await env?.close();
  await rm(dir, { recursive: true, force: true });
});

function run(args: string[]): { child: ChildProcess; exit: Promise<number | null>; output: () => string } {
  let output = "";
  const proc = spawn(process.execPath, [MAIN, "run", ...args], { stdio: ["ignore", "pipe", "pipe"] });
  proc.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  proc.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exit = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)));
  return { child: proc, exit, output: () => output };
}

describe("gpuvm-operator run", () => {
  it("prints every flag for --help and rejects an unknown flag with exit code 2", async () => {
    const help = run(["--help"]);
    expect(await help.exit).toBe(0);
    expect(help.output()).toMatch(/--credentials-secret[\s\S]*--operation-poll-interval/);
    const bad = run(["--no-such-flag"]);
    expect(await bad.exit).toBe(2);
  });

  it("reconciles with the operator's default credentials and exits 0 after SIGTERM", async () => {
    const kubeconfig = join(dir, "kubeconfig");
    await env.double.writeKubeconfig(kubeconfig);
    const operator = run([
      "--kubeconfig",
      kubeconfig,
      "--api-url",
      env.sim.url,
      "--credentials-secret",
      "ops/cloud",
      "--metrics-bind-address",
      "0",
      "--health-probe-bind-address",
      "0",
      "--operation-poll-interval",
      "100ms",
      "--log-level",
      "warn",
    ]);
    child = operator.child;
    await env.apply("GpuNetwork", "from-cli", {});
    const ready = await env.waitReady("GpuNetwork", "from-cli", 15_000);
    expect(condition(ready, "Ready")?.reason).toBe("Available");
    // Every watch cut at once, no server listening (both disabled), nothing in flight: the process stays up
    // (npm run chaos found it exiting 0 without a word here) and keeps reconciling.
    env.double.faults.dropWatches();
    const stillRunning = await Promise.race([
      operator.exit.then(() => false),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 3000)),
    ]);
    expect(stillRunning, operator.output()).toBe(true);
    await env.apply("GpuNetwork", "after-the-drop", {});
    await env.waitReady("GpuNetwork", "after-the-drop", 15_000);
    operator.child.kill("SIGTERM");
    expect(await operator.exit).toBe(0);
  });
});
