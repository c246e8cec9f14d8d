// The echo of our own writes: a watch event that only reports a write the reconciler made starts no pass.

import { describe, expect, it } from "vitest";
import type { WriteResult } from "../../../src/controllers/core/kube-access.ts";
import type { ManagedObject } from "../../../src/controllers/core/object-model.ts";
import { GuardedWrites } from "../../../src/controllers/core/own-writes.ts";
import { condition, startEnv, vmSpec } from "../harness.ts";

function objectAt(resourceVersion: string): ManagedObject {
  return {
    metadata: { namespace: "default", name: "vm", resourceVersion, finalizers: [], annotations: {}, generation: 1 },
    spec: {},
    status: {},
  } as unknown as ManagedObject;
}

/** A Kubernetes access whose writes answer when the test says, with the versions the test names. */
function pendingWrites() {
  const answers: ((result: WriteResult) => void)[] = [];
  const kube = {
    writeStatus: () => new Promise<WriteResult>((resolve) => answers.push(resolve)),
    setFinalizer: () => new Promise<WriteResult>((resolve) => answers.push(resolve)),
  };
  return { kube, answer: (result: WriteResult) => answers.shift()?.(result) };
}

describe("OwnWrites.isEcho", () => {
  const key = "default/vm";

  it("recognises every version our writes made, and nothing else", async () => {
    const { kube, answer } = pendingWrites();
    const writes = new GuardedWrites(kube);
    const mr = objectAt("1");
    const finalizer = writes.setFinalizer(mr, true);
    answer({ type: "written", resourceVersion: "2" });
    await finalizer;
    const status = writes.writeStatus(mr, {});
    answer({ type: "written", resourceVersion: "3" });
    await status;
    expect(writes.isEcho(key, "5")).toBe(false); // somebody else's write
    expect(writes.isEcho(key, "2")).toBe(true);
    expect(writes.isEcho(key, "3")).toBe(true);
    // Caught up with our last write: the next event at any version is news.
    expect(writes.isEcho(key, "3")).toBe(false);
    expect(writes.isEcho("default/other", "2")).toBe(false);
  });

  it("answers an event that overtakes the write's answer once the answer names its version", async () => {
    const { kube, answer } = pendingWrites();
    const writes = new GuardedWrites(kube);
    const mr = objectAt("1");
    const write = writes.writeStatus(mr, {});
    const echo = writes.isEcho(key, "2");
    const foreign = writes.isEcho(key, "7");
    expect(echo).toBeInstanceOf(Promise);
    answer({ type: "written", resourceVersion: "2" });
    await write;
    expect(await echo).toBe(true);
    expect(await foreign).toBe(false);
  });

  it("lets a conflicting write's event through (somebody else wrote first)", async () => {
    const { kube, answer } = pendingWrites();
    const writes = new GuardedWrites(kube);
    const write = writes.writeStatus(objectAt("1"), {});
    const event = writes.isEcho(key, "2");
    answer({ type: "conflict" });
    await write;
    expect(await event).toBe(false);
  });

  it("wakes a pass that found the cache behind our writes with the echo it waits for", async () => {
    const { kube, answer } = pendingWrites();
    const writes = new GuardedWrites(kube);
    const mr = objectAt("1");
    const first = writes.writeStatus(mr, {});
    answer({ type: "written", resourceVersion: "2" });
    await first;
    const second = writes.writeStatus(mr, {});
    answer({ type: "written", resourceVersion: "3" });
    await second;
    // A pass started from a cache at version 2 (behind our write of 3) and waits for the cache to catch up.
    expect(writes.behind(key, "2")).toBe("3");
    expect(writes.isEcho(key, "3")).toBe(false);
  });
});

describe("a GpuVm on its way to Ready", () => {
  it("takes one pass to create and one to become Ready: the echoes of its own writes start none", async () => {
    const env = await startEnv();
    try {
      await env.apply("GpuVm", "echo-vm", vmSpec());
      const ready = await env.waitReady("GpuVm", "echo-vm");
      expect(condition(ready, "Ready")?.status).toBe("True");
      // Let every watch event of the last writes arrive.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const metrics = await env.manager.metrics.registry.getSingleMetricAsString("controller_runtime_reconcile_total");
      const passes = [...metrics.matchAll(/controller="gpuvm"[^}]*} (\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
      // Four writes (finalizer, create intent, operation, Ready), each echoed by a watch event. Before, each echo
      // started a pass (six or more in all); now: the create, the settled operation, at most one more.
      expect(passes).toBeGreaterThanOrEqual(2);
      expect(passes).toBeLessThanOrEqual(3);
    } finally {
      await env.close();
    }
  });
});
