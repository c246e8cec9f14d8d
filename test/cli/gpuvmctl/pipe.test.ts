import { spawn } from "node:child_process";
import path from "node:path";
import { describe, expect, it } from "vitest";

const MAIN = path.resolve(import.meta.dirname, "../../../src/cli/gpuvmctl/main.ts");

describe("gpuvmctl's output to a reader that stops early", () => {
  it("exits quietly when its stdout pipe is closed before it writes (`gpuvmctl … | head -1`)", async () => {
    const child = spawn(process.execPath, [MAIN, "--help"], { stdio: ["ignore", "pipe", "pipe"] });
    // Closed at once: the child is still loading its modules, so its first write meets a closed pipe.
    child.stdout.destroy();
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    const code = await new Promise<number | null>((resolve) => child.on("close", (exit) => resolve(exit)));
    expect(stderr).toBe("");
    expect(code).toBe(0);
  });
});
