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
const AVAILABILITY_ROUTE = "GET /v0.1/projects/:projectId/availabilities";
const NAMES = Array.from({ length: 30 }, (_, i) => `q${String(i).padStart(2, "0")}`);

async function availabilityReads(e: Env): Promise<number> {
  const { counts } = (await e.admin("GET", "/requests")) as { counts: Record<string, number> };
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
    // The ten oldest one a second (creationTimestamp has whole seconds, and the queue's order is the objects' age),
    // then the twenty younger ones at once: each of the ten is strictly older than the next and than all twenty.
    for (const name of NAMES.slice(0, 10)) {
      await e.apply("GpuVm", name, vmSpec({ type: "a40.1x" }));
      await new Promise((resolve) => setTimeout(resolve, 1010));
    }
    await Promise.all(NAMES.slice(10).map((name) => e.apply("GpuVm", name, vmSpec({ type: "a40.1x" }))));
    const deadline = Date.now() + 30_000;
    while (!(await all(e)).every(waitingForCapacity)) {
      if (Date.now() > deadline) throw new Error("not all waiting for capacity");
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    // Their place is in status (said when each joined, brought up to date at the next probe of the pair).
    const tenth = await e.waitFor(
      "GpuVm",
      "q09",
      (vm) => /of 30 waiting/.test(condition(vm, "Ready")?.message ?? ""),
      10_000,
    );
    expect(condition(tenth, "Ready")?.message).toMatch(/10th of 30 waiting for a40\.1x in us-east1-a/);

    const before = await availabilityReads(e);
    const windowMs = 5 * PROBE_INTERVAL_MS;
    await new Promise((resolve) => setTimeout(resolve, windowMs));
    const probes = (await availabilityReads(e)) - before;
    console.log(`capacity queue: ${probes} availability reads in ${windowMs / PROBE_INTERVAL_MS} intervals`);
    // Probed while they wait (the count is read right), but once per interval for the pair, not per object.
    expect(probes).toBeGreaterThanOrEqual(1);
    expect(probes).toBeLessThanOrEqual(windowMs / PROBE_INTERVAL_MS + 1);
    expect(await createdInOrder(e)).toEqual([]);

    await setCapacity(e, 10);
    const oldest = NAMES.slice(0, 10).map((name) => `default-${name}`);
    const created = Date.now() + 30_000;
    while ((await createdInOrder(e)).length < 10 && Date.now() < created) {
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    // Two more intervals: nobody else gets in (and the places are brought up to date at a probe).
    await new Promise((resolve) => setTimeout(resolve, 2 * PROBE_INTERVAL_MS));
    expect(await createdInOrder(e)).toEqual(oldest);
    const rest = (await all(e)).slice(10);
    expect(rest.every(waitingForCapacity)).toBe(true);
    // The twenty hold the places 1 to 20 of the line (their order among themselves: the uid's, they are of one age).
    const places = rest.map((vm) =>
      Number(/(\d+)(?:st|nd|rd|th) of 20 waiting/.exec(condition(vm, "Ready")?.message ?? "")?.[1]),
    );
    expect(places.sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  }, 150_000);
});
