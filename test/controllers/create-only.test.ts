// Create-only values are never silently ignored: inline ones are immutable in the CRD (the API refuses a change
// and says what to do), values from a Secret/ConfigMap that change later show as UpToDate=False with an Event,
// and a VM re-created after it vanished reads its create inputs again (no internal error reaches the user).
// Connection details are written only to a Secret/ConfigMap the GpuVm wrote itself, and go with it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  condition,
  type Env,
  eventsAbout,
  NAMESPACE,
  reasonOf,
  SSH_KEY,
  startEnv,
  vmSpec,
  WATCHED,
} from "./harness.ts";

let env: Env;
beforeAll(async () => {
  env = await startEnv();
});
afterAll(async () => {
  await env?.close();
});

const OTHER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHNlY29uZGtleWZvcnRoZW9wZXJhdG9ydGVzdHM other@example";

async function keySecret(name: string, key: string): Promise<void> {
  await env.core.createNamespacedSecret({
    namespace: NAMESPACE,
    body: { metadata: { name, labels: WATCHED }, stringData: { key } },
  });
}

async function setKey(name: string, key: string): Promise<void> {
  await env.core.replaceNamespacedSecret({
    name,
    namespace: NAMESPACE,
    body: { metadata: { name, namespace: NAMESPACE, labels: WATCHED }, stringData: { key } },
  });
}

function vmWithKeyFrom(secret: string): Record<string, unknown> {
  const { sshPublicKey: _inline, ...spec } = vmSpec();
  return { ...spec, sshPublicKeySecretRef: { name: secret, key: "key" } };
}

describe("create-only fields given inline", () => {
  it.each([
    ["image", "ubuntu24.04"],
    ["sshPublicKey", OTHER_KEY],
    ["startupScript", "#!/bin/sh\necho changed"],
  ])("%s cannot change: the API refuses it and says what to do instead", async (field, value) => {
    const name = `inline-${field.toLowerCase()}`;
    await env.apply("GpuVm", name, vmSpec({ startupScript: "#!/bin/sh\necho hi" }));
    await env.waitReady("GpuVm", name);
    const refused = await env.patchSpec("GpuVm", name, { [field]: value }).then(
      () => "accepted",
      (error: unknown) => String((error as { body?: unknown }).body ?? error),
    );
    expect(refused).toContain(`${field} is immutable`);
    expect(refused).toContain("create a new GpuVm");
  });
});

describe("create-only values from a Secret", () => {
  it("a changed SSH key shows UpToDate=False with an Event (Ready stays True); restoring it clears it", async () => {
    await keySecret("trainer-key", SSH_KEY);
    await env.apply("GpuVm", "keyed", vmWithKeyFrom("trainer-key"));
    const ready = await env.waitReady("GpuVm", "keyed");
    expect(condition(ready, "UpToDate")).toMatchObject({ status: "True", reason: "CreateOnlyFieldsApplied" });

    await setKey("trainer-key", OTHER_KEY);
    const changed = await env.waitFor("GpuVm", "keyed", (o) => condition(o, "UpToDate")?.status === "False");
    expect(condition(changed, "UpToDate")?.reason).toBe("CreateOnlyFieldChanged");
    expect(condition(changed, "UpToDate")?.message).toContain("sshPublicKey (Secret default/trainer-key key key)");
    expect(condition(changed, "Ready")?.status).toBe("True");
    expect(condition(changed, "Stalled")?.status).toBe("False");
    expect(condition(changed, "Reconciling")?.status).toBe("False");
    await expect
      .poll(async () => (await eventsAbout(env, "keyed")).some((e) => e.startsWith("Warning CreateOnlyFieldChanged")))
      .toBe(true);

    await setKey("trainer-key", SSH_KEY);
    await env.waitFor("GpuVm", "keyed", (o) => condition(o, "UpToDate")?.status === "True");
  });

  it("a VM gone from the cloud is created again with its inputs read anew, never an internal error", async () => {
    await keySecret("again-key", SSH_KEY);
    // Checked every 10 s (the floor of the annotation), so that the vanished VM is seen before the 30 s resync.
    await env.apply("GpuVm", "again", vmWithKeyFrom("again-key"), { "gpucloud.dev/sync-period": "10s" });
    const ready = await env.waitReady("GpuVm", "again");
    await env.admin("DELETE", `/resources/vms/${ready.status?.id as string}`);
    const seen: string[] = [];
    const recreated = await env.waitFor(
      "GpuVm",
      "again",
      (o) => {
        seen.push(`${reasonOf(o)}: ${condition(o, "Ready")?.message ?? ""}`);
        const id = o?.status?.id;
        return condition(o, "Ready")?.status === "True" && id !== undefined && id !== ready.status?.id;
      },
      25_000,
    );
    expect(recreated?.status?.id).toBeDefined();
    expect(seen.filter((line) => /ApiUnavailable|InternalError|before resolve/.test(line))).toEqual([]);
    // A state shown only between two looks is still in the events.
    const events = await eventsAbout(env, "again");
    expect(events.filter((line) => /ApiUnavailable|InternalError|before resolve/.test(line))).toEqual([]);
  }, 60_000);
});

