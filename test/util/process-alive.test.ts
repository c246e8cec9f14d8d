import { spawn } from "node:child_process";
import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { isProcessAlive } from "../../src/util/process-alive.ts";

describe("isProcessAlive", () => {
  it("is true for a running process and false once it has exited", async () => {
    expect(isProcessAlive(process.pid)).toBe(true);
    const child = spawn(process.execPath, ["-e", ""]);
    const pid = child.pid ?? 0;
    await once(child, "exit");
    expect(isProcessAlive(pid)).toBe(false);
  });

  it("is false for what kill(2) reads as a process group or nothing", () => {
    for (const pid of [0, -1, -process.pid, 1.5, Number.NaN]) expect(isProcessAlive(pid)).toBe(false);
  });
});
