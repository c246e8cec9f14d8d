// `npm run check:manifests` (Node 24): checks the YAML the project ships.
// - crds/: structural-schema rules and the project's quality rules (descriptions, bounds);
// - examples/: every object of our group is valid against the generated schemas (unknown fields rejected)
//   and the zod rules that mirror the CEL one-of checks;
// - test/fixtures/invalid/: every object must be rejected;
// - deploy/ and charts/: every YAML file parses (Helm templates excepted), and `kubectl kustomize deploy/`
//   renders and parses when kubectl and a kustomization are there.
// Prints one line per area and exits 1 when anything fails.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { crdViolations, qualityViolations } from "../src/api/structural.ts";
import { createManifestValidator, parseManifests } from "../src/api/validate.ts";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const validator = createManifestValidator();

interface AreaResult {
  area: string;
  checked: number;
  failures: string[];
  note?: string;
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

async function yamlFilesUnder(directory: string, skip: (path: string) => boolean = () => false): Promise<string[]> {
  if (!existsSync(directory)) return [];
  const found: string[] = [];
  for (const entry of await readdir(directory, { withFileTypes: true, recursive: true })) {
    const path = join(entry.parentPath, entry.name);
    if (entry.isFile() && /\.ya?ml$/.test(entry.name) && !skip(path)) found.push(path);
  }
  return found.sort();
}

async function manifestsOf(path: string) {
  return parseManifests(await readFile(path, "utf8"), relative(ROOT, path));
}

function schemaOfCrd(document: unknown): unknown {
  const spec = (document as { spec?: { versions?: { schema?: { openAPIV3Schema?: unknown } }[] } }).spec;
  return spec?.versions?.[0]?.schema?.openAPIV3Schema;
}

async function checkCrds(): Promise<AreaResult> {
  const result: AreaResult = { area: "crds", checked: 0, failures: [] };
  const files = await yamlFilesUnder(join(ROOT, "crds"));
  if (files.length === 0) result.failures.push("crds/ has no CRDs: run npm run generate");
  for (const file of files) {
    try {
      for (const { object } of await manifestsOf(file)) {
        result.checked++;
        const problems = [...crdViolations(object), ...qualityViolations(schemaOfCrd(object))];
        result.failures.push(...problems.map((problem) => `${relative(ROOT, file)}: ${problem}`));
      }
    } catch (error) {
      result.failures.push(errorMessage(error));
    }
  }
  return result;
}

async function checkExamples(): Promise<AreaResult> {
  const result: AreaResult = { area: "examples", checked: 0, failures: [] };
  const files = await yamlFilesUnder(join(ROOT, "examples"));
  if (files.length === 0) result.failures.push("examples/ has no manifests");
  for (const file of files) {
    try {
      for (const { index, object } of await manifestsOf(file)) {
        const { kind, problems } = validator.check(object);
        if (kind === undefined) continue;
        result.checked++;
        result.failures.push(...problems.map((problem) => `${relative(ROOT, file)}#${index} ${kind}: ${problem}`));
      }
    } catch (error) {
      result.failures.push(errorMessage(error));
    }
  }
  return result;
}

async function checkInvalidFixtures(): Promise<AreaResult> {
  const result: AreaResult = { area: "invalid fixtures", checked: 0, failures: [] };
  for (const file of await yamlFilesUnder(join(ROOT, "test/fixtures/invalid"))) {
    try {
      for (const { index, object } of await manifestsOf(file)) {
        result.checked++;
        const { kind, problems } = validator.check(object);
        if (kind === undefined || problems.length === 0) {
          result.failures.push(`${relative(ROOT, file)}#${index}: accepted, but it is in the invalid fixtures`);
        }
      }
    } catch (error) {
      result.failures.push(errorMessage(error));
    }
  }
  return result;
}

/** Helm templates are Go templates, not YAML: only the chart's plain files must parse. */
function isHelmTemplate(path: string): boolean {
  return path.split(/[\\/]/).includes("templates");
}

async function checkParses(directoryName: string): Promise<AreaResult> {
  const result: AreaResult = { area: `${directoryName}/ YAML`, checked: 0, failures: [] };
  const directory = join(ROOT, directoryName);
  if (!existsSync(directory)) return { ...result, note: "absent" };
  for (const file of await yamlFilesUnder(directory, isHelmTemplate)) {
    result.checked++;
    try {
      await manifestsOf(file);
    } catch (error) {
      result.failures.push(errorMessage(error));
    }
  }
  return result;
}

async function checkKustomize(): Promise<AreaResult> {
  const result: AreaResult = { area: "kubectl kustomize deploy/", checked: 0, failures: [] };
  const hasKustomization = ["kustomization.yaml", "kustomization.yml", "Kustomization"].some((name) =>
    existsSync(join(ROOT, "deploy", name)),
  );
  if (!hasKustomization) return { ...result, note: "no deploy/kustomization.yaml" };
  let rendered: string;
  try {
    rendered = (await promisify(execFile)("kubectl", ["kustomize", join(ROOT, "deploy")], { maxBuffer: 16 << 20 }))
      .stdout;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { ...result, note: "kubectl not installed" };
    return { ...result, failures: [`kubectl kustomize deploy/ failed: ${errorMessage(error)}`] };
  }
  try {
    for (const { index, object } of parseManifests(rendered, "kubectl kustomize deploy/")) {
      result.checked++;
      if ((object as { kind?: unknown } | null)?.kind === "CustomResourceDefinition") {
        result.failures.push(...crdViolations(object).map((problem) => `document ${index}: ${problem}`));
        continue;
      }
      const { kind, problems } = validator.check(object);
      if (kind !== undefined)
        result.failures.push(...problems.map((problem) => `document ${index} ${kind}: ${problem}`));
    }
  } catch (error) {
    result.failures.push(errorMessage(error));
  }
  return result;
}

async function main(): Promise<number> {
  const results = [
    await checkCrds(),
    await checkExamples(),
    await checkInvalidFixtures(),
    await checkParses("deploy"),
    await checkParses("charts"),
    await checkKustomize(),
  ];
  let failed = 0;
  for (const result of results) {
    const status = result.failures.length > 0 ? "FAIL" : "ok";
    process.stdout.write(
      `${status.padEnd(4)} ${result.area}: ${result.checked} checked${result.note ? ` (${result.note})` : ""}\n`,
    );
    for (const failure of result.failures) process.stdout.write(`     ${failure}\n`);
    failed += result.failures.length;
  }
  process.stdout.write(failed === 0 ? "manifests: all checks passed\n" : `manifests: ${failed} problem(s)\n`);
  return failed === 0 ? 0 : 1;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(
      `check-manifests: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exitCode = 1;
  },
);
