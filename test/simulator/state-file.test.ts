// `--state-file`: atomic writes, reload at start, in-flight operations resumed; and the CLI command.
import { spawn } from "node:child_process";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseSimulatorArgs } from "../../src/cli/commands/simulator.ts";
import { Disk, Operation, TokenResponse, Vm } from "../../src/cloud/wire.ts";
import { createManualClock, startSimulator } from "../../src/simulator/index.ts";
import { apiFor, ok, opOf, startTestSimulator, vmBody } from "./helpers.ts";

let dir = "";
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "sim-state-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("state file", () => {
  it("reloads resources written before a restart", async () => {
    const stateFile = path.join(dir, "reload.json");
    const first = await startTestSimulator({ stateFile, stateFileDebounceMs: 10 });
    const vmOp = await first.settle(
      "vm",
      opOf(await first.call("POST", first.project("/vms"), vmBody("keeper"))).operation_id,
    );
    const diskBody = { name: "keeper-disk", size: "20GiB", location: "us-east1-a" };
    const diskOp = await first.settle(
      "disk",
      opOf(await first.call("POST", first.project("/disks"), diskBody)).operation_id,
    );
    const before = ok(await first.call("GET", first.project(`/vms/${vmOp.metadata.id}`)), Vm);
    await first.sim.close();
    expect((await readdir(dir)).filter((f) => f.endsWith(".tmp"))).toEqual([]);

    const second = await startTestSimulator({ stateFile });
    try {
      const after = ok(await second.call("GET", second.project(`/vms/${vmOp.metadata.id}`)), Vm);
      expect(after).toEqual(before);
      expect(ok(await second.call("GET", second.project(`/disks/${diskOp.metadata.id}`)), Disk).name).toBe(
        "keeper-disk",
      );
      const op = ok(await second.call("GET", second.project(`/vms/operations/${vmOp.operation_id}`)), Operation);
      expect(op.state).toBe("SUCCEEDED");
    } finally {
      await second.sim.close();
    }
  });

  it("adds the credentials asked for at start to a reloaded state", async () => {
    const stateFile = path.join(dir, "credentials.json");
    const first = await startTestSimulator({ stateFile });
    await first.sim.close();
    const second = await startTestSimulator({ stateFile, apiKey: "a-newer-api-key-0002" });
    try {
      expect(second.sim.apiKey).toBe("a-newer-api-key-0002");
      expect((await second.call("GET", second.project("/vms"))).status).toBe(200);
    } finally {
      await second.sim.close();
    }
  });

  it("resumes operations that were in flight", async () => {
    const stateFile = path.join(dir, "resume.json");
    const clock = createManualClock();
    const first = apiFor(await startSimulator({ port: 0, rateLimit: false, latencyMs: 1000, clock, stateFile }));
    const op = opOf(await first.call("POST", first.project("/vms"), vmBody("half-way")));
    await first.sim.close();
    const second = apiFor(await startSimulator({ port: 0, rateLimit: false, latencyMs: 1000, clock, stateFile }));
    try {
      expect(ok(await second.call("GET", second.project(`/vms/${op.metadata.id}`)), Vm).state).toBe(
        "STATE_PROVISIONING",
      );
      clock.advance(1000);
      expect(ok(await second.call("GET", second.project(`/vms/${op.metadata.id}`)), Vm).state).toBe("STATE_RUNNING");
    } finally {
      await second.sim.close();
    }
  });

  it("keeps sign-ins across a restart: the access token still works, the refresh token still renews", async () => {
    const stateFile = path.join(dir, "sessions.json");
    const first = await startTestSimulator({ stateFile, stateFileDebounceMs: 10 });
    const { email, password } = first.sim.user;
    const signIn = { grant_type: "password", email, password };
    const tokens = ok(await first.call("POST", "/auth/token", signIn, null), TokenResponse);
    await first.sim.close();
    const second = await startTestSimulator({ stateFile });
    try {
      expect((await second.call("GET", "/organizations", undefined, tokens.access_token)).status).toBe(200);
      const renewal = { grant_type: "refresh_token", refresh_token: tokens.refresh_token };
      const renewed = ok(await second.call("POST", "/auth/token", renewal, null), TokenResponse);
      expect((await second.call("GET", "/organizations", undefined, renewed.access_token)).status).toBe(200);
      // Single use, still: the spent refresh token is refused.
      expect((await second.call("POST", "/auth/token", renewal, null)).status).toBe(401);
    } finally {
      await second.sim.close();
    }
  });

  it("keeps one cloud per profile: a state written by one profile is refused by the other, naming both", async () => {
    const stateFile = path.join(dir, "profile.json");
    const first = await startTestSimulator({ stateFile, profile: "contract" });
    await first.settle("vm", opOf(await first.call("POST", first.project("/vms"), vmBody("contract-vm"))).operation_id);
    await first.sim.close();
    await expect(startSimulator({ port: 0, stateFile, profile: "seed-only" })).rejects.toThrow(
      /profile\.json holds the cloud of a simulator of profile contract, not seed-only/,
    );
    const again = await startTestSimulator({ stateFile, profile: "contract" });
    await again.sim.close();
  });

  it("refuses a file that is not a simulator state, naming it", async () => {
    const stateFile = path.join(dir, "broken.json");
    await writeFile(stateFile, '{"hello": "world"}');
    await expect(startSimulator({ port: 0, stateFile })).rejects.toThrow(/broken\.json/);
  });
});