describe("connection details", () => {
  it("are written again at once when someone deletes them, not at the next resync (30 s here)", async () => {
    await env.apply("GpuVm", "publishing", vmSpec({ connectionDetails: { secretName: "publishing-ssh" } }));
    await env.waitReady("GpuVm", "publishing");
    const read = () => env.core.readNamespacedSecret({ namespace: NAMESPACE, name: "publishing-ssh" });
    const first = await read();
    // Past the passes that follow Ready (the echo of its write, the settle of the create): only a watch event of
    // the Secret can wake the GpuVm now.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    await env.core.deleteNamespacedSecret({ namespace: NAMESPACE, name: "publishing-ssh" });
    const deletedAt = Date.now();
    let again: Awaited<ReturnType<typeof read>> | undefined;
    while (again === undefined && Date.now() - deletedAt < 10_000) {
      again = await read().catch(() => undefined);
      if (again === undefined) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(again?.metadata?.uid).toBeDefined();
    expect(again?.metadata?.uid).not.toBe(first.metadata?.uid);
    expect(again?.data).toEqual(first.data);
    await env.remove("GpuVm", "publishing");
    await env.waitFor("GpuVm", "publishing", (o) => o === undefined);
  });

  it("never overwrite a Secret the GpuVm did not write; its own go with it when it is deleted", async () => {
    await env.core.createNamespacedSecret({
      namespace: NAMESPACE,
      body: { metadata: { name: "db-creds" }, stringData: { password: "s3cret" } },
    });
    await env.apply("GpuVm", "intruding", vmSpec({ connectionDetails: { secretName: "db-creds" } }));
    const stalled = await env.waitFor("GpuVm", "intruding", (o) => reasonOf(o) === "NameConflict");
    expect(condition(stalled, "Stalled")?.status).toBe("True");
    expect(condition(stalled, "Ready")?.message).toContain(
      "Secret default/db-creds exists and was not written by this GpuVm",
    );
    const foreign = await env.core.readNamespacedSecret({ namespace: NAMESPACE, name: "db-creds" });
    expect(Object.keys(foreign.data ?? {})).toEqual(["password"]);

    await env.apply("GpuVm", "owning", vmSpec({ connectionDetails: { configMapName: "owning-ssh" } }));
    await env.waitReady("GpuVm", "owning");
    const own = await env.core.readNamespacedConfigMap({ namespace: NAMESPACE, name: "owning-ssh" });
    expect(own.metadata?.labels?.["app.kubernetes.io/managed-by"]).toBe("gpuvm-operator");
    await env.remove("GpuVm", "owning");
    await env.remove("GpuVm", "intruding");
    await env.waitFor("GpuVm", "owning", (o) => o === undefined);
    await env.waitFor("GpuVm", "intruding", (o) => o === undefined);
    await expect(env.core.readNamespacedConfigMap({ namespace: NAMESPACE, name: "owning-ssh" })).rejects.toThrow();
    const untouched = await env.core.readNamespacedSecret({ namespace: NAMESPACE, name: "db-creds" });
    expect(Buffer.from(untouched.data?.password ?? "", "base64").toString()).toBe("s3cret");
  });
});
