// Credentials and preconditions through the full operator: missing Secret, invalid key then rotation without a
// restart, the credentials-in-use finalizer on the Secret, and an organization without a payment method.
import { EventsV1Api, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { condition, type Env, NAMESPACE, reasonOf, startEnv, vmSpec, WATCHED } from "./harness.ts";

let env: Env | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

async function writeSecret(e: Env, data: Record<string, string>): Promise<void> {
  const body = { metadata: { name: "gpucloud-credentials", labels: WATCHED }, stringData: data };
  try {
    await e.core.createNamespacedSecret({ namespace: NAMESPACE, body });
  } catch {
    await e.core.replaceNamespacedSecret({ namespace: NAMESPACE, name: "gpucloud-credentials", body });
  }
}

describe("credentials", () => {
  it("missing → CredentialsMissing without a finalizer; the Secret appearing makes it Ready", async () => {
    env = await startEnv({ withoutCredentials: true });
    await env.apply("GpuNetwork", "early", {});
    const stalled = await env.waitFor("GpuNetwork", "early", (o) => reasonOf(o) === "CredentialsMissing");
    expect(condition(stalled, "Stalled")?.status).toBe("True");
    expect(condition(stalled, "Ready")?.message).toMatch(/gpucloud-credentials.*create it with the keys apiKey/);
    expect(stalled?.metadata.finalizers ?? []).toEqual([]);
    await writeSecret(env, { apiKey: env.sim.apiKey, projectId: env.sim.projectId, apiUrl: env.sim.url });
    await env.waitReady("GpuNetwork", "early");
  });

  it("a rejected key → CredentialsInvalid; rotating the Secret fixes it without a restart", async () => {
    env = await startEnv({ withoutCredentials: true });
    await writeSecret(env, { apiKey: "wrong-key-123456", projectId: env.sim.projectId, apiUrl: env.sim.url });
    await env.apply("GpuNetwork", "rotated", {});
    await env.waitFor("GpuNetwork", "rotated", (o) => reasonOf(o) === "CredentialsInvalid");
    await writeSecret(env, { apiKey: env.sim.apiKey, projectId: env.sim.projectId, apiUrl: env.sim.url });
    await env.waitReady("GpuNetwork", "rotated", 10_000);
  });

  it("the Secret carries credentials-in-use while objects use it, and loses it afterwards", async () => {
    env = await startEnv();
    await env.apply("GpuNetwork", "user", {});
    await env.waitReady("GpuNetwork", "user");
    const e = env;
    const finalizersOf = async () =>
      (await e.core.readNamespacedSecret({ namespace: NAMESPACE, name: "gpucloud-credentials" })).metadata
        ?.finalizers ?? [];
    await expect.poll(finalizersOf, { timeout: 5000 }).toContain("gpucloud.dev/credentials-in-use");
    await env.remove("GpuNetwork", "user");
    await env.waitFor("GpuNetwork", "user", (o) => o === undefined);
    await expect.poll(finalizersOf, { timeout: 5000 }).not.toContain("gpucloud.dev/credentials-in-use");
  });
});

describe("credentials gone for good", () => {
  it("an object deleted after its Secret vanished says how to let it go; deletionPolicy Orphan releases it", async () => {
    env = await startEnv();
    await env.apply("GpuNetwork", "stranded", {});
    await env.waitReady("GpuNetwork", "stranded");
    await env.stopOperator();
    const name = "gpucloud-credentials";
    await env.core.patchNamespacedSecret(
      { namespace: NAMESPACE, name, body: [{ op: "remove", path: "/metadata/finalizers" }] },
      setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
    );
    await env.core.deleteNamespacedSecret({ namespace: NAMESPACE, name });
    await env.startOperator();
    await env.remove("GpuNetwork", "stranded");
    const stuck = await env.waitFor("GpuNetwork", "stranded", (o) => reasonOf(o) === "CredentialsMissing");
    expect(condition(stuck, "Ready")?.message).toMatch(/cannot be deleted without them.*deletionPolicy: Orphan/);
    await env.patchSpec("GpuNetwork", "stranded", { deletionPolicy: "Orphan" });
    await env.waitFor("GpuNetwork", "stranded", (o) => o === undefined);
  });
});

describe("preconditions", () => {
  it("an organization without a payment method stalls PaymentMethodRequired with the billing link, creating nothing", async () => {
    env = await startEnv({ simulator: { paymentMethodValid: false } });
    await env.apply("GpuVm", "unpaid", vmSpec());
    const stalled = await env.waitFor("GpuVm", "unpaid", (o) => reasonOf(o) === "PaymentMethodRequired");
    expect(condition(stalled, "Ready")?.message).toMatch(/payment method.*https?:\/\//);
    const vms = await env.cloud<{ items: unknown[] }>("vms");
    expect(vms.items).toHaveLength(0);
    const events = env.kubeConfig.makeApiClient(EventsV1Api);
    const warnings = async () =>
      (await events.listNamespacedEvent({ namespace: NAMESPACE })).items
        .filter((event) => event.type === "Warning" && event.reason === "PaymentMethodRequired")
        .map((event) => event.regarding?.name);
    await expect.poll(warnings, { timeout: 5000 }).toContain("unpaid");
  });

  it("a payment method removed after a create was cached as fine stalls PaymentMethodRequired (not CredentialsInvalid), and recovers", async () => {
    env = await startEnv();
    await env.apply("GpuVm", "paid", vmSpec());
    await env.waitReady("GpuVm", "paid");
    // The Secret gets its in-use finalizer (a new resourceVersion, same credentials: the account stays); then one
    // more create leaves "payment method fine" in the account's cache.
    const e = env;
    const finalizersOf = async () =>
      (await e.core.readNamespacedSecret({ namespace: NAMESPACE, name: "gpucloud-credentials" })).metadata
        ?.finalizers ?? [];
    await expect.poll(finalizersOf, { timeout: 5000 }).toContain("gpucloud.dev/credentials-in-use");
    await env.apply("GpuVm", "paid-too", vmSpec());
    await env.waitReady("GpuVm", "paid-too");
    const state = (await env.admin("GET", "/state")) as { organizations: { id: string }[] };
    const organizationId = state.organizations[0]?.id ?? "";
    await env.admin("PUT", `/organizations/${organizationId}/payment-method`, { valid: false });
    await env.apply("GpuVm", "unpaid-later", vmSpec());
    const stalled = await env.waitFor(
      "GpuVm",
      "unpaid-later",
      (o) => reasonOf(o) !== undefined && reasonOf(o) !== "Creating",
    );
    expect(reasonOf(stalled)).toBe("PaymentMethodRequired");
    expect(condition(stalled, "Stalled")?.status).toBe("True");
    expect(condition(stalled, "Ready")?.message).toMatch(/payment method.*https?:\/\//);
    // Never reported as a credentials problem on the way (each condition change records an event).
    const events = env.kubeConfig.makeApiClient(EventsV1Api);
    const reasons = (await events.listNamespacedEvent({ namespace: NAMESPACE })).items
      .filter((event) => event.regarding?.name === "unpaid-later")
      .map((event) => event.reason);
    expect(reasons).toContain("PaymentMethodRequired");
    expect(reasons).not.toContain("CredentialsInvalid");
    await env.admin("PUT", `/organizations/${organizationId}/payment-method`, { valid: true });
    await env.waitReady("GpuVm", "unpaid-later", 15_000);
  });
});

describe("a server without the contract's extra endpoints", () => {
  it("stalls NotSupported when the network delete endpoint is missing, keeps the finalizer, and does not loop", async () => {
    env = await startEnv({
      simulator: {
        faults: { errors: [{ method: "DELETE", route: "/projects/:projectId/vpc/networks/:networkId", status: 405 }] },
      },
    });
    await env.apply("GpuNetwork", "legacy", {});
    await env.waitReady("GpuNetwork", "legacy");
    await env.admin("DELETE", "/requests");
    await env.remove("GpuNetwork", "legacy");
    const stalled = await env.waitFor("GpuNetwork", "legacy", (o) => reasonOf(o) === "NotSupported");
    expect(stalled?.metadata.finalizers).toContain("gpucloud.dev/finalizer");
    expect(condition(stalled, "Ready")?.message).toMatch(
      /does not support deleting a network \(DELETE \S+: answered HTTP 405\)/,
    );
    const e = env;
    const deleteCalls = async (): Promise<number> => {
      const counts = (await e.admin("GET", "/requests")) as { counts: Record<string, number> };
      return Object.entries(counts.counts)
        .filter(([route]) => route.startsWith("DELETE"))
        .reduce((sum, [, n]) => sum + n, 0);
    };
    // A few calls while the stall settles, then silence until the long retry: no hot loop.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const settled = await deleteCalls();
    expect(settled).toBeLessThanOrEqual(3);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(await deleteCalls()).toBe(settled);
  });
});
