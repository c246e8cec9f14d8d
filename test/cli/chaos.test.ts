// The parts of `npm run chaos` that decide a verdict, in isolation: flags, the seeded random source, the
// ownership check (duplicates, leaks, missing), the log scan (crashes, secrets in any spelling) and flatness.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { checkOwnership, flatness, replicaOf, scanLogs, writesWithoutLease } from "../../src/cli/chaos/checks.ts";
import { PROFILES } from "../../src/cli/chaos/profiles.ts";
import { seededRandom } from "../../src/cli/chaos/random.ts";
import { Replicas } from "../../src/cli/chaos/replicas.ts";
import { healthyObjects, type LiveObject } from "../../src/cli/chaos/workload.ts";
import { parseChaosArgs } from "../../src/cli/commands/chaos.ts";
import { OPERATOR_ENVIRONMENT, OPERATOR_NODE_FLAGS } from "../../src/cli/node-flags.ts";

let dir: string | undefined;
afterEach(async () => {
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

describe("chaos flags and profiles", () => {
  it("defaults to the full profile of 500 objects and 10 kills; ci is about 60 objects and 2 kills", () => {
    const flags = parseChaosArgs([]);
    if (flags === "help") throw new Error("unexpected help");
    expect(flags.profile.name).toBe("full");
    expect(healthyObjects(PROFILES.full)).toHaveLength(500);
    expect(PROFILES.full.kills).toBe(10);
    expect(PROFILES.full.freezes).toBe(4);
    expect(PROFILES.ci.freezes).toBe(1);
    expect(healthyObjects(PROFILES.ci)).toHaveLength(60);
    expect(PROFILES.ci.kills).toBe(2);
    expect(parseChaosArgs(["--profile", "ci", "--seed", "7", "--out", "x.json"])).toMatchObject({
      seed: 7,
      out: "x.json",
      profile: { name: "ci" },
    });
    expect(() => parseChaosArgs(["--profile", "huge"])).toThrow(/--profile/);
    expect(() => parseChaosArgs(["--seed", "-1"])).toThrow(/--seed/);
    expect(parseChaosArgs(["--help"])).toBe("help");
  });

  it("the same seed draws the same numbers", () => {
    const a = seededRandom(42);
    const b = seededRandom(42);
    const draws = (r: ReturnType<typeof seededRandom>) => Array.from({ length: 5 }, () => r.int(0, 1000));
    expect(draws(a)).toEqual(draws(b));
    expect(draws(seededRandom(43))).not.toEqual(draws(seededRandom(42)));
  });
});

const object = (kind: LiveObject["kind"], name: string, id?: string): LiveObject => ({
  kind,
  metadata: { name, namespace: "chaosa" },
  spec: {},
  ...(id === undefined ? {} : { status: { id } }),
});

describe("checkOwnership", () => {
  it("finds a second resource of one name, a resource no object holds, and an object without its resource", () => {
    const report = checkOwnership(
      [object("GpuVm", "vm-0", "a"), object("GpuDisk", "disk-0", "gone")],
      [
        { kind: "GpuVm", id: "a", name: "chaosa-vm-0" },
        { kind: "GpuVm", id: "b", name: "chaosa-vm-0" },
        { kind: "GpuNetwork", id: "default", name: "default" },
      ],
      new Set(["default"]),
    );
    expect(report).toEqual({
      duplicates: ["GpuVm/chaosa-vm-0"],
      leaks: ["GpuVm/chaosa-vm-0 (b)"],
      missing: ["GpuDisk chaosa/disk-0"],
    });
  });
});

describe("writesWithoutLease", () => {
  const lease = (at: number, replica: string, accepted = true) => ({
    at,
    replica,
    what: "PUT lease",
    lease: { accepted },
  });
  const write = (at: number, replica: string) => ({ at, replica, what: `PATCH status at ${at}` });

  it("finds writes of a replica whose Lease another took since, or that ran out; the election's own are not counted", () => {
    expect(replicaOf("gpuvm-operator (replica-a_1a2b3c4d)")).toBe("replica-a");
    expect(replicaOf("kubectl/v1.37.2")).toBeUndefined();
    const found = writesWithoutLease(
      [
        write(500, "replica-a"), // before any Lease write
        lease(1000, "replica-a"),
        write(1500, "replica-a"),
        lease(2000, "replica-b", false), // refused: replica-a still holds it
        write(2500, "replica-a"),
        write(8000, "replica-a"), // 7 s after its last renewal: run out
        lease(9000, "replica-b"),
        write(9500, "replica-a"), // frozen and resumed: replica-b holds it now
        write(9600, "replica-b"),
      ],
      6000,
    );
    expect(found.map((line) => line.split(":")[1]?.trim())).toEqual([
      "PATCH status at 500 at 1970-01-01T00",
      "PATCH status at 8000 at 1970-01-01T00",
      "PATCH status at 9500 at 1970-01-01T00",
    ]);
  });
});

describe("scanLogs", () => {
  it("finds crashes and secrets, plain, base64 and as tokens, and reports where without the value", async () => {
    dir = await mkdtemp(path.join(tmpdir(), "chaos-logs-"));
    const file = path.join(dir, "replica-a-1.log");
    const key = "sim-key-0123456789abcdef";
    await writeFile(
      file,
      [
        '{"level":30,"msg":"fine","req":{"headers":{"authorization":"Bearer [Redacted]"}}}',
        `{"level":30,"msg":"oops ${key}"}`,
        `{"level":30,"msg":"${Buffer.from(key).toString("base64")}"}`,
        '{"level":30,"msg":"token sim-at-abcdefghijkl"}',
        '{"level":50,"msg":"Bearer abcdefghijklmnop"}',
        "process: unhandledRejection at somewhere",
      ].join("\n"),
    );
    const report = await scanLogs([file], new Map([["the API key", key]]));
    expect(report.lines).toBe(6);
    expect(report.errorLines).toBe(1);
    expect(report.crashes).toHaveLength(1);
    expect(report.secretLeaks).toEqual([
      "replica-a-1.log:2: the API key",
      "replica-a-1.log:3: the API key (base64)",
      "replica-a-1.log:4: an access or refresh token",
      "replica-a-1.log:5: an Authorization header",
    ]);
    expect(report.secretLeaks.join(" ")).not.toContain(key);
  });
});

describe("flatness", () => {
  const series = (replica: string, rss: number[], fds: number[]) =>
    rss.map((rssBytes, i) => ({ replica, rssBytes: rssBytes * 1024 * 1024, fds: fds[i] ?? 0 }));

  it("flat within 25 % (or 40 MiB) of RSS and 10 descriptors; growth beyond is not flat", () => {
    const [flat, growing, leakingFds] = flatness([
      ...series("a", [200, 205, 198, 210, 204, 206], [30, 31, 30, 32, 31, 30]),
      ...series("b", [200, 260, 320, 380, 440, 500], [30, 30, 30, 30, 30, 30]),
      ...series("c", [200, 200, 200, 200, 200, 200], [30, 40, 50, 60, 70, 80]),
    ]);
    expect(flat?.flat).toBe(true);
    expect(growing?.flat).toBe(false);
    expect(leakingFds?.flat).toBe(false);
  });
});

describe("Replicas", () => {
  it("start the operator as the image does: its V8 flags, its environment, POD_NAME, its own log", async () => {
    dir = await mkdtemp(path.join(tmpdir(), "chaos-replicas-"));
    // Stands in for main.ts: says what it was started with, then waits to be stopped.
    const script = path.join(dir, "main.mjs");
    await writeFile(
      script,
      `console.log(JSON.stringify({ argv: process.argv.slice(2), execArgv: process.execArgv, env: process.env }));
setInterval(() => undefined, 1000);
`,
    );
    const replicas = new Replicas({ mainScript: script, args: ["--leader-elect"], logDir: dir });
    replicas.start("replica-a");
    const logFile = replicas.logFiles[0] ?? "";
    let started: { argv: string[]; execArgv: string[]; env: Record<string, string> } | undefined;
    for (let attempt = 0; attempt < 100 && started === undefined; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const line = (await readFile(logFile, "utf8").catch(() => "")).split("\n")[0] ?? "";
      if (line !== "") started = JSON.parse(line);
    }
    await replicas.stopAll(5000);
    expect(started?.argv).toEqual(["run", "--leader-elect"]);
    expect(started?.execArgv).toEqual(expect.arrayContaining([...OPERATOR_NODE_FLAGS]));
    for (const [name, value] of Object.entries(OPERATOR_ENVIRONMENT)) expect(started?.env[name]).toBe(value);
    expect(started?.env.NODE_COMPILE_CACHE).toBeDefined();
    expect(started?.env.POD_NAME).toBe("replica-a");
    expect(replicas.unexpectedExits()).toEqual([]);
  });
});
