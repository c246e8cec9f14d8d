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
    const testStep = read(".ci/run")
      .split("\n")
      .filter((line) => /^step "tests"/.test(line));
    expect(testStep).toHaveLength(1);
    expect(testStep[0]).toMatch(/^step "tests" npm test -- /);
    expect(read(".ci/run")).not.toMatch(/npx vitest|vitest run/);
  });

  it("passes its arguments through to vitest run (npm test is vitest run)", () => {
    const scripts = (JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts;
    expect(scripts.test).toBe("vitest run");
  });
});
