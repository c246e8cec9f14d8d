// How long a cloud account remembers settled operations: until their owner's pass has read the result (plus a
// minute, for a pass whose status write conflicted), else half an hour. At 10,000 VMs, remembering every
// operation of a burst for half an hour held ~3 KB per VM, and forgetting scanned them all at each settlement.
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { CloudAccount, outcomeOf } from "../../../src/controllers/accounts/cloud-account.ts";
import { clientFor } from "../../../src/controllers/accounts/credentials.ts";
import { type RunningSimulator, startSimulator } from "../../../src/simulator/index.ts";
import { SSH_KEY } from "../harness.ts";

let sim: RunningSimulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

describe("CloudAccount operation memory", () => {
  it("forgets a settled operation a minute after its owner read it; an unread one is kept", async () => {
    sim = await startSimulator({ latencyMs: 10 });
    const simulator = sim;
    const clock = { t: Date.now() };
    const settled = new Set<string>();
    const parsed = { credentials: { apiKey: simulator.apiKey }, projectId: simulator.projectId, apiUrl: simulator.url };
    const client = clientFor(parsed, `memory-${Math.random()}`, { ratePerSec: 1000 });
    const account = new CloudAccount({
      client,
      projectId: simulator.projectId,
      apiUrl: simulator.url,
      credentialKey: "memory",
      snapshotMaxAgeMs: 60_000,
      operationPollMs: 20,
      wake: (_family, owner) => settled.add(owner),
      logger: pino({ level: "silent" }),
      now: () => clock.t,
    });
    const create = async (name: string): Promise<string> => {
      const operation = await client.vms.create(simulator.projectId, {
        name,
        type: "a100.1x",
        location: "us-east1-a",
        ssh_public_key: SSH_KEY,
      });
      return operation.operation_id;
    };
    const read = await create("read-one");
    const unread = await create("unread-one");
    const startedAt = clock.t;
    expect(account.oldestInFlightSince("vm")).toBeUndefined();
    expect(account.operation("vm", read, "ns/read").state).toBe("pending");
    clock.t += 1_000;
    expect(account.operation("vm", unread, "ns/unread").state).toBe("pending");
    // The gauge of the oldest pending operation: the first one tracked, while it is pending.
    expect(account.oldestInFlightSince("vm")).toBe(startedAt);
    expect(account.oldestInFlightSince("disk")).toBeUndefined();
    for (let i = 0; i < 200 && settled.size < 2; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect([...settled].sort()).toEqual(["ns/read", "ns/unread"]);
    // Settled operations are remembered, but none is in flight any more.
    expect(account.oldestInFlightSince("vm")).toBeUndefined();

    // The owner's pass reads the result (and writes it to status). What is remembered is the outcome: not the
    // request (with its SSH key) nor the VM a successful create answers with.
    const progress = account.operation("vm", read, "ns/read");
    expect(progress.state).toBe("settled");
    const remembered = progress.state === "settled" ? progress.operation : undefined;
    expect(remembered).toMatchObject({ operation_id: read, state: "SUCCEEDED", result: null });
    expect(remembered?.metadata).toMatchObject({ operation_name: "CREATE", type: "vm" });
    expect(remembered?.metadata.id).toMatch(/\S/);
    expect(remembered?.metadata).not.toHaveProperty("request");
    clock.t += 61_000;
    // The read one is forgotten (asking again tracks it afresh); the unread one is still there to be found.
    expect(account.operation("vm", unread, "ns/unread").state).toBe("settled");
    expect(account.operation("vm", read, "ns/read").state).toBe("pending");
    account.stop();
  });
});

describe("outcomeOf (a settled operation as remembered)", () => {
  it("keeps a failure's error, drops a success's resource and every request", () => {
    const base = {
      operation_id: "op-1",
      metadata: { operation_name: "CREATE", id: "vm-1", type: "vm", request: { ssh_public_key: "ssh-ed25519 AAAA" } },
      started_at: "2026-11-25T00:00:00Z",
      completed_at: "2026-11-25T00:00:01Z",
    };
    const failed = outcomeOf({ ...base, state: "FAILED", result: { code: "QUOTA_EXCEEDED", message: "no room" } });
    expect(failed.result).toEqual({ code: "QUOTA_EXCEEDED", message: "no room" });
    expect(failed.metadata).toEqual({ operation_name: "CREATE", id: "vm-1", type: "vm" });
    const succeeded = outcomeOf({ ...base, state: "SUCCEEDED", result: { id: "vm-1", disks: [] } });
    expect(succeeded).toEqual({ ...base, state: "SUCCEEDED", result: null, metadata: failed.metadata });
  });
});
