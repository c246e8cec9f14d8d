// The per-object annotation gpucloud.dev/sync-period with a long --sync-period: drift made behind the operator's
// back is corrected within the object's own period, not when the shared list snapshot ages out.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FirewallRule, Vm } from "../../src/cloud/wire.ts";
import { condition, type Env, startEnv, vmSpec } from "./harness.ts";

let env: Env;
beforeAll(async () => {
  env = await startEnv({ config: { syncPeriodMs: 10 * 60_000 } });
});
afterAll(async () => {
  await env?.close();
});

const SYNC = { "gpucloud.dev/sync-period": "1s" };
const reasonOf = (o: Parameters<typeof condition>[0]) => condition(o, "Ready")?.reason;
const cloudRule = async (id: string | undefined): Promise<FirewallRule | undefined> =>
  (await env.cloud<{ items: FirewallRule[] }>("vpc/firewall-rules")).items.find((r) => r.id === id);
const cloudVm = async (id: string | undefined): Promise<Vm | undefined> =>
  (await env.cloud<{ items: Vm[] }>("vms?limit=500")).items.find((vm) => vm.id === id);

describe("gpucloud.dev/sync-period shorter than --sync-period", () => {
  it("restores a firewall rule's ports and a stopped VM within the object's period", async () => {
    await env.apply("GpuNetwork", "sp-net", {});
    await env.apply("GpuVm", "sp-vm", vmSpec(), SYNC);
    await env.apply(
      "GpuFirewallRule",
      "sp-rule",
      {
        networkRef: { name: "sp-net" },
        direction: "ingress",
        action: "allow",
        protocols: ["tcp"],
        sources: [{ cidr: "0.0.0.0/0" }],
        destinationPorts: ["22"],
      },
      SYNC,
    );
    const rule = await env.waitReady("GpuFirewallRule", "sp-rule", 10_000);
    const vm = await env.waitReady("GpuVm", "sp-vm", 10_000);
    // Let the shared snapshots settle, so that nothing else refreshes them.
    await new Promise((resolve) => setTimeout(resolve, 1500));

    await env.admin("PATCH", `/firewall-rules/${rule.status?.id}`, { destination_ports: ["2222"] });
    await env.admin("PUT", `/vms/${vm.status?.id}/state`, { state: "STATE_STOPPED" });

    await expect
      .poll(async () => (await cloudRule(rule.status?.id))?.destination_ports, { timeout: 8000, interval: 200 })
      .toEqual(["22"]);
    await expect
      .poll(async () => (await cloudVm(vm.status?.id))?.state, { timeout: 8000, interval: 200 })
      .toBe("STATE_RUNNING");
    await env.waitFor("GpuVm", "sp-vm", (o) => reasonOf(o) === "Available");
  });
});
