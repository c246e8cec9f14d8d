// Waiting states that only the user can end are Stalled with the fix in the message (not an endless Reconciling),
// and they still end by themselves once the user acts: the dependency index wakes the object when its target
// appears. The requeue of such a stall is made longer than each test here, so only a wake-up can move it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { condition, type Env, NAMESPACE, reasonOf, SSH_KEY, startEnv, vmSpec, WATCHED } from "./harness.ts";

let env: Env;
beforeAll(async () => {
  env = await startEnv({ timing: { dependencyMs: 120_000 } });
});
afterAll(async () => {
  await env?.close();
});

describe("a reference to something that does not exist", () => {
  it("a GpuDisk: Stalled ReferenceNotFound naming the field, then Ready once the disk is created", async () => {
    await env.apply("GpuVm", "early", vmSpec({ disks: [{ diskRef: { name: "later" } }] }));
    const waiting = await env.waitFor("GpuVm", "early", (o) => reasonOf(o) === "ReferenceNotFound");
    expect(condition(waiting, "Stalled")?.status).toBe("True");
    expect(condition(waiting, "Reconciling")?.status).toBe("False");
    expect(condition(waiting, "Ready")?.message).toBe(
      "GpuDisk default/later does not exist: create it or correct spec.disks[0]; this object proceeds by itself once it exists",
    );
    expect(condition(waiting, "Synced")).toMatchObject({ status: "False", reason: "ReferenceNotFound" });

    await env.apply("GpuDisk", "later", { size: "100GiB", location: "us-east1-a" });
    const ready = await env.waitReady("GpuVm", "early", 15_000);
    expect(condition(ready, "Stalled")?.status).toBe("False");
    expect(condition(ready, "Synced")).toMatchObject({
      status: "True",
      reason: "Available",
      message: "the cloud resource matches the spec",
    });
    await env.remove("GpuVm", "early");
    await env.waitFor("GpuVm", "early", (o) => o === undefined, 10_000);
    await env.remove("GpuDisk", "later");
    await env.waitFor("GpuDisk", "later", (o) => o === undefined, 10_000);
  });

  it("a Secret key with the SSH key: Stalled with the Secret named, then Ready once the Secret is there", async () => {
    const spec = vmSpec({ sshPublicKeySecretRef: { name: "trainer-key", key: "id.pub" } });
    delete spec.sshPublicKey;
    await env.apply("GpuVm", "keyed", spec);
    const waiting = await env.waitFor("GpuVm", "keyed", (o) => reasonOf(o) === "ReferenceNotFound");
    expect(condition(waiting, "Stalled")?.status).toBe("True");
    expect(condition(waiting, "Ready")?.message).toMatch(
      /^Secret default\/trainer-key key id\.pub \(the operator reads only Secrets labelled gpucloud\.dev\/watch=true\) does not exist: create it or correct spec\.sshPublicKeySecretRef/,
    );
    await env.core.createNamespacedSecret({
      namespace: NAMESPACE,
      body: { metadata: { name: "trainer-key", labels: WATCHED }, stringData: { "id.pub": SSH_KEY } },
    });
    await env.waitReady("GpuVm", "keyed", 15_000);
    await env.remove("GpuVm", "keyed");
    await env.waitFor("GpuVm", "keyed", (o) => o === undefined, 10_000);
  });
});
