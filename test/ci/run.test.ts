// CI (.ci/run) runs the tests the way the README tells a contributor to: `npm test`, with arguments where it
// needs a project filter or a report, never a command line of its own that could drift from the README's.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const REPO_ROOT = path.resolve(import.meta.dirname, "../..");
const read = (file: string): string => readFileSync(path.join(REPO_ROOT, file), "utf8");

describe(".ci/run", () => {
  it("runs the README's test command", () => {
    const readmeTests = read("README.md").split("### Tests")[1]?.split("\n## ")[0] ?? "";
    expect(readmeTests).toMatch(/```sh\nnpm ci && npm test\n```/);
    const run = read(".ci/run");
    // Every test step goes through one function that runs `npm test` for one project…
    const invocations = run
      .split("\n")
      .filter((line) => /\bnpm test\b/.test(line) && !line.trimStart().startsWith("#"));
    expect(invocations.length).toBeGreaterThan(0);
    for (const line of invocations) expect(line).toMatch(/npm test -- --project "\$project" /);
    // …and the steps name every project of vitest.config.ts: unit first, then e2e beside kubernetes.
    expect(run).toMatch(/^step "tests: unit" vitest_run unit$/m);
    expect(run).toMatch(/^step "tests: e2e beside kubernetes" side_by_side$/m);
    expect(run).toMatch(/local projects=\(e2e\)\n\s*\[ "\$kubernetes" = yes \] && projects\+=\(kubernetes\)/);
    for (const project of ["unit", "e2e", "kubernetes"])
      expect(read("vitest.config.ts")).toContain(`name: "${project}"`);
    expect(read(".ci/run")).not.toMatch(/npx vitest|vitest run/);
  });

  it("passes its arguments through to vitest run (npm test is vitest run)", () => {
    const scripts = (JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts;
    expect(scripts.test).toBe("vitest run");
  });
});
