// The import direction of docs/architecture.md, enforced: cli → controllers → {admission, runtime, api, cloud};
// the simulator and the test double stand apart (the simulator's node-join emulation uses three files of
// control-plane); runtime knows nothing of GPUs; cloud knows nothing of Kubernetes.
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { functionSpans, importCycles, lineCount } from "./source-measures.ts";

const SRC = path.resolve(import.meta.dirname, "../src");

/** For each folder of src/: the files of other folders it may import (`folder/` = the whole folder). */
const ALLOWED: Record<string, { internal: string[]; packages: string[] }> = {
  util: { internal: [], packages: [] },
  cloud: { internal: ["util/"], packages: ["ky", "zod", "pino", "undici"] },
  simulator: {
    // The node-join emulation checks a join and registers its Node as control-plane's own code does (ADR 0022).
    internal: [
      "util/",
      "cloud/wire.ts",
      "cloud/sizes.ts",
      "control-plane/kubeadm-join.ts",
      "control-plane/node-registration.ts",
      "control-plane/http.ts",
    ],
    packages: ["fastify", "zod", "pino"],
  },
  api: { internal: ["util/", "cloud/wire.ts", "cloud/sizes.ts"], packages: ["zod", "yaml", "ajv", "ajv-formats"] },
  "kube-double": { internal: ["util/"], packages: ["pino", "yaml", "ajv", "ajv-formats"] },
  "control-plane": { internal: ["util/"], packages: ["yaml", "zod"] },
  runtime: {
    internal: ["util/", "api/common.ts"],
    packages: ["@kubernetes/client-node", "pino", "prom-client", "zod", "undici"],
  },
  // Budgets and the capacity queue: pure decisions, the budget ledger's records on the runtime's KubeClient.
  admission: {
    internal: ["util/", "api/", "cloud/wire.ts", "cloud/sizes.ts", "runtime/"],
    packages: ["zod", "yaml", "pino", "prom-client"],
  },
  controllers: {
    internal: ["util/", "api/", "cloud/", "runtime/", "admission/"],
    packages: ["@kubernetes/client-node", "pino", "prom-client", "zod"],
  },
  cli: { internal: ["*"], packages: ["*"] },
};

async function sourceFiles(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { withFileTypes: true, recursive: true });
  return entries
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
    .map((entry) => path.join(entry.parentPath, entry.name));
}

