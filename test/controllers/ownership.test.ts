// One owner per cloud resource, through the real runtime: default names that cannot collide, a second claimant
// of a name or a resource stalled NameConflict (and never touching the resource), adoption by name only with
// proof, and a resource deleted under an object noticed at once.
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GROUP, VERSION } from "../../src/api/common.ts";
import type { Operation, Vm } from "../../src/cloud/wire.ts";
import {
  condition,
  createIn,
  type Env,
  type ManagedView,
  NAMESPACE,
  readIn,
  reasonOf,
  startEnv,
  vmSpec,
  waitIn,
} from "./harness.ts";

const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

let env: Env;
beforeAll(async () => {
  // Objects outside `default` use the operator's default credentials Secret.
  env = await startEnv({ config: { credentialsSecret: { namespace: NAMESPACE, name: "gpucloud-credentials" } } });
});
afterAll(async () => {
  await env?.close();
});

const cloudVms = async (): Promise<Vm[]> => (await env.cloud<{ items: Vm[] }>("vms?limit=500")).items;
const vmOperations = async (id: string): Promise<Operation[]> =>
  (await env.cloud<{ items: Operation[] }>(`vms/operations?resource_id=${id}`)).items;

async function namespace(name: string): Promise<void> {
  await env.core.createNamespace({ body: { metadata: { name } } }).catch(() => undefined);
}

const ref = (namespaceName: string, name: string) => ({
  group: GROUP,
  version: VERSION,
  plural: "gpuvms",
  namespace: namespaceName,
  name,
});
const applyVm = (
  namespaceName: string,
  name: string,
  spec: Record<string, unknown>,
  annotations?: Record<string, string>,
) => createIn(env, namespaceName, "GpuVm", name, spec, annotations);
const getVm = (namespaceName: string, name: string) => readIn(env, namespaceName, "GpuVm", name);
const waitVm = (
  namespaceName: string,
  name: string,
  check: (o: ManagedView | undefined) => boolean,
  timeoutMs = 8000,
) => waitIn(env, namespaceName, "GpuVm", name, check, timeoutMs);

describe("default cloud names", () => {
  it("default/reset-vm and default-reset/vm get a VM each", async () => {
    await namespace("default-reset");
    await applyVm("default", "reset-vm", vmSpec());
    await applyVm("default-reset", "vm", vmSpec());
    const first = await waitVm("default", "reset-vm", (o) => condition(o, "Ready")?.status === "True");
    const second = await waitVm("default-reset", "vm", (o) => condition(o, "Ready")?.status === "True");
    expect(first?.status?.id).not.toBe(second?.status?.id);
    expect(first?.status?.cloudName).toBe("default-reset-vm");
    expect(second?.status?.cloudName).toMatch(/^default-reset-vm-[0-9a-f]{8}$/);
    const names = (await cloudVms()).map((vm) => vm.name);
    expect(names).toContain(first?.status?.cloudName);
    expect(names).toContain(second?.status?.cloudName);
  });
});

