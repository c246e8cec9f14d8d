import { spawnSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  applyRuntimeV8Flags,
  LOCAL_COMPILE_CACHE_DIR,
  OPERATOR_ENVIRONMENT,
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

  // The operator runs on Linux (its image), and so do its tests: off Linux this fails, saying why (no /proc).
  it("with OPERATOR_NODE_FLAGS V8 runs two helper threads, not four", () => {
    expect(process.platform, "the thread count is read from /proc: CI runs on Linux").toBe("linux");
    const script = `const { readdirSync, readFileSync } = await import("node:fs");
      const names = readdirSync("/proc/self/task").map((t) => readFileSync(\`/proc/self/task/\${t}/comm\`, "utf8").trim());
      process.stdout.write(String(names.filter((name) => name.startsWith("V8Worker")).length));`;
    const helpers = (flags: readonly string[]): string =>
      spawnSync(process.execPath, [...flags, "--input-type=module", "-e", script], { encoding: "utf8" }).stdout;
    expect(helpers([])).toBe("4");
    expect(helpers(OPERATOR_NODE_FLAGS)).toBe("2");
  });

  it("with OPERATOR_ENVIRONMENT, large buffers freed go back to the system (26-34 MiB less RSS at 1,000 objects)", () => {
    // 900 buffers of 200 KiB freed, with small long-lived ones allocated between them: glibc's default keeps about
    // 60 MiB of them in its heaps, with the fixed mmap threshold they are unmapped (a few MiB stay).
    const script = `
      const keep = []; let big = [];
      const rss = () => process.memoryUsage().rss / 1048576;
      const before = rss();
      for (let round = 0; round < 3; round++) {
        for (let i = 0; i < 300; i++) {
          Buffer.allocUnsafeSlow(1).fill(0);
          const b = Buffer.allocUnsafeSlow(200 * 1024); b.fill(1); big.push(b);
          const s = Buffer.allocUnsafeSlow(512); s.fill(2); keep.push(s);
        }
        big = []; globalThis.gc();
      }
      await new Promise((resolve) => setTimeout(resolve, 50)); globalThis.gc();
      process.stdout.write(String(rss() - before));`;
    const growthMiB = (env: NodeJS.ProcessEnv): number => {
      const result = spawnSync(process.execPath, ["--expose-gc", "--input-type=module", "-e", script], {
        env,
        encoding: "utf8",
      });
      expect(result.status, result.stderr).toBe(0);
      return Number(result.stdout);
    };
    const { MALLOC_MMAP_THRESHOLD_: _fromOutside, ...withoutSetting } = process.env;
    expect(growthMiB(withoutSetting)).toBeGreaterThan(40);
    expect(growthMiB({ ...withoutSetting, ...OPERATOR_ENVIRONMENT })).toBeLessThan(20);
  });

  it("`npm run operator` starts the operator with OPERATOR_NODE_FLAGS, as the image does", () => {
    const scripts = (
      JSON.parse(readFileSync(path.join(REPO_ROOT, "package.json"), "utf8")) as {
        scripts: Record<string, string>;
      }
    ).scripts;
    expect(scripts.operator).toBe(`node ${OPERATOR_NODE_FLAGS.join(" ")} src/cli/main.ts run`);
  });

  it("the image's NODE_OPTIONS are OPERATOR_NODE_FLAGS, its environment OPERATOR_ENVIRONMENT, and it fills its compile cache when built", () => {
    const dockerfile = readFileSync(path.join(REPO_ROOT, "Dockerfile"), "utf8");
    expect(dockerfile).toContain(`ENV NODE_OPTIONS="${OPERATOR_NODE_FLAGS.join(" ")}"\n`);
    for (const [name, value] of Object.entries(OPERATOR_ENVIRONMENT))
      expect(dockerfile).toContain(`ENV ${name}=${value}\n`);
    const cache = dockerfile.indexOf("ENV NODE_COMPILE_CACHE=/app/");
    expect(cache).toBeGreaterThan(dockerfile.indexOf("COPY src"));
    const warm = dockerfile.indexOf("RUN node /app/src/cli/main.ts run --help");
    expect(warm).toBeGreaterThan(cache);
    // Node keys the cache by uid: it is filled as the user the manifests run the operator as, into a directory
    // that user owns, or the operator finds nothing cached.
    const runAsUser = /runAsUser: (\d+)/.exec(
      readFileSync(path.join(REPO_ROOT, "deploy/deployment.yaml"), "utf8"),
    )?.[1];
    expect(runAsUser).toBeDefined();
    const user = dockerfile.indexOf(`USER ${runAsUser}:${runAsUser}\n`);
    expect(user).toBeGreaterThan(dockerfile.indexOf(`chown ${runAsUser}:${runAsUser} /app/.node-compile-cache`));
    expect(warm).toBeGreaterThan(user);
    expect(dockerfile.slice(warm)).not.toMatch(/^USER /m);
  });
});

