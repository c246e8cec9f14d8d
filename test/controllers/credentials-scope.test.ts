// Credentials that are going or gone serve only deletions; a Secret held by the finalizer says who holds it; a
// rejected key names the Secret and key; the default Secret is read whatever namespaces the operator watches.
import { afterEach, describe, expect, it } from "vitest";
import type { Vm } from "../../src/cloud/wire.ts";
import {
  condition,
  type Env,
  eventsAbout,
  type ManagedView,
  NAMESPACE,
  reasonOf,
  startEnv,
  vmSpec,
  WATCHED,
} from "./harness.ts";

let env: Env | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const SECRET = "gpucloud-credentials";

async function cloudVmNames(e: Env): Promise<string[]> {
  return (await e.cloud<{ items: Vm[] }>("vms?limit=500")).items.map((vm) => vm.name);
}

describe("a credentials Secret being deleted", () => {
  it("names who holds it, creates nothing new with it, and still deletes what was made with it", async () => {
    env = await startEnv();
    const e = env;
    await e.apply("GpuVm", "before", vmSpec());
    await e.waitReady("GpuVm", "before");
    const finalizers = async () =>
      (await e.core.readNamespacedSecret({ namespace: NAMESPACE, name: SECRET })).metadata?.finalizers ?? [];
    await expect.poll(finalizers).toContain("gpucloud.dev/credentials-in-use");

    // `kubectl delete secret` waits on the finalizer; the Secret says why and who holds it.
    await e.core.deleteNamespacedSecret({ namespace: NAMESPACE, name: SECRET });
    await expect
      .poll(async () => (await eventsAbout(e, SECRET)).join("\n"))
      .toMatch(/Warning CredentialsInUse: deletion waits .*GpuVm default\/before/);

    // A new object is not created with credentials on their way out.
    await e.apply("GpuVm", "after", vmSpec());
    const stalled = await e.waitFor("GpuVm", "after", (o) => reasonOf(o) === "CredentialsMissing");
    expect(condition(stalled, "Ready")?.message).toContain(`Secret ${NAMESPACE}/${SECRET}`);
    expect(condition(stalled, "Ready")?.message).toContain("only to delete");
    expect(await cloudVmNames(e)).not.toContain("default-after");

    // The object made with them is still deleted with them; then the Secret goes.
    await e.remove("GpuVm", "before");
    await e.waitFor("GpuVm", "before", (o) => o === undefined, 10_000);
    expect(await cloudVmNames(e)).not.toContain("default-before");
    await expect
      .poll(async () =>
        e.core.readNamespacedSecret({ namespace: NAMESPACE, name: SECRET }).then(
          () => "present",
          () => "gone",
        ),
      )
      .toBe("gone");

    // Gone for good: the cached credentials still create nothing.
    await e.annotate("GpuVm", "after", { touch: "1" });
    const still = await e.waitFor("GpuVm", "after", (o) => reasonOf(o) === "CredentialsMissing");
    expect(still?.metadata.finalizers ?? []).toEqual([]);
    expect(await cloudVmNames(e)).not.toContain("default-after");
  });
});

describe("a rejected key", () => {
  it("names the Secret and the key to fix", async () => {
    env = await startEnv({ withoutCredentials: true });
    await env.core.createNamespacedSecret({
      namespace: NAMESPACE,
      body: {
        metadata: { name: SECRET, labels: WATCHED },
        stringData: { apiKey: "wrong-key-123456", projectId: env.sim.projectId, apiUrl: env.sim.url },
      },
    });
    await env.apply("GpuNetwork", "wrong", {});
    const stalled = await env.waitFor("GpuNetwork", "wrong", (o) => reasonOf(o) === "CredentialsInvalid");
    expect(condition(stalled, "Ready")?.message).toContain(`Secret ${NAMESPACE}/${SECRET} (key apiKey)`);
    expect(condition(stalled, "Ready")?.message).toContain("correct the key");
  });
});

describe("the default credentials Secret", () => {
  it("is read from the operator's namespace even when only other namespaces are watched", async () => {
    env = await startEnv({
      withoutCredentials: true,
      start: false,
      config: { watchNamespaces: ["team-a"], credentialsSecret: { namespace: "gpu-system", name: "operator-creds" } },
    });
    for (const name of ["team-a", "gpu-system"]) {
      await env.core.createNamespace({ body: { metadata: { name } } }).catch(() => undefined);
    }
    await env.core.createNamespacedSecret({
      namespace: "gpu-system",
      body: {
        metadata: { name: "operator-creds" },
        stringData: { apiKey: env.sim.apiKey, projectId: env.sim.projectId, apiUrl: env.sim.url },
      },
    });
    await env.startOperator();
    await env.custom.createNamespacedCustomObject({
      group: "gpucloud.dev",
      version: "v1alpha1",
      plural: "gpunetworks",
      namespace: "team-a",
      body: { apiVersion: "gpucloud.dev/v1alpha1", kind: "GpuNetwork", metadata: { name: "net" }, spec: {} },
    });
    const read = async () =>
      (await env?.custom.getNamespacedCustomObject({
        group: "gpucloud.dev",
        version: "v1alpha1",
        plural: "gpunetworks",
        namespace: "team-a",
        name: "net",
      })) as ManagedView;
    await expect.poll(async () => reasonOf(await read()), { timeout: 8000 }).toBe("Available");
  });
});
