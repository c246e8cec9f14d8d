// `gpuvm-operator generate [--check] [--root DIR]`: writes crds/gpucloud.dev_<plural>.yaml, their copies for
// kustomize (deploy/crds, which may not reach outside its folder) and Helm (charts/gpuvm-operator/crds), and
// docs/crd-reference.md from src/api. With --check nothing is written; stale or missing files are listed and
// the exit code is 1 (CI runs `npm run generate -- --check`).
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { GROUP } from "../../api/common.ts";
import { generateCrds } from "../../api/crd.ts";
import { generateCrdReference } from "../../api/reference-doc.ts";

export const CRD_DIR = "crds";
/** Copies of crds/ where packaging needs them inside its own folder. */
export const CRD_COPY_DIRS = ["deploy/crds", "charts/gpuvm-operator/crds"];
export const REFERENCE_DOC = "docs/crd-reference.md";
const REPOSITORY_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

const USAGE = `Usage: gpuvm-operator generate [--check] [--root DIR]

Writes ${CRD_DIR}/${GROUP}_<plural>.yaml (and copies in ${CRD_COPY_DIRS.join(", ")}) and ${REFERENCE_DOC}
from the zod schemas in src/api.

  --check     write nothing; list stale, missing or leftover files and exit 1 if there are any
  --root DIR  repository root to write into (default: this checkout)
`;

/** Every generated file, by path relative to the repository root. */
export function generatedFiles(): { path: string; content: string }[] {
  const crds = generateCrds();
  return [
    ...[CRD_DIR, ...CRD_COPY_DIRS].flatMap((dir) =>
      crds.map((crd) => ({ path: `${dir}/${crd.fileName}`, content: crd.yaml })),
    ),
    { path: REFERENCE_DOC, content: generateCrdReference() },
  ];
}

async function readIfPresent(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/** CRD files of our group that the generator no longer produces (a renamed or removed kind). */
async function leftoverCrds(root: string, expected: Set<string>): Promise<string[]> {
  const leftovers: string[] = [];
  for (const dir of [CRD_DIR, ...CRD_COPY_DIRS]) {
    const names = await readdir(join(root, dir)).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return [] as string[];
      throw error;
    });
    leftovers.push(
      ...names
        .filter((name) => name.startsWith(`${GROUP}_`) && name.endsWith(".yaml"))
        .map((name) => `${dir}/${name}`)
        .filter((path) => !expected.has(path)),
    );
  }
  return leftovers.sort();
}

interface Options {
  check: boolean;
  root: string;
}

function parseArgs(argv: string[]): Options | { error: string } | "help" {
  const options: Options = { check: false, root: REPOSITORY_ROOT };
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index];
    if (arg === "--help" || arg === "-h") return "help";
    if (arg === "--check") options.check = true;
    else if (arg === "--root") {
      const value = argv[++index];
      if (value === undefined || value === "") return { error: "--root needs a directory" };
      options.root = resolve(value);
    } else if (arg?.startsWith("--root=")) options.root = resolve(arg.slice("--root=".length));
    else return { error: `unknown argument '${arg}'` };
  }
  return options;
}

export async function main(argv: string[]): Promise<number> {
  const parsed = parseArgs(argv);
  if (parsed === "help") {
    process.stdout.write(USAGE);
    return 0;
  }
  if ("error" in parsed) {
    process.stderr.write(`generate: ${parsed.error}\n\n${USAGE}`);
    return 2;
  }
  const files = generatedFiles();
  const leftovers = await leftoverCrds(parsed.root, new Set(files.map((file) => file.path)));
  if (parsed.check) {
    const stale: string[] = [];
    for (const file of files) {
      const current = await readIfPresent(join(parsed.root, file.path));
      if (current === undefined) stale.push(`${file.path} (missing)`);
      else if (current !== file.content) stale.push(`${file.path} (out of date)`);
    }
    stale.push(...leftovers.map((path) => `${path} (not generated any more)`));
    if (stale.length > 0) {
      process.stderr.write(
        `generate --check: stale generated files; run 'npm run generate':\n  ${stale.join("\n  ")}\n`,
      );
      return 1;
    }
    process.stdout.write(`generate --check: ${files.length} generated files are up to date\n`);
    return 0;
  }
  let written = 0;
  for (const file of files) {
    const target = join(parsed.root, file.path);
    if ((await readIfPresent(target)) === file.content) continue;
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, file.content);
    written++;
  }
  for (const path of leftovers) await rm(join(parsed.root, path));
  process.stdout.write(
    `generate: ${written} of ${files.length} files written${leftovers.length > 0 ? `, removed ${leftovers.join(", ")}` : ""}\n`,
  );
  return 0;
}
