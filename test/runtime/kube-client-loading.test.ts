// The operator process loads client-node's KubeConfig, Watch and ListWatch without the generated Kubernetes
// APIs and models (about 40 MiB of its idle memory): checked in a fresh process, as `gpuvm-operator run` starts.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const CHILD = fileURLToPath(new URL("./fixtures/slim-client-child.ts", import.meta.url));

describe("loadSlimKubeClient", () => {
  it("loads the operator's runtime without client-node's generated APIs and models", async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [CHILD], { timeout: 60_000 });
    const report = JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}") as { generated: string[]; server: string };
    expect(report.server).toBe("https://127.0.0.1:6443");
    // The request plumbing is real; no API class and no model module is loaded.
    expect(report.generated).toContain("gen/http/http.js");
    expect(report.generated.filter((file) => /^gen\/(models|types)\//.test(file))).toEqual([]);
    expect(report.generated.filter((file) => /^gen\/apis\/(?!exception|baseapi)/.test(file))).toEqual([]);
  }, 90_000);
});
