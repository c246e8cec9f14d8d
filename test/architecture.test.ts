// The import direction of docs/architecture.md, enforced: cli → controllers → {admission, runtime, api, cloud};
// the simulator and the test double stand apart (the simulator's node-join emulation uses three files of
// control-plane); runtime knows nothing of GPUs; cloud knows nothing of Kubernetes.
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";

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
