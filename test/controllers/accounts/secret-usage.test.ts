// The credentials-usage index: O(1) per informer event, a Secret woken only when an object starts or stops
// using it, and a reconcile that counts users over the distinct references instead of every object (the N²
// of issue #17: every event of any object re-parsed every object).
import { describe, expect, it } from "vitest";
import { CredentialsUsage } from "../../../src/controllers/accounts/secret-usage.ts";
import { sharedInterner } from "../../../src/util/intern.ts";
import { condition, NAMESPACE, startEnv, vmSpec } from "../harness.ts";

const FINALIZER = "gpucloud.dev/finalizer";

function object(name: string, options: { finalizer?: boolean; ref?: string; namespace?: string } = {}) {
  return {
    metadata: {
      namespace: options.namespace ?? "team",
      name,
      finalizers: options.finalizer === false ? [] : [FINALIZER],
    },
    spec: options.ref === undefined ? {} : { credentialsRef: { name: options.ref } },
  };
}

describe("CredentialsUsage", () => {
  const local = (namespace: string, refName: string | undefined) => ({
    namespace,
    name: refName ?? "gpucloud-credentials",
  });

  it("holds one string for a reference many objects share, not one per object", () => {
    const usage = new CredentialsUsage(local);
    const hits = sharedInterner.hits;
    for (let i = 0; i < 100; i++) usage.apply("GpuVm", "add", object(`vm-${i}`));
    expect(sharedInterner.hits - hits).toBeGreaterThanOrEqual(99);
    expect(usage.usersOf("team", "gpucloud-credentials").count).toBe(100);
  });

  it("counts the objects holding our finalizer per Secret, and says which Secrets changed", () => {
    const usage = new CredentialsUsage(local);
    expect(usage.apply("GpuVm", "add", object("a", { finalizer: false }))).toEqual([]);
    expect(usage.usersOf("team", "gpucloud-credentials").count).toBe(0);
    expect(usage.apply("GpuVm", "update", object("a"))).toEqual(["team/gpucloud-credentials"]);
    expect(usage.apply("GpuVm", "update", object("a"))).toEqual([]); // a status write: nothing to look at
    expect(usage.apply("GpuDisk", "add", object("a"))).toEqual(["team/gpucloud-credentials"]);
    expect(usage.usersOf("team", "gpucloud-credentials").count).toBe(2);
    // Moving to another Secret wakes both.
    expect(usage.apply("GpuVm", "update", object("a", { ref: "other" }))).toEqual([
      "team/gpucloud-credentials",
      "team/other",
    ]);
    expect(usage.usersOf("team", "other", 10)).toEqual({ count: 1, named: ["GpuVm team/a"] });
    expect(usage.apply("GpuDisk", "delete", object("a"))).toEqual(["team/gpucloud-credentials"]);
    expect(usage.usersOf("team", "gpucloud-credentials").count).toBe(0);
    expect(usage.apply("GpuVm", "update", object("a", { ref: "other", finalizer: false }))).toEqual(["team/other"]);
    expect(usage.usersOf("team", "other").count).toBe(0);
  });

  it("an object whose spec does not parse still holds its credentials (its deletion needs them)", () => {
    const usage = new CredentialsUsage(local);
    const invalid = { ...object("broken"), spec: { type: 42, credentialsRef: { name: 7 } } };
    expect(usage.apply("GpuVm", "add", invalid)).toEqual(["team/gpucloud-credentials"]);
  });

  it("resolves references at count time: a namespace without its own Secret uses the operator default", () => {
    const present = new Set(["a/gpucloud-credentials"]);
    const usage = new CredentialsUsage((namespace, refName) => {
      const name = refName ?? "gpucloud-credentials";
      return present.has(`${namespace}/${name}`) || name !== "gpucloud-credentials"
        ? { namespace, name }
        : { namespace: "ops", name: "default-creds" };
    });
    usage.apply("GpuVm", "add", object("x", { namespace: "a" }));
    usage.apply("GpuVm", "add", object("y", { namespace: "b" }));
    expect(usage.usersOf("ops", "default-creds").count).toBe(1);
    expect(usage.usersOf("a", "gpucloud-credentials").count).toBe(1);
    present.delete("a/gpucloud-credentials");
    expect(usage.usersOf("ops", "default-creds").count).toBe(2);
  });

  it("costs one resolution per distinct reference, whatever the number of objects", () => {
    let resolutions = 0;
    const usage = new CredentialsUsage((namespace, refName) => {
      resolutions++;
      return local(namespace, refName);
    });
    for (let i = 0; i < 5000; i++) usage.apply("GpuVm", "add", object(`vm-${i}`));
    resolutions = 0;
    expect(usage.usersOf("team", "gpucloud-credentials").count).toBe(5000);
    expect(resolutions).toBe(1);
    for (let i = 0; i < 5000; i++) usage.apply("GpuVm", "update", object(`vm-${i}`));
    expect(resolutions).toBe(1); // updates that change nothing resolve nothing
  });
});

describe("credentials-usage controller", () => {
  it("is not woken by every write of every object: a few reconciles for many objects becoming Ready", async () => {
    const env = await startEnv();
    try {
      const count = 12;
      for (let i = 0; i < count; i++) await env.apply("GpuVm", `vm-${i}`, vmSpec());
      for (let i = 0; i < count; i++) await env.waitReady("GpuVm", `vm-${i}`);
      const finalizersOf = async () =>
        (await env.core.readNamespacedSecret({ namespace: NAMESPACE, name: "gpucloud-credentials" })).metadata
          ?.finalizers ?? [];
      await expect.poll(finalizersOf, { timeout: 5000 }).toContain("gpucloud.dev/credentials-in-use");
      const metrics = await env.manager.metrics.registry.getSingleMetricAsString("controller_runtime_reconcile_total");
      const reconciles = [...metrics.matchAll(/controller="credentials-usage"[^}]*} (\d+)/g)].reduce(
        (sum, match) => sum + Number(match[1]),
        0,
      );
      // Each VM writes its status several times on the way to Ready; before the index every one of those writes
      // woke the Secret (and each wake re-read every object). Then each new user woke it once; now only the
      // first user does (the finalizer goes on), the others change nothing.
      expect(reconciles).toBeGreaterThan(0);
      expect(reconciles).toBeLessThanOrEqual(3);
      const ready = await env.get("GpuVm", "vm-0");
      expect(condition(ready, "Ready")?.status).toBe("True");
    } finally {
      await env.close();
    }
  });
});
