import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { eventually, startTestCluster, type TestCluster } from "./helpers.ts";

const CHILD = fileURLToPath(new URL("./fixtures/signal-child.ts", import.meta.url));
const LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/default/leases/gpuvm-operator.gpucloud.dev";
const LeaseAnswer = z.object({
  spec: z.object({ holderIdentity: z.string().optional(), leaseDurationSeconds: z.number() }),
});

describe("graceful shutdown of a real process", () => {
  let cluster: TestCluster;
  let child: ChildProcess | undefined;

  beforeEach(async () => {
    cluster = await startTestCluster();
  });
  afterEach(async () => {
    if (child && child.exitCode === null) child.kill("SIGKILL");
    child = undefined;
    await cluster.double.close();
  });

  it("SIGTERM lets the running reconcile finish, releases the Lease and exits 0", async () => {
    await cluster.createWidget("default", "slow");
    const lines: Array<{ event: string }> = [];
    let stderr = "";
    const running = spawn(process.execPath, [CHILD, cluster.double.url, "800"], { stdio: ["ignore", "pipe", "pipe"] });
    child = running;
    running.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      for (const line of chunk.split("\n").filter(Boolean)) lines.push(JSON.parse(line));
    });
    running.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    const exited = new Promise<number | null>((resolve) => running.on("exit", (code) => resolve(code)));

    await eventually(() => expect(lines.map((line) => line.event)).toContain("reconcile-start"), 15_000);
    running.kill("SIGTERM");
    const code = await exited;
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const events = lines.map((line) => line.event);
    // The reconcile in flight at SIGTERM finished before the exit.
    expect(events.indexOf("reconcile-end")).toBeGreaterThan(events.indexOf("reconcile-start"));
    expect(events.at(-1)).toBe("exit");
    const lease = LeaseAnswer.parse(await (await fetch(`${cluster.double.url}${LEASE_PATH}`)).json());
    expect(lease.spec.holderIdentity ?? "").toBe("");
    expect(lease.spec.leaseDurationSeconds).toBe(1);
  });
});
