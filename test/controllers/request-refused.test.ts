// A request the cloud refuses with a 4xx it will answer again the same way is terminal for that spec (issue #28,
// case 8): a startup script from a ConfigMap too large for the cloud's request limit (HTTP 413) stalls the GpuVm
// InvalidSpec with a message that says what to change, sends the create once, and keeps no create intent (the 413
// proves nothing was created).
import { afterEach, describe, expect, it } from "vitest";
import { condition, type Env, NAMESPACE, startEnv, vmSpec } from "./harness.ts";

let env: Env | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** The VM creates the operator sent, as its request metric counts them (the simulator refuses them unread). */
async function createCalls(e: Env): Promise<number> {
  const metric = await e.manager.metrics.registry.getSingleMetric("gpucloud_api_requests_total")?.get();
  return (metric?.values ?? [])
    .filter((value) => value.labels.method === "POST" && value.labels.route === "/projects/:projectId/vms")
    .reduce((sum, value) => sum + value.value, 0);
}

describe("a request the cloud refuses for good", () => {
  it("a startup script over the cloud's request limit (413) stalls InvalidSpec, sent once, its intent cleared", {
    timeout: 30_000,
  }, async () => {
    env = await startEnv({ simulator: { maxRequestBytes: 64 * 1024 } });
    await env.core.createNamespacedConfigMap({
      namespace: NAMESPACE,
      body: { metadata: { name: "boot" }, data: { "start.sh": `#!/bin/sh\n${"echo data\n".repeat(10_000)}` } },
    });
    await env.apply(
      "GpuVm",
      "big-script",
      vmSpec({ startupScriptRef: { kind: "ConfigMap", name: "boot", key: "start.sh" } }),
    );
    const stalled = await env.waitFor(
      "GpuVm",
      "big-script",
      (vm) => condition(vm, "Stalled")?.status === "True" && vm?.status?.observedGeneration === 1,
    );
    expect(condition(stalled, "Ready")?.reason).toBe("InvalidSpec");
    const message = condition(stalled, "Ready")?.message ?? "";
    expect(message).toMatch(/too large/);
    expect(message).toMatch(/65536 bytes/); // the limit, as the cloud said it
    expect(message).toMatch(/startup script \(100010 bytes, ConfigMap default\/boot key start\.sh\)/);
    expect(stalled?.status?.createPending).toBeUndefined();
    // Terminal: not sent again and again.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(await createCalls(env)).toBe(1);
    expect(condition(await env.get("GpuVm", "big-script"), "Ready")?.reason).toBe("InvalidSpec");
  });
});
