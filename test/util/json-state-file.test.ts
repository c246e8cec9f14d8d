// writeFileAtomic: the mode is set from the first byte written, the old content stays until the rename, and no
// temporary file is left behind (also when the rename fails).
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readJsonStateFile, writeFileAtomic } from "../../src/util/json-state-file.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "atomic-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("writeFileAtomic", () => {
  it("replaces the file with the given mode and leaves no temporary file", async () => {
    const file = path.join(dir, "secret.json");
    await writeFile(file, "old", { mode: 0o644 });
    await writeFileAtomic(file, '{"token":"x"}', { mode: 0o600, durable: true });
    expect(await readFile(file, "utf8")).toBe('{"token":"x"}');
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(await readdir(dir)).toEqual(["secret.json"]);
    expect(await readJsonStateFile(file)).toEqual({ token: "x" });
  });

  it("cleans up its temporary file when the rename fails", async () => {
    const target = path.join(dir, "a-directory");
    await mkdir(path.join(target, "inside"), { recursive: true });
    await expect(writeFileAtomic(target, "text")).rejects.toThrow();
    expect(await readdir(dir)).toEqual(["a-directory"]);
  });
});