describe("simulator command", () => {
  it("parses flags over a config file", async () => {
    const config = path.join(dir, "config.json");
    await writeFile(
      config,
      JSON.stringify({ latencyMs: 5, apiKey: "from-config-key", faults: { not_found_after_create_ms: 10 } }),
    );
    const options = await parseSimulatorArgs([
      "--config",
      config,
      "--port",
      "0",
      "--user",
      "ops@example.com:pa:ss",
      "--rate-limit",
      "5/10",
      "--latency-ms",
      "7",
    ]);
    expect(options).toMatchObject({
      port: 0,
      apiKey: "from-config-key",
      latencyMs: 7,
      user: { email: "ops@example.com", password: "pa:ss" },
      rateLimit: { ratePerSec: 5, burst: 10 },
      faults: { not_found_after_create_ms: 10 },
    });
    expect(await parseSimulatorArgs(["--rate-limit", "off"])).toEqual({ rateLimit: false });
    expect(await parseSimulatorArgs(["--help"])).toBe("help");
    await expect(parseSimulatorArgs(["--port", "http"])).rejects.toThrow(/--port/);
    await expect(parseSimulatorArgs(["--user", "nobody"])).rejects.toThrow(/email:password/);
    await expect(parseSimulatorArgs(["--rate-limit", "fast"])).rejects.toThrow(/--rate-limit/);
    await writeFile(config, JSON.stringify({ latency: 5 }));
    await expect(parseSimulatorArgs(["--config", config])).rejects.toThrow(/config/);
  });

  it("reads the node-join emulation's workload clusters from kubeconfig files beside the config file", async () => {
    const config = path.join(dir, "node-join.json");
    await writeFile(path.join(dir, "workload.kubeconfig"), "apiVersion: v1\nkind: Config\n");
    const nodeJoin = {
      clusters: [{ name: "playground", kubeconfigFile: "workload.kubeconfig" }],
      retryIntervalMs: 100,
    };
    await writeFile(config, JSON.stringify({ nodeJoin }));
    expect(await parseSimulatorArgs(["--config", config])).toHaveProperty("nodeJoin", {
      clusters: [{ name: "playground", kubeconfig: "apiVersion: v1\nkind: Config\n" }],
      retryIntervalMs: 100,
    });
    await writeFile(config, JSON.stringify({ nodeJoin: { clusters: [{ name: "x", kubeconfigFile: "missing" }] } }));
    await expect(parseSimulatorArgs(["--config", config])).rejects.toThrow(/nodeJoin cluster x: cannot read/);
  });

  it("prints its URL and credentials, serves, and exits 0 on SIGTERM", async () => {
    const child = spawn(process.execPath, ["src/cli/main.ts", "simulator", "--port", "0", "--latency-ms", "0"], {
      cwd: path.resolve(import.meta.dirname, "../.."),
      stdio: ["ignore", "pipe", "pipe"],
    });
    try {
      let output = "";
      const url = await new Promise<string>((resolve, reject) => {
        child.stdout.on("data", (chunk: Buffer) => {
          output += chunk.toString();
          const match = /base URL:\s+(\S+)/.exec(output);
          if (match?.[1] !== undefined && output.includes("user:")) resolve(match[1]);
        });
        child.on("exit", () => reject(new Error(`exited early: ${output}`)));
      });
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v0\.1$/);
      expect(output).toMatch(/API key:\s+sim-api-key-/);
      expect(output).toMatch(/project id:\s+[0-9a-f-]{36}/);
      const key = /API key:\s+(\S+)/.exec(output)?.[1] ?? "";
      const response = await fetch(`${url}/projects`, { headers: { authorization: `Bearer ${key}` } });
      expect(response.status).toBe(200);
      const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});