describe("a second claimant", () => {
  it("of a spec.cloudName stalls NameConflict naming the first, and its changes and deletion never touch the VM", async () => {
    await namespace("team-b");
    await applyVm("default", "owner", vmSpec({ cloudName: "shared-vm" }));
    const owner = await waitVm("default", "owner", (o) => condition(o, "Ready")?.status === "True");
    const id = owner?.status?.id as string;

    await applyVm("team-b", "intruder", vmSpec({ cloudName: "shared-vm" }));
    const intruder = await waitVm("team-b", "intruder", (o) => reasonOf(o) === "NameConflict");
    expect(condition(intruder, "Stalled")?.status).toBe("True");
    expect(condition(intruder, "Ready")?.status).toBe("False");
    // Another namespace's object is not named to this tenant; the claim is, for an administrator.
    expect(condition(intruder, "Ready")?.message).toContain(
      "a GpuVm in another namespace (GpuCloudClaim default/gpuvm-",
    );
    expect(condition(intruder, "Ready")?.message).not.toContain("owner");
    expect(intruder?.status?.id).toBeUndefined();

    // A type change of the intruder must not STOP/UPDATE/START the owner's VM.
    await env.custom.patchNamespacedCustomObject(
      { ...ref("team-b", "intruder"), body: { spec: { type: "a100.2x" } } },
      MERGE,
    );
    await waitVm("team-b", "intruder", (o) => o?.status?.observedGeneration === 2 && reasonOf(o) === "NameConflict");
    // Deleting the intruder releases it and leaves the owner's VM alone.
    await env.custom.deleteNamespacedCustomObject(ref("team-b", "intruder"));
    await waitVm("team-b", "intruder", (o) => o === undefined);
    expect((await vmOperations(id)).map((op) => op.metadata.operation_name)).toEqual(["CREATE"]);
    expect((await cloudVms()).filter((vm) => vm.name === "shared-vm").map((vm) => vm.id)).toEqual([id]);
    expect(condition(await getVm("default", "owner"), "Ready")?.status).toBe("True");
  });

  it("by a status.id edited to another object's VM is not acted on: the claim says whose it is", async () => {
    await applyVm("default", "holder", vmSpec({ cloudName: "held-vm" }));
    const holder = await waitVm("default", "holder", (o) => condition(o, "Ready")?.status === "True");
    const id = holder?.status?.id as string;
    // A user with /status rights points a second object at the first one's VM.
    await applyVm("default", "sharer", vmSpec({ cloudName: "held-vm" }), { "gpucloud.dev/paused": "true" });
    await waitVm("default", "sharer", (o) => reasonOf(o) === "Paused");
    await env.custom.patchNamespacedCustomObjectStatus(
      { ...ref("default", "sharer"), body: { status: { id, projectId: env.sim.projectId, cloudName: "held-vm" } } },
      MERGE,
    );
    await env.custom.patchNamespacedCustomObject(
      {
        ...ref("default", "sharer"),
        body: { spec: { type: "a100.2x" }, metadata: { annotations: { "gpucloud.dev/paused": null } } },
      },
      MERGE,
    );
    const sharer = await waitVm("default", "sharer", (o) => reasonOf(o) === "NameConflict");
    expect(condition(sharer, "Ready")?.message).toContain(`GpuVm default/holder manages cloud resource ${id}`);
    expect(sharer?.status?.id).toBeUndefined();
    expect((await vmOperations(id)).map((op) => op.metadata.operation_name)).toEqual(["CREATE"]);

    // The owner deletes the VM and gives up its claim; the other object hears of it at once (not at its next
    // resync) and makes a VM of its own under the name, now free.
    await env.remove("GpuVm", "holder");
    await waitVm("default", "holder", (o) => o === undefined);
    const own = await waitVm("default", "sharer", (o) => condition(o, "Ready")?.status === "True", 8000);
    expect(own?.status?.id).not.toBe(id);
  });
});

describe("adoption by name", () => {
  it("never takes a VM it did not create; spec.id adopts it explicitly", async () => {
    const created = (await env.admin("POST", `/projects/${env.sim.projectId}/vms`, {
      vms: [{ name: "default-stranger", type: "a100.1x", location: "us-east1-a" }],
    })) as { vms?: { id: string }[] } | { id: string }[];
    const id = (await cloudVms()).find((vm) => vm.name === "default-stranger")?.id;
    expect(id, JSON.stringify(created)).toBeDefined();
    await env.apply("GpuVm", "stranger", vmSpec());
    const conflicted = await env.waitFor("GpuVm", "stranger", (o) => reasonOf(o) === "NameConflict");
    expect(condition(conflicted, "Ready")?.message).toContain(`set spec.id: ${id}`);
    expect(conflicted?.status?.id).toBeUndefined();
    expect((await cloudVms()).filter((vm) => vm.name === "default-stranger")).toHaveLength(1);

    await env.patchSpec("GpuVm", "stranger", { id });
    const adopted = await env.waitReady("GpuVm", "stranger");
    expect(adopted.status?.id).toBe(id);
  });
});

describe("a VM deleted under its object", () => {
  // The background list of ADR 0024 every 2 s here (30 s by default), the resync at its default: the deletion is
  // noticed at the next list, not at the next resync. (A settled create of another object reads no list: its
  // operation's answer carries its own VM.)
  let polled: Env;
  beforeAll(async () => {
    polled = await startEnv({
      config: { credentialsSecret: { namespace: NAMESPACE, name: "gpucloud-credentials" }, pollIntervalMs: 2000 },
    });
  });
  afterAll(async () => {
    await polled?.close();
  });

  it("is noticed at the next list that shows it gone, not at the next resync", async () => {
    await polled.apply("GpuVm", "doomed", vmSpec());
    const ready = await polled.waitReady("GpuVm", "doomed");
    // Let the passes woken by our own writes run out: from here on only the lists and the resync look again.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await polled.admin("DELETE", `/resources/vms/${ready.status?.id as string}`);
    // Said within a list or two, well before the resync; created again once the absence is confirmed (2 s here).
    const noticed = await polled.waitFor("GpuVm", "doomed", (o) => reasonOf(o) === "WaitingForOperation", 6000);
    expect(condition(noticed, "Ready")?.message).toContain(`cloud resource ${ready.status?.id} is not found since`);
    await polled.waitFor(
      "GpuVm",
      "doomed",
      (o) => o?.status?.id !== undefined && o.status.id !== ready.status?.id,
      8000,
    );
  });
});
