// writeFileAtomic: the mode is set from the first byte written, the old content stays until the rename, and no
// temporary file is left behind (also when the rename fails). State files hold API keys and passwords (simulator,
// Kubernetes API test double, playground): written 0600, also over an older file with looser permissions.
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { startKubeDouble } from "../../src/kube-double/index.ts";
import { startSimulator } from "../../src/simulator/index.ts";
import { JsonStateFileWriter, readJsonStateFile, writeFileAtomic } from "../../src/util/json-state-file.ts";

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

const modeOf = async (file: string): Promise<number> => (await stat(file)).mode & 0o777;

describe("JSON state files", () => {
  it("are written owner-only, replacing a world-readable older file", async () => {
    const file = path.join(dir, "state.json");
    await writeFile(file, "{}");
    await chmod(file, 0o644);
    const writer = new JsonStateFileWriter({
      path: file,
      snapshot: () => ({ apiKey: "k" }),
      debounceMs: 1,
      onError: (error) => {
        throw error;
      },
    });
    writer.markDirty();
    await writer.flush();
    expect(await modeOf(file)).toBe(0o600);
    expect(await readJsonStateFile(file)).toEqual({ apiKey: "k" });
  });

  it("hold at most one serialized state however slow the disk: the state is read again only after a write ends", async () => {
    // A slow disk (or a busy machine) and 10,000 objects changing: every debounce used to serialize the whole state
    // and queue it behind the write in flight, and the playground ran out of heap (4 GiB) at 10,000 GpuVms.
    let version = 0;
    let snapshots = 0;
    const written: string[] = [];
    const gates: Array<() => void> = [];
    const writer = new JsonStateFileWriter({
      path: path.join(dir, "state.json"),
      snapshot: () => {
        snapshots++;
        return { version };
      },
      debounceMs: 1,
      onError: (error) => {
        throw error;
      },
      writeText: (_path, text) =>
        new Promise<void>((resolve) => {
          written.push(text);
          gates.push(resolve);
        }),
    });
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    writer.markDirty();
    await sleep(20);
    expect(written).toEqual(['{"version":0}']);
    for (let i = 1; i <= 20; i++) {
      version = i;
      writer.markDirty();
      await sleep(3);
    }
    expect(snapshots).toBe(1);
    expect(written).toHaveLength(1);
    gates.shift()?.();
    // The next write waits as long as the last one took (here about 80 ms): at most half the time writing.
    await vi.waitFor(() => expect(written).toHaveLength(2), { timeout: 2000 });
    expect(written).toEqual(['{"version":0}', '{"version":20}']);
    const flushed = writer.flush();
    gates.shift()?.();
    await flushed;
    expect(snapshots).toBe(2);
    // Nothing changed since the last write: flush writes nothing more.
    expect(written).toHaveLength(2);
  });

  it("the simulator's and the test double's state files (API key, password, Secrets) are 0600", async () => {
    const cloudState = path.join(dir, "cloud-state.json");
    const clusterState = path.join(dir, "cluster-state.json");
    const sim = await startSimulator({ port: 0, latencyMs: 0, stateFile: cloudState, stateFileDebounceMs: 1 });
    const double = await startKubeDouble({ port: 0, stateFile: clusterState, persistDebounceMs: 1 });
    await fetch(`${double.url}/api/v1/namespaces/default/secrets`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ metadata: { name: "creds" }, stringData: { apiKey: sim.apiKey } }),
    });
    await fetch(`${sim.url}/projects/${sim.projectId}/vpc/networks`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${sim.apiKey}` },
      body: JSON.stringify({ name: "n1", location: "us-east1-a" }),
    });
    await double.close();
    await sim.close();
    expect(await modeOf(cloudState)).toBe(0o600);
    expect(await modeOf(clusterState)).toBe(0o600);
  });
});
