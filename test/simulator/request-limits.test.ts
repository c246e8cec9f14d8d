// The simulator's own defences: request bodies above its limit are refused with 413 before being read in full,
// and the limit is configurable (option, config file, flag).
import { afterEach, describe, expect, it } from "vitest";
import { parseSimulatorArgs } from "../../src/cli/commands/simulator.ts";
import type { Api } from "./helpers.ts";
import { startTestSimulator, vmBody } from "./helpers.ts";

let api: Api | undefined;
afterEach(async () => {
  await api?.sim.close();
  api = undefined;
});

describe("request body limit", () => {
  it("refuses a body above the limit with 413 and a JSON error, and accepts one below it", async () => {
    api = await startTestSimulator({ maxRequestBytes: 4096 });
    const huge = { ...vmBody("too-big"), startup_script: "x".repeat(10_000) };
    const refused = await api.call("POST", api.project("/vms"), huge);
    expect(refused.status).toBe(413);
    expect(refused.body).toMatchObject({ message: expect.stringMatching(/too large/i) });
    const accepted = await api.call("POST", api.project("/vms"), vmBody("small"));
    expect(accepted.status).toBe(200);
  });

  it("defaults to 1 MiB and is set by --max-request-bytes", async () => {
    api = await startTestSimulator();
    const answer = await api.call("POST", api.project("/vms"), {
      ...vmBody("two-mib"),
      startup_script: "x".repeat(2 * 1024 * 1024),
    });
    expect(answer.status).toBe(413);
    expect(await parseSimulatorArgs(["--max-request-bytes", "65536"])).toMatchObject({ maxRequestBytes: 65536 });
    await expect(parseSimulatorArgs(["--max-request-bytes", "10"])).rejects.toThrow(/max-request-bytes/);
  });
});
