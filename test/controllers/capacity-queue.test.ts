// The capacity queue in front of the creates (issue #32 part B), over the harness: thirty GpuVms of one type wait on
// capacity 0 (Ready False, CapacityUnavailable, their place in status); while they wait the pair is probed at most
// once per interval, not once per object; capacity raised to 10: exactly the 10 oldest are created, in order, and
// the other twenty keep waiting in the same order.
import { afterEach, describe, expect, it } from "vitest";
import { condition, type Env, type ManagedView, reasonOf, startEnv, vmSpec } from "./harness.ts";

let env: Env | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const PROBE_INTERVAL_MS = 2000;
const AVAILABILITY_ROUTE = "GET /projects/:projectId/availabilities";
const NAMES = Array.from({ length: 30 }, (_, i) => `q${String(i).padStart(2, "0")}`);

async function availabilityReads(e: Env): Promise<number> {
  const counts = (await e.admin("GET", "/requests")) as Record<string, number>;
  return counts[AVAILABILITY_ROUTE] ?? 0;
}

async function setCapacity(e: Env, capacity: number): Promise<void> {
  await e.admin("PUT", "/capacity", { "us-east1-a": { "a40.1x": { capacity } } });
}

/** The simulator's VMs in the order it created them. */
async function createdInOrder(e: Env): Promise<string[]> {
  const state = (await e.admin("GET", "/state")) as { vms: { name: string }[] };
  return state.vms.map((vm) => vm.name);
}

async function all(e: Env): Promise<(ManagedView | undefined)[]> {
  return Promise.all(NAMES.map((name) => e.get("GpuVm", name)));
}

const waitingForCapacity = (vm: ManagedView | undefined) =>
  reasonOf(vm) === "CapacityUnavailable" && condition(vm, "Stalled")?.status === "True";

describe("the capacity queue", () => {
  it("30 waiting on capacity 0, then 10 free: exactly the 10 oldest go, in order; ≤ 1 probe per interval meanwhile", async () => {
    env = await startEnv({ config: { capacityProbeIntervalMs: PROBE_INTERVAL_MS } });
    const e = env;
    await setCapacity(e, 0);
    // One a second: creationTimestamp has whole seconds, and the queue's order is the objects' age.
    for (const name of NAMES) {
      await e.apply("GpuVm", name, vmSpec({ type: "a40.1x" }));
      await new Promise((resolve) => setTimeout(resolve, 1010));
    }
    const deadline = Date.now() + 30_000;
    while (!(await all(e)).every(waitingForCapacity)) {
      if (Date.now() > deadline) throw new Error("not all waiting for capacity");
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    // Their place is in status.
    const last = await e.get("GpuVm", "q29");
    expect(condition(last, "Ready")?.message).toMatch(/30th of 30 waiting for a40\.1x in us-east1-a/);

    const before = await availabilityReads(e);
    const windowMs = 5 * PROBE_INTERVAL_MS;
    await new Promise((resolve) => setTimeout(resolve, windowMs));
    const probes = (await availabilityReads(e)) - before;
    expect(probes).toBeLessThanOrEqual(windowMs / PROBE_INTERVAL_MS + 1);
    expect(await createdInOrder(e)).toEqual([]);

    await setCapacity(e, 10);
    const oldest = NAMES.slice(0, 10).map((name) => `default-${name}`);
    const created = Date.now() + 30_000;
    while ((await createdInOrder(e)).length < 10 && Date.now() < created) {
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    // A few more intervals: nobody else gets in.
    await new Promise((resolve) => setTimeout(resolve, 3 * PROBE_INTERVAL_MS));
    expect(await createdInOrder(e)).toEqual(oldest);
    const rest = (await all(e)).slice(10);
    expect(rest.every(waitingForCapacity)).toBe(true);
    expect(condition(rest[0], "Ready")?.message).toMatch(/1st of 20 waiting for a40\.1x in us-east1-a/);
  }, 150_000);
});
