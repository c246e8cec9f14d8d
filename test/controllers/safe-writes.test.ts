// Status writes never fail on the CRD's limits, and a write that fails never repeats the action behind it:
// through the real runtime (the Kubernetes API test double validates status against the CRD like the API server).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Operation } from "../../src/cloud/wire.ts";
import { condition, type Env, eventsAbout, reasonOf, startEnv, vmSpec } from "./harness.ts";

let env: Env;
beforeAll(async () => {
  env = await startEnv();
});
afterAll(async () => {
  await env?.close();
});

const operationsOf = async (id: string): Promise<string[]> =>
  (await env.cloud<{ items: Operation[] }>(`vms/operations?resource_id=${id}`)).items.map(
    (op) => op.metadata.operation_name,
  );
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("values from outside that exceed the CRD's limits", () => {
  it("a reset annotation of 100 characters RESETs the VM once and is recorded shortened", async () => {
    await env.apply("GpuVm", "long-reset", vmSpec());
    const ready = await env.waitReady("GpuVm", "long-reset");
    const id = ready.status?.id as string;
    const value = `2026-11-21T12:00:00Z-${"x".repeat(79)}`;
    expect(value).toHaveLength(100);
    await env.annotate("GpuVm", "long-reset", { "gpucloud.dev/reset-requested-at": value });
    const reset = await env.waitFor(
      "GpuVm",
      "long-reset",
      (o) => typeof o?.status?.lastResetRequestedAt === "string" && reasonOf(o) === "Available",
    );
    const recorded = reset?.status?.lastResetRequestedAt as string;
    expect(recorded.length).toBeLessThanOrEqual(64);
    expect(recorded.startsWith("2026-11-21T12:00:00Z-x")).toBe(true);
    // Several passes later (resyncs, own-write events): still one RESET.
    await sleep(1500);
    expect((await operationsOf(id)).filter((name) => name === "RESET")).toHaveLength(1);
    expect(condition(await env.get("GpuVm", "long-reset"), "Ready")?.status).toBe("True");
  });

  it("a 5,000-character cloud error message is shortened into status; the create is not sent again", async () => {
    await env.admin("PUT", "/faults", {
      operation_failures: [
        { family: "vm", operation_name: "CREATE", code: "quota_exceeded", message: "q".repeat(5000), count: 1 },
      ],
    });
    try {
      await env.apply("GpuVm", "long-error", vmSpec());
      const stalled = await env.waitFor("GpuVm", "long-error", (o) => reasonOf(o) === "OperationFailed");
      expect(condition(stalled, "Stalled")?.status).toBe("True");
      expect(String(stalled?.status?.lastError).length).toBeLessThanOrEqual(4096);
      expect(condition(stalled, "Ready")?.message?.length).toBeGreaterThan(1000);
      await sleep(1500);
      const creates = (await env.cloud<{ items: Operation[] }>("vms/operations")).items.filter(
        (op) => op.metadata.operation_name === "CREATE" && op.state === "FAILED",
      );
      expect(creates).toHaveLength(1);
    } finally {
      await env.admin("DELETE", "/faults");
    }
  });
});

describe("a status write the API server rejects", () => {
  it("stalls StatusRejected with an Event, and the RESET it was to record is never sent", async () => {
    await env.apply("GpuVm", "rejected", vmSpec());
    const ready = await env.waitReady("GpuVm", "rejected");
    const id = ready.status?.id as string;
    // The next status write of this object is refused with 422, as an API server does for a value the CRD forbids.
    env.double.faults.failNext(1, 422, { path: "/gpuvms/rejected/status" });
    await env.annotate("GpuVm", "rejected", { "gpucloud.dev/reset-requested-at": "2026-11-21T13:00:00Z" });
    const stalled = await env.waitFor("GpuVm", "rejected", (o) => reasonOf(o) === "StatusRejected");
    expect(condition(stalled, "Stalled")?.status).toBe("True");
    expect(condition(stalled, "Ready")?.message).toContain("not sent");
    await expect
      .poll(async () => (await eventsAbout(env, "rejected")).some((e) => e.startsWith("Warning StatusRejected")))
      .toBe(true);
    // No silent retry: the stall holds, and nothing was sent.
    await sleep(1500);
    expect((await operationsOf(id)).filter((name) => name === "RESET")).toHaveLength(0);
    expect(reasonOf(await env.get("GpuVm", "rejected"))).toBe("StatusRejected");
  });
});
