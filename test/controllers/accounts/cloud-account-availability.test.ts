// A cloud account's availability readings: yes or no, the count of free VMs where the server gives one (an
// extension beyond the spec), cached briefly, and read again when the caller needs a reading newer than a time
// (a pool whose replicas took capacity since the last one).
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { CloudAccount } from "../../../src/controllers/accounts/cloud-account.ts";
import { clientFor } from "../../../src/controllers/accounts/credentials.ts";
import { type RunningSimulator, type SimulatorOptions, startSimulator } from "../../../src/simulator/index.ts";
import { SSH_KEY } from "../harness.ts";

let sim: RunningSimulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

async function accountOn(options: SimulatorOptions) {
  sim = await startSimulator({ port: 0, latencyMs: 0, rateLimit: false, ...options });
  const simulator = sim;
  const clock = { t: Date.now() };
  const parsed = { credentials: { apiKey: simulator.apiKey }, projectId: simulator.projectId, apiUrl: simulator.url };
  const client = clientFor(parsed, `availability-${Math.random()}`, { ratePerSec: 1000 });
  const account = new CloudAccount({
    client,
    projectId: simulator.projectId,
    apiUrl: simulator.url,
    credentialKey: "availability",
    snapshotMaxAgeMs: 60_000,
    operationPollMs: 1_000,
    wake: () => undefined,
    logger: pino({ level: "silent" }),
    now: () => clock.t,
  });
  const createVm = (name: string) =>
    client.vms.create(simulator.projectId, { name, type: "a100.1x", location: "us-east1-a", ssh_public_key: SSH_KEY });
  return { account, clock, createVm };
}

describe("CloudAccount availability", () => {
  it("reads the count where the server gives one; a cached reading serves until a newer one is asked for", async () => {
    const { account, clock, createVm } = await accountOn({ capacity: { "us-east1-a": { "a100.1x": 3 } } });
    const signal = new AbortController().signal;
    expect(await account.availability("a100.1x", "us-east1-a", signal)).toEqual({ available: true, count: 3 });
    await createVm("takes-one");
    clock.t += 1_000;
    // Within the cache period the reading from before the create still serves (and says 3)...
    expect(await account.availability("a100.1x", "us-east1-a", signal)).toEqual({ available: true, count: 3 });
    // ...unless the caller needs one newer than the create.
    expect(await account.availability("a100.1x", "us-east1-a", signal, clock.t)).toEqual({
      available: true,
      count: 2,
    });
    expect(await account.isAvailable("a100.1x", "us-east1-a", signal)).toBe(true);
    account.stop();
  });

  it("says yes or no only where the server does not count", async () => {
    const { account } = await accountOn({ capacity: { "us-east1-a": { "a100.1x": 3 } }, profile: "seed-only" });
    const signal = new AbortController().signal;
    expect(await account.availability("a100.1x", "us-east1-a", signal)).toEqual({ available: true });
    expect(await account.availability("a100.1x", "us-southcentral1-a", signal)).toEqual({ available: true });
    account.stop();
  });
});