function importsOf(source: string): string[] {
  const specifiers = [...source.matchAll(/^\s*(?:import|export)\s[^;]*?\sfrom\s+"([^"]+)"/gms)].map((m) => m[1] ?? "");
  const dynamic = [...source.matchAll(/import\(\s*"([^"]+)"\s*\)/g)].map((m) => m[1] ?? "");
  return [...specifiers, ...dynamic];
}

function violations(file: string, source: string): string[] {
  const folder = path.relative(SRC, file).split(path.sep)[0] ?? "";
  const rules = ALLOWED[folder];
  if (rules === undefined) return [`${path.relative(SRC, file)}: folder src/${folder} has no import rules`];
  const found: string[] = [];
  for (const specifier of importsOf(source)) {
    if (specifier.startsWith("node:")) continue;
    if (specifier.startsWith(".")) {
      const target = path
        .relative(SRC, path.resolve(path.dirname(file), specifier))
        .split(path.sep)
        .join("/");
      if (target.startsWith(`${folder}/`) || rules.internal.includes("*")) continue;
      const allowed = rules.internal.some((rule) => (rule.endsWith("/") ? target.startsWith(rule) : target === rule));
      if (!allowed) found.push(`${path.relative(SRC, file)} imports src/${target}`);
    } else if (!rules.packages.includes("*")) {
      const name = specifier.startsWith("@") ? specifier.split("/").slice(0, 2).join("/") : specifier.split("/")[0];
      if (!rules.packages.includes(name ?? "")) found.push(`${path.relative(SRC, file)} imports package ${specifier}`);
    }
  }
  return found;
}

describe("import direction", () => {
  it("every folder of src/ imports only what docs/architecture.md allows", async () => {
    const files = await sourceFiles(SRC);
    expect(files.length).toBeGreaterThan(50);
    const found: string[] = [];
    for (const file of files) found.push(...violations(file, await readFile(file, "utf8")));
    expect(found).toEqual([]);
  });

  it("catches a forbidden import", () => {
    const file = path.join(SRC, "cloud/example.ts");
    expect(violations(file, 'import { x } from "../runtime/index.ts";\n')).toEqual([
      "cloud/example.ts imports src/runtime/index.ts",
    ]);
    expect(violations(file, 'import * as k8s from "@kubernetes/client-node";\n')).toEqual([
      "cloud/example.ts imports package @kubernetes/client-node",
    ]);
    expect(violations(file, 'import { z } from "zod";\nimport { isRecord } from "../util/is-record.ts";\n')).toEqual(
      [],
    );
    const simulator = path.join(SRC, "simulator/example.ts");
    expect(violations(simulator, 'import { registerNode } from "../control-plane/node-registration.ts";\n')).toEqual(
      [],
    );
    expect(violations(simulator, 'import { startControlPlane } from "../control-plane/control-plane.ts";\n')).toEqual([
      "simulator/example.ts imports src/control-plane/control-plane.ts",
    ]);
  });
});

// ---------------------------------------------------------------------------------------------------------
// Repository-wide rules (issue #30): no import cycle, no file over 500 lines, no function over 120 lines, and no V8
// flag changed while the operator runs. How each is counted: test/source-measures.ts.
// ---------------------------------------------------------------------------------------------------------

const MAX_FILE_LINES = 500;
const MAX_FUNCTION_LINES = 120;

/**
 * What the other parts of issue #30 have not landed yet (part A: src/controllers; part B1: kube-double, simulator,
 * cloud, control-plane). Each entry is removed as its part merges; an entry that no longer applies fails the test,
 * so the list only shrinks.
 */
const NOT_YET_SPLIT: { cycles: string[][]; longFiles: string[]; longFunctions: string[] } = {
  cycles: [],
  longFiles: [],
  /** `file name`, as the failure message names a function. */
  longFunctions: [],
};

/** src/ as a graph: each file → the files of src/ it imports (type-only imports too: a reader follows them). */
async function importGraph(): Promise<Map<string, string[]>> {
  const graph = new Map<string, string[]>();
  for (const file of await sourceFiles(SRC)) {
    const targets = importsOf(await readFile(file, "utf8"))
      .filter((specifier) => specifier.startsWith("."))
      .map((specifier) => srcPath(path.resolve(path.dirname(file), specifier)));
    graph.set(srcPath(file), [...new Set(targets)]);
  }
  return graph;
}

function srcPath(file: string): string {
  return path.relative(SRC, file).split(path.sep).join("/");
}

/** The findings beyond the allow-list, and the allow-list's entries that no longer apply (stale). */
function beyond(found: readonly string[], allowed: readonly string[]): { found: string[]; stale: string[] } {
  return {
    found: found.filter((entry) => !allowed.includes(entry)),
    stale: allowed.filter((entry) => !found.includes(entry)),
  };
}

describe("repository-wide rules", () => {
  it("no import cycle anywhere in src/", async () => {
    const cycles = importCycles(await importGraph()).map((cycle) => cycle.join(" ↔ "));
    const allowed = NOT_YET_SPLIT.cycles.map((cycle) => [...cycle].sort().join(" ↔ "));
    expect(beyond(cycles, allowed)).toEqual({ found: [], stale: [] });
  });

  it(`no file in src/ over ${MAX_FILE_LINES} lines`, async () => {
    const long: string[] = [];
    for (const file of await sourceFiles(SRC)) {
      const lines = lineCount(await readFile(file, "utf8"));
      if (lines > MAX_FILE_LINES) long.push(srcPath(file));
    }
    expect(beyond(long, NOT_YET_SPLIT.longFiles)).toEqual({ found: [], stale: [] });
  });

  it(`no function in src/ over ${MAX_FUNCTION_LINES} lines`, async () => {
    const long = new Map<string, string>();
    for (const file of await sourceFiles(SRC)) {
      for (const span of functionSpans(await readFile(file, "utf8"), file)) {
        const where = `${srcPath(file)} ${span.name}`;
        if (span.lines > MAX_FUNCTION_LINES)
          long.set(where, `${srcPath(file)}:${span.line} ${span.name}, ${span.lines} lines`);
      }
    }
    const { found, stale } = beyond([...long.keys()], NOT_YET_SPLIT.longFunctions);
    expect({ found: found.map((where) => long.get(where)), stale }).toEqual({ found: [], stale: [] });
  });

  it("changes no V8 flag while the operator runs: setFlagsFromString only in cli/node-flags.ts, once at start-up", async () => {
    const setting: string[] = [];
    for (const file of await sourceFiles(SRC)) {
      if ((await readFile(file, "utf8")).includes("setFlagsFromString")) setting.push(srcPath(file));
    }
    expect(setting).toEqual(["cli/node-flags.ts"]);
  });

  it("the measures catch what they are meant to", () => {
    expect(lineCount("a\nb\n")).toBe(2);
    expect(lineCount("a\nb")).toBe(2);
    const source = [
      "export function outer(a: number): { b: number } {", // 1
      "  const inner = (x: string): void => {", // 2
      `    const braces = "}}}" + \`$\{"{"}\` + /[{]/.source;`, // 3
      "  };", // 4
      "  return { b: a };", // 5
      "}", // 6
      "class Widget {", // 7
      "  render(): string {", // 8
      '    return "";', // 9
      "  }", // 10
      "  size = () => 1;", // 11
      "}", // 12
      "declare function typeOnly(): void;", // 13
    ].join("\n");
    expect(functionSpans(source, "example.ts")).toEqual([
      { name: "outer", line: 1, lines: 6 },
      { name: "inner", line: 2, lines: 3 },
      { name: "render", line: 8, lines: 3 },
      { name: "size", line: 11, lines: 1 },
    ]);
    const graph = new Map([
      ["a.ts", ["b.ts"]],
      ["b.ts", ["c.ts"]],
      ["c.ts", ["a.ts"]],
      ["d.ts", ["a.ts", "d.ts"]],
      ["e.ts", []],
    ]);
    expect(importCycles(graph)).toEqual([["a.ts", "b.ts", "c.ts"], ["d.ts"]]);
  });
});

// ---------------------------------------------------------------------------------------------------------
// The controllers' sub-folders (docs/architecture.md, "src/controllers"): core ← accounts ← managed ← kinds, pool
// and cluster-api beside managed on core and accounts, budgets beside kinds on core, accounts and managed; accounts
// never import a kind or the lifecycle. index.ts composes them
// all and is the only file at the top of the folder.
const CONTROLLERS = path.join(SRC, "controllers");

/** For each sub-folder of src/controllers: the sub-folders it may import. */
const CONTROLLER_FOLDERS: Record<string, readonly string[]> = {
  core: [],
  accounts: ["core"],
  managed: ["core", "accounts"],
  kinds: ["core", "accounts", "managed"],
  pool: ["core", "accounts"],
  "cluster-api": ["core", "accounts"],
  budgets: ["core", "accounts", "managed"],
};

function controllerViolations(file: string, source: string): string[] {
  const relative = path.relative(CONTROLLERS, file).split(path.sep);
  const where = `controllers/${relative.join("/")}`;
  if (relative.length === 1) return relative[0] === "index.ts" ? [] : [`${where}: only index.ts sits at the top`];
  const folder = relative[0] ?? "";
  const allowed = CONTROLLER_FOLDERS[folder];
  if (allowed === undefined) return [`${where}: sub-folder ${folder} has no import rules`];
  const found: string[] = [];
  for (const specifier of importsOf(source)) {
    if (!specifier.startsWith(".")) continue;
    const target = path.relative(CONTROLLERS, path.resolve(path.dirname(file), specifier)).split(path.sep);
    if (target[0] === ".." || target[0] === folder) continue;
    const targetFolder = target.length === 1 ? "index.ts" : (target[0] ?? "");
    if (!allowed.includes(targetFolder)) found.push(`${where} imports controllers/${target.join("/")}`);
  }
  return found;
}

describe("controllers' sub-folders", () => {
  it("import only in the direction docs/architecture.md gives", async () => {
    const files = await sourceFiles(CONTROLLERS);
    expect(files.length).toBeGreaterThan(40);
    const found: string[] = [];
    for (const file of files) found.push(...controllerViolations(file, await readFile(file, "utf8")));
    expect(found).toEqual([]);
  });

  it("catches an import against the direction, and a file outside the sub-folders", () => {
    const account = path.join(CONTROLLERS, "accounts/example.ts");
    expect(controllerViolations(account, 'import { gpuVm } from "../kinds/gpu-vm.ts";\n')).toEqual([
      "controllers/accounts/example.ts imports controllers/kinds/gpu-vm.ts",
    ]);
    expect(controllerViolations(account, 'import type { Pass } from "../managed/pass.ts";\n')).toEqual([
      "controllers/accounts/example.ts imports controllers/managed/pass.ts",
    ]);
    expect(controllerViolations(account, 'import { registerControllers } from "../index.ts";\n')).toEqual([
      "controllers/accounts/example.ts imports controllers/index.ts",
    ]);
    const core = path.join(CONTROLLERS, "core/example.ts");
    expect(controllerViolations(core, 'import { sameJson } from "../../util/json-values.ts";\n')).toEqual([]);
    expect(controllerViolations(core, 'import { CloudAccount } from "../accounts/cloud-account.ts";\n')).toEqual([
      "controllers/core/example.ts imports controllers/accounts/cloud-account.ts",
    ]);
    const kind = path.join(CONTROLLERS, "kinds/example.ts");
    expect(controllerViolations(kind, 'import type { Pass } from "../managed/pass.ts";\n')).toEqual([]);
    expect(controllerViolations(kind, 'import { PoolReconciler } from "../pool/reconciler.ts";\n')).toEqual([
      "controllers/kinds/example.ts imports controllers/pool/reconciler.ts",
    ]);
    expect(controllerViolations(path.join(CONTROLLERS, "helpers.ts"), "")).toEqual([
      "controllers/helpers.ts: only index.ts sits at the top",
    ]);
  });
});
