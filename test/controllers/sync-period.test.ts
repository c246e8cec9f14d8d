// The per-object annotation gpucloud.dev/sync-period with a long --sync-period: drift made behind the operator's
// back is corrected within the object's own period, not when the shared list snapshot ages out; and a period
// below the floor (10 s) is raised to it and reported, so that no object can make the operator list its account
// many times a second.
import { EventsV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FirewallRule, Vm } from "../../src/cloud/wire.ts";
import { type Env, reasonOf, startEnv, vmSpec } from "./harness.ts";

let env: Env;
beforeAll(async () => {
  env = await startEnv({ config: { syncPeriodMs: 10 * 60_000 } });
});
afterAll(async () => {
  await env?.close();
});

const SYNC = { "gpucloud.dev/sync-period": "10s" };
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
      .poll(async () => (await cloudRule(rule.status?.id))?.destination_ports, { timeout: 20_000, interval: 200 })
      .toEqual(["22"]);
    await expect
      .poll(async () => (await cloudVm(vm.status?.id))?.state, { timeout: 20_000, interval: 200 })
      .toBe("STATE_RUNNING");
    await env.waitFor("GpuVm", "sp-vm", (o) => reasonOf(o) === "Available", 20_000);
  }, 60_000);
});

describe("gpucloud.dev/sync-period below the floor", () => {
  it("1ms is raised to 10s: a Warning Event says so, and the VM list is not read again within it", async () => {
    await env.apply("GpuVm", "sp-fast", vmSpec(), { "gpucloud.dev/sync-period": "1ms" });
    await env.waitReady("GpuVm", "sp-fast", 10_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    await env.admin("DELETE", "/requests");
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const { counts } = (await env.admin("GET", "/requests")) as { counts: Record<string, number> };
    const vmLists = Object.entries(counts)
      .filter(([route]) => /^GET \S*\/projects\/:projectId\/vms$/.test(route))
      .reduce((sum, [, n]) => sum + n, 0);
    expect(vmLists).toBeLessThanOrEqual(1);
    const events = env.kubeConfig.makeApiClient(EventsV1Api);
    await expect
      .poll(
        async () =>
          (await events.listNamespacedEvent({ namespace: "default" })).items
            .filter((event) => event.regarding?.name === "sp-fast" && event.reason === "SyncPeriodRaised")
            .map((event) => `${event.type}: ${event.note}`),
        { timeout: 5000 },
      )
      .toEqual(["Warning: gpucloud.dev/sync-period 1ms is below the floor of 10s: 10s is used"]);
  });
});
