// `npm start -- --kube real`: refused with a hint when the binaries are not built, and a restart on the same
// state directory finds the same objects and cloud resources (etcd's data and the certificates are kept).
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../src/control-plane/binaries.ts";
import { describeRestart } from "../e2e/restart.ts";
import { kubeBin } from "./shared.ts";

const run = promisify(execFile);

describe("playground --kube real", () => {
  it("says to run npm run kube:build when the binaries are not built", async () => {
    const emptyCache = await mkdtemp(path.join(tmpdir(), "gpuvm-empty-kube-cache-"));
    try {
      const failure = await run(
        process.execPath,
        ["src/cli/main.ts", "playground", "--kube", "real", "--state-dir", path.join(emptyCache, "state")],
        { cwd: REPO_ROOT, env: { ...process.env, GPUVM_KUBE_CACHE: emptyCache }, timeout: 60_000 },
      ).then(
        () => undefined,
        (error: unknown) => error as { code?: number; stderr?: string },
      );
      expect(failure?.code).toBe(1);
      expect(failure?.stderr).toContain("--kube real needs the control plane binaries: run `npm run kube:build`");
    } finally {
      await rm(emptyCache, { recursive: true, force: true });
    }
  });
});

describeRestart({ kube: "real", kubectl: kubeBin("kubectl") });
