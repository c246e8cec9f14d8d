// Every log line of the operator names its component once: the cloud layer's loggers (the client, the operation
// trackers) add their own `component` to what the controllers give them, and pino writes a child's binding beside
// its parent's, not over it (a client line carried "component" three times: controllers, cloud, cloud-client).
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { type Env, startEnv, vmSpec } from "./harness.ts";

let env: Env | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

describe("operator log lines", () => {
  it("carry one component each, the cloud client's and the operation tracker's included", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(
          ...chunk
            .toString("utf8")
            .split("\n")
            .filter((line) => line !== ""),
        );
        done();
      },
    });
    // One failed list of operations in flight: the tracker says so (it logs nothing when all goes well).
    const faults = { errors: [{ method: "GET", route: "/projects/:projectId/vms/operations", status: 500, count: 1 }] };
    env = await startEnv({ simulator: { faults }, logger: pino({ level: "debug" }, sink) });
    await env.apply("GpuVm", "logged", vmSpec());
    await env.waitReady("GpuVm", "logged");
    const components = (line: string) => line.match(/"component":/g)?.length ?? 0;
    const named = (component: string) => lines.filter((line) => line.includes(`"component":"${component}"`));
    expect(named("cloud-client").length).toBeGreaterThan(0);
    expect(named("operation-tracker").length).toBeGreaterThan(0);
    expect(lines.filter((line) => components(line) > 1)).toEqual([]);
  });
});