describe("the operator's compile cache", () => {
  it("is set for processes the playground and the bench start, unless the environment chose one", () => {
    expect(operatorEnvironment({ PATH: "/bin" })).toEqual({
      PATH: "/bin",
      ...OPERATOR_ENVIRONMENT,
      NODE_COMPILE_CACHE: LOCAL_COMPILE_CACHE_DIR,
    });
    expect(operatorEnvironment({ MALLOC_MMAP_THRESHOLD_: "65536" }).MALLOC_MMAP_THRESHOLD_).toBe("65536");
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

  // Spawning as another user needs root (as in CI's containers and on the project's machines): without it this
  // fails, saying so, rather than being skipped. The other user runs a copy of this Node and a module of its own
  // in a folder anyone may read: the checkout may lie under a folder only its owner can enter (a home directory,
  // `mktemp -d`), which that user could not read.
  it("is kept per user id: a cache filled by root is not read by the image's user, one filled by that user is", () => {
    expect(process.getuid?.(), "the test spawns node as uid 0 and 65532: CI runs as root").toBe(0);
    const work = mkdtempSync(path.join(tmpdir(), "compile-cache-"));
    try {
      const imageUser = 65532;
      chmodSync(work, 0o755);
      const node = path.join(work, "node");
      try {
        linkSync(process.execPath, node);
      } catch {
        copyFileSync(process.execPath, node);
      }
      chmodSync(node, 0o755);
      // A module with types to strip that imports another: what the run command's modules are to Node.
      writeFileSync(path.join(work, "helper.ts"), "export const answer: number = 42;\n");
      writeFileSync(
        path.join(work, "main.ts"),
        'import { answer } from "./helper.ts";\nconst shown: string = String(answer);\nexport { shown };\n',
      );
      const directory = path.join(work, "cache");
      mkdirSync(directory, { mode: 0o777 });
      chmodSync(directory, 0o777);
      const env = { ...process.env, NODE_COMPILE_CACHE: directory };
      const main = path.join(work, "main.ts");
      const script = `await import(${JSON.stringify(main)}); process.stdout.write(String(process.moduleLoadList.some((m) => m.includes("amaro"))));`;
      const loadsParserAs = (uid: number): string => {
        const run = spawnSync(node, ["--input-type=module", "-e", script], { env, uid, gid: uid, encoding: "utf8" });
        expect(run.stderr).toBe("");
        return run.stdout;
      };
      const warmAs = (uid: number): number | null => spawnSync(node, [main], { env, cwd: work, uid, gid: uid }).status;
      expect(warmAs(0)).toBe(0);
      expect(loadsParserAs(0)).toBe("false");
      chmodSync(directory, 0o555); // read-only from here on, as under readOnlyRootFilesystem
      expect(loadsParserAs(imageUser)).toBe("true"); // root's cache is not the image user's
      chmodSync(directory, 0o777);
      expect(warmAs(imageUser)).toBe(0);
      chmodSync(directory, 0o555);
      expect(loadsParserAs(imageUser)).toBe("false");
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});
