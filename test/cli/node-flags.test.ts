import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  applyRuntimeV8Flags,
  LOCAL_COMPILE_CACHE_DIR,
  OPERATOR_NODE_FLAGS,
  OPERATOR_RUNTIME_V8_FLAGS,
  operatorEnvironment,
} from "../../src/cli/node-flags.ts";

const REPO_ROOT = path.resolve(import.meta.dirname, "../..");

/** Peak heap of a node process that keeps ~87 MB alive while allocating ~1 GB, with or without the flags set. */
function peakHeapMiB(applyFlags: boolean): number {
  const script = `
    ${applyFlags ? `const { applyRuntimeV8Flags } = await import(${JSON.stringify(path.join(REPO_ROOT, "src/cli/node-flags.ts"))}); applyRuntimeV8Flags();` : ""}
    const keep = []; let peak = 0;
    for (let i = 0; i < 400; i++) {
      const batch = []; for (let j = 0; j < 20000; j++) batch.push({ j, s: "x" + j });
      keep.push(batch); if (keep.length > 60) keep.shift();
      peak = Math.max(peak, process.memoryUsage().heapTotal);
    }
    process.stdout.write(String(peak / 1048576));`;
  const result = spawnSync(process.execPath, [...OPERATOR_NODE_FLAGS, "--input-type=module", "-e", script], {
    encoding: "utf8",
  });
  expect(result.stderr).toBe("");
  return Number(result.stdout);
}

describe("the operator's V8 flags", () => {
  it("sets the runtime flags unless node's command line has them", () => {
    const set: string[] = [];
    expect(applyRuntimeV8Flags([], (flag) => set.push(flag))).toEqual(OPERATOR_RUNTIME_V8_FLAGS);
    expect(set).toEqual(["--heap-growing-percent=50"]);
    set.length = 0;
    expect(applyRuntimeV8Flags(["--heap_growing_percent=20"], (flag) => set.push(flag))).toEqual([]);
    expect(set).toEqual([]);
  });

  it("a heap-growing factor set once running keeps the heap far below V8's own factor", () => {
    // About 87 MB stay alive. V8's own factor lets the heap reach 380-460 MiB on a machine with much memory; with
    // the factor 1.5 it peaks at 190-290 MiB (how far it overshoots while marking runs concurrently depends on the
    // machine's load: an absolute bound was flaky). Medians of three runs each, compared with each other.
    const median = (values: number[]): number => values.sort((a, b) => a - b)[1] ?? Number.NaN;
    const plain = median([peakHeapMiB(false), peakHeapMiB(false), peakHeapMiB(false)]);
    const bounded = median([peakHeapMiB(true), peakHeapMiB(true), peakHeapMiB(true)]);
    expect(bounded).toBeLessThan(0.75 * plain);
  });

  it("the image's NODE_OPTIONS are OPERATOR_NODE_FLAGS, and it fills its compile cache when built", () => {
    const dockerfile = readFileSync(path.join(REPO_ROOT, "Dockerfile"), "utf8");
    expect(dockerfile).toContain(`ENV NODE_OPTIONS=${OPERATOR_NODE_FLAGS.join(" ")}\n`);
    const cache = dockerfile.indexOf("ENV NODE_COMPILE_CACHE=/app/");
    expect(cache).toBeGreaterThan(dockerfile.indexOf("COPY src"));
    expect(dockerfile.indexOf("RUN node /app/src/cli/main.ts run --help")).toBeGreaterThan(cache);
  });
});

describe("the operator's compile cache", () => {
  it("is set for processes the playground and the bench start, unless the environment chose one", () => {
    expect(operatorEnvironment({ PATH: "/bin" })).toEqual({
      PATH: "/bin",
      NODE_COMPILE_CACHE: LOCAL_COMPILE_CACHE_DIR,
    });
    expect(operatorEnvironment({ NODE_COMPILE_CACHE: "/elsewhere" }).NODE_COMPILE_CACHE).toBe("/elsewhere");
    expect(operatorEnvironment({ NODE_COMPILE_CACHE: "" }).NODE_COMPILE_CACHE).toBe("");
  });

  it("once filled by `run --help` (as the image is built), the run command's modules load without type stripping's parser", () => {
    const directory = mkdtempSync(path.join(tmpdir(), "compile-cache-"));
    try {
      const env = { ...process.env, NODE_COMPILE_CACHE: directory };
      const run = path.join(REPO_ROOT, "src/cli/commands/run.ts");
      const script = `await import(${JSON.stringify(run)}); process.stdout.write(String(process.moduleLoadList.some((m) => m.includes("amaro"))));`;
      const loadsParser = (): string =>
        spawnSync(process.execPath, ["--input-type=module", "-e", script], { env, encoding: "utf8" }).stdout;
      expect(loadsParser()).toBe("true"); // nothing cached yet: this one strips types itself
      rmSync(directory, { recursive: true, force: true });
      const warm = spawnSync(process.execPath, [path.join(REPO_ROOT, "src/cli/main.ts"), "run", "--help"], { env });
      expect(warm.status).toBe(0);
      expect(loadsParser()).toBe("false");
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });
});
