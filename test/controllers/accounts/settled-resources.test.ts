// A settled operation's answer carries its resource as it ended (the simulator's VM operations do): the owner's
// fresh look at it takes that, with no list. Before, every settled VM cost a list (a full list while the family
// was one page, a share of a list by ids after), competing with creates for the account's rate.
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { CloudAccount } from "../../../src/controllers/accounts/cloud-account.ts";
import { clientFor } from "../../../src/controllers/accounts/credentials.ts";
import { type RunningSimulator, startSimulator } from "../../../src/simulator/index.ts";
import { SSH_KEY } from "../harness.ts";

let sim: RunningSimulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

async function counts(simulator: RunningSimulator): Promise<Record<string, number>> {
  const answer = (await (await fetch(`${simulator.adminUrl}/requests`)).json()) as { counts: Record<string, number> };
  return answer.counts;
}

const vmLists = (all: Record<string, number>): number =>
  Object.entries(all)
    .filter(([route]) => /^GET \S*\/projects\/:projectId\/vms$/.test(route))
    .reduce((sum, [, n]) => sum + n, 0);

describe("CloudAccount: resources settled operations answer with", () => {
  it("holds the VM a create's operation answered with as its owner's fresh view: no VM list", async () => {
    sim = await startSimulator({ latencyMs: 50 });
    const simulator = sim;
    const woken = new Set<string>();
    const parsed = { credentials: { apiKey: simulator.apiKey }, projectId: simulator.projectId, apiUrl: simulator.url };
    const client = clientFor(parsed, `settled-${Math.random()}`, { ratePerSec: 1000 });
    const account = new CloudAccount({
      client,
      projectId: simulator.projectId,
      apiUrl: simulator.url,
      credentialKey: "settled",
      snapshotMaxAgeMs: 60_000,
      operationPollMs: 20,
      wake: (_family, owner) => woken.add(owner),
      logger: pino({ level: "silent" }),
    });
    // The family as a new object's look saw it: empty (one list).
    expect((await account.vms.read()).byId.size).toBe(0);
    const operations = await Promise.all(
      ["a", "b", "c"].map((name) =>
        client.vms.create(simulator.projectId, {
          name,
          type: "a100.1x",
          location: "us-east1-a",
          ssh_public_key: SSH_KEY,
        }),
      ),
    );
    for (const [i, operation] of operations.entries()) {
      account.operation("vm", operation.operation_id, `ns/${i}`, operation.started_at);
    }
    for (let i = 0; i < 200 && woken.size < 3; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(woken.size).toBe(3);
    const listsBefore = vmLists(await counts(simulator));

    for (const [i, operation] of operations.entries()) {
      const progress = account.operation("vm", operation.operation_id, `ns/${i}`);
      expect(progress.state).toBe("settled");
      if (progress.state !== "settled") continue;
      // The owner's pass: its VM as fresh as the settlement.
      const vm = await account.vms.readOne(operation.metadata.id, progress.settledAt);
      expect(vm).toMatchObject({ id: operation.metadata.id, state: "STATE_RUNNING" });
    }
    expect(vmLists(await counts(simulator)) - listsBefore).toBe(0);
    // Another object's look (a new object's name lookup) finds them too, without a list.
    expect((await account.vms.read()).byName.get("b")?.state).toBe("STATE_RUNNING");
    expect(vmLists(await counts(simulator)) - listsBefore).toBe(0);
    account.stop();
  });
});
