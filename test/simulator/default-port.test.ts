import { execFile } from "node:child_process";
import type { AddressInfo } from "node:net";
import { createServer } from "node:net";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/runtime/config.ts";
import { DEFAULT_SIMULATOR_PORT } from "../../src/simulator/index.ts";

const MAIN = path.resolve(import.meta.dirname, "../../src/cli/main.ts");

describe("the simulator's port", () => {
  it("defaults to a port the operator's metrics and probe servers do not use", () => {
    const parsed = parseConfig([], {});
    if (parsed.kind !== "config") throw new Error("the operator's defaults do not parse");
    const operatorPorts = [parsed.config.metricsBindAddress?.port, parsed.config.healthProbeBindAddress?.port];
    expect(operatorPorts).toEqual([8080, 8081]);
    expect(operatorPorts).not.toContain(DEFAULT_SIMULATOR_PORT);
  });

  it("names --port when the port is taken, and exits 1", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const { port } = taken.address() as AddressInfo;
    try {
      const failure = await promisify(execFile)(process.execPath, [MAIN, "simulator", "--port", String(port)]).then(
        () => undefined,
        (error: unknown) => error as { code: number; stderr: string },
      );
      expect(failure?.code).toBe(1);
      expect(failure?.stderr).toContain(
        `cannot listen on 127.0.0.1:${port} (EADDRINUSE): choose another port with --port (0 picks a free one)`,
      );
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });
});
