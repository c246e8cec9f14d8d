// Changes made outside the operator, with a long --sync-period (the default 10 minutes): a VM stopped with another
// client is started again, a disk grown past its spec is reported, a VM deleted in the cloud is created again, each
// within the poll interval (--poll-interval) from the batched family lists: a list per family and interval, no
// read per object.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCloudClient } from "../../src/cloud/client.ts";
import type { Vm } from "../../src/cloud/wire.ts";
import { condition, type Env, reasonOf, startEnv, vmSpec } from "./harness.ts";

const POLL_MS = 1000;
let env: Env;
beforeAll(async () => {
  env = await startEnv({ config: { syncPeriodMs: 10 * 60_000, pollIntervalMs: POLL_MS } });
});
afterAll(async () => {
  await env?.close();
});

const cloudVm = async (id: string | undefined): Promise<Vm | undefined> =>
  (await env.cloud<{ items: Vm[] }>("vms?limit=500")).items.find((vm) => vm.id === id);
const client = () => createCloudClient({ baseUrl: env.sim.url, credentials: { apiKey: env.sim.apiKey } });
const counts = async () => ((await env.admin("GET", "/requests")) as { counts: Record<string, number> }).counts;
const sum = (all: Record<string, number>, route: RegExp): number =>
  Object.entries(all)
    .filter(([key]) => route.test(key))
    .reduce((total, [, n]) => total + n, 0);

describe("changes made outside the operator, seen from the batched lists", () => {
  it("starts a VM stopped with another client again, within seconds, not at the next resync", async () => {
    await env.apply("GpuVm", "oob-vm", vmSpec());
    const vm = await env.waitReady("GpuVm", "oob-vm", 10_000);
    const id = vm.status?.id ?? "";
    await client().vms.stop(env.sim.projectId, id);
    await expect.poll(async () => (await cloudVm(id))?.state, { timeout: 5000, interval: 20 }).toBe("STATE_STOPPED");
    const stoppedAt = Date.now();
    await expect
      .poll(async () => (await cloudVm(id))?.state, { timeout: 4 * POLL_MS + 5000, interval: 100 })
      .toBe("STATE_RUNNING");
    expect(Date.now() - stoppedAt).toBeLessThan(3 * POLL_MS + 5000);
    const again = await env.waitFor("GpuVm", "oob-vm", (o) => reasonOf(o) === "Available", 10_000);
    const history = (again?.status?.operations as { name: string }[] | undefined)?.map((o) => o.name);
    expect(history?.[0]).toBe("START");
  }, 30_000);

  it("reports a disk grown past its spec (a shrink is never sent)", async () => {
    await env.apply("GpuDisk", "oob-disk", { size: "10GiB", location: "us-east1-a" });
    const disk = await env.waitReady("GpuDisk", "oob-disk", 10_000);
    await client().disks.resize(env.sim.projectId, disk.status?.id ?? "", "20GiB");
    const reported = await env.waitFor("GpuDisk", "oob-disk", (o) => o?.status?.size === "20GiB", 4 * POLL_MS + 5000);
    expect(condition(reported, "Synced")?.status).toBe("False");
    expect(condition(reported, "Ready")?.message ?? "").toMatch(/only grow/);
  }, 30_000);

  it("creates again a VM deleted in the cloud", async () => {
    await env.apply("GpuVm", "oob-gone", vmSpec());
    const vm = await env.waitReady("GpuVm", "oob-gone", 10_000);
    await env.admin("DELETE", `/resources/vms/${vm.status?.id}`);
    const again = await env.waitFor(
      "GpuVm",
      "oob-gone",
      (o) => o?.status?.id !== undefined && o.status.id !== vm.status?.id && condition(o, "Ready")?.status === "True",
      4 * POLL_MS + 5000,
    );
    expect(await cloudVm(again?.status?.id)).toBeDefined();
  }, 30_000);

  it("costs a list per family and interval at rest, and no read per object", async () => {
    await new Promise((resolve) => setTimeout(resolve, 2 * POLL_MS));
    await env.admin("DELETE", "/requests");
    await new Promise((resolve) => setTimeout(resolve, 4 * POLL_MS + 200));
    const all = await counts();
    const vmLists = sum(all, /^GET \S*\/projects\/:projectId\/vms$/);
    expect(vmLists).toBeGreaterThanOrEqual(3);
    expect(vmLists).toBeLessThanOrEqual(5);
    expect(sum(all, /^GET \S*\/vms\/:vmId$/)).toBe(0);
    expect(sum(all, /^GET \S*\/disks\/:diskId$/)).toBe(0);
  }, 30_000);
});
