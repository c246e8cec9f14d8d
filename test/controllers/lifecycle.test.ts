// Journeys per kind through the real runtime: simulator (latency 0) + Kubernetes API test double over HTTP.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Disk, FirewallRule, Vm, VpcNetwork } from "../../src/cloud/wire.ts";
import { condition, type Env, reasonOf, startEnv, vmSpec } from "./harness.ts";

let env: Env;
beforeAll(async () => {
  // A short sync period: drift made behind the operator's back is seen at the next resync.
  env = await startEnv({ config: { syncPeriodMs: 1000 } });
});
afterAll(async () => {
  await env?.close();
});

const items = <T>(answer: { items: T[] } | T[]): T[] => (Array.isArray(answer) ? answer : answer.items);
const cloudVms = async (): Promise<Vm[]> => items(await env.cloud<{ items: Vm[] }>("vms?limit=500"));
const cloudDisks = async (): Promise<Disk[]> => items(await env.cloud<{ items: Disk[] }>("disks"));
const cloudNetworks = async (): Promise<VpcNetwork[]> =>
  items(await env.cloud<{ items: VpcNetwork[] }>("vpc/networks"));
const cloudRules = async (): Promise<FirewallRule[]> =>
  items(await env.cloud<{ items: FirewallRule[] }>("vpc/firewall-rules"));

describe("GpuNetwork", () => {
  it("creates, reports Ready with observedGeneration, and deletes", async () => {
    await env.apply("GpuNetwork", "net-a", { cidr: "10.1.0.0/16" });
    const ready = await env.waitReady("GpuNetwork", "net-a");
    expect(ready.status?.observedGeneration).toBe(ready.metadata.generation);
    expect(condition(ready, "Stalled")?.status).toBe("False");
    expect(ready.metadata.finalizers).toContain("gpucloud.dev/finalizer");
    expect((await cloudNetworks()).filter((n) => n.name === "default-net-a")).toHaveLength(1);
    const metrics = await env.manager.metrics.registry.metrics();
    expect(metrics).toMatch(/gpucloud_managed_resources\{kind="GpuNetwork",ready="True"\} 1/);
    expect(metrics).toContain(
      'gpucloud_managed_resource_conditions{namespace="default",kind="GpuNetwork",type="Ready",status="True",reason="Available"} 1',
    );
    expect(metrics).toMatch(/gpucloud_api_requests_total\{method="POST",route="[^"]*vpc\/networks",code="200"\} 1/);
    await env.remove("GpuNetwork", "net-a");
    await env.waitFor("GpuNetwork", "net-a", (o) => o === undefined);
    expect((await cloudNetworks()).filter((n) => n.name === "default-net-a")).toHaveLength(0);
  });
});

describe("GpuDisk", () => {
  it("a disk deleted while its GpuVm still lists it stalls on both sides with the fix, and goes once the VM lets go", async () => {
    await env.apply("GpuDisk", "attached", { size: "100GiB", location: "us-east1-a" });
    await env.apply("GpuVm", "holder", vmSpec({ disks: [{ diskRef: { name: "attached" } }] }));
    await env.waitReady("GpuVm", "holder", 10_000);
    const disk = await env.waitFor(
      "GpuDisk",
      "attached",
      (o) => ((o?.status?.attachedTo as unknown[] | undefined) ?? []).length > 0,
    );
    // The Attached column and the attachment name the GpuVm, not only the cloud VM id.
    expect(disk?.status?.printableAttachedTo).toBe("holder");
    expect(disk?.status?.attachedTo).toEqual([expect.objectContaining({ gpuVm: "holder", mode: "read-write" })]);
    const holder = await env.get("GpuVm", "holder");
    expect(holder?.status?.attachedDisks).toEqual([expect.objectContaining({ gpuDisk: "attached" })]);

    await env.remove("GpuDisk", "attached");
    // Nothing resolves this by itself: Stalled (not an endless Reconciling), and the message says what to do.
    const inUse = await env.waitFor("GpuDisk", "attached", (o) => reasonOf(o) === "InUse");
    expect(condition(inUse, "Stalled")?.status).toBe("True");
    expect(condition(inUse, "Reconciling")?.status).toBe("False");
    expect(condition(inUse, "Ready")?.message).toMatch(
      /still attached to GpuVm default\/holder: remove the disk from its spec\.disks, or delete the GpuVm/,
    );
    const vm = await env.waitFor("GpuVm", "holder", (o) => reasonOf(o) === "ReferenceDeleting");
    expect(condition(vm, "Stalled")?.status).toBe("True");
    expect(condition(vm, "Ready")?.message).toMatch(
      /GpuDisk default\/attached is being deleted: remove it from spec\.disks\[0\]/,
    );
    // The fix is all it takes: the VM detaches the disk, and the disk's deletion goes on by itself.
    await env.patchSpec("GpuVm", "holder", { disks: [] });
    await env.waitFor("GpuDisk", "attached", (o) => o === undefined, 10_000);
    await env.waitReady("GpuVm", "holder", 10_000);
    await env.remove("GpuVm", "holder");
    await env.waitFor("GpuVm", "holder", (o) => o === undefined, 10_000);
  });

  it("creates, grows, refuses a shrink without sending it, and deletes", async () => {
    await env.apply("GpuDisk", "data", { size: "100GiB", location: "us-east1-a" });
    const ready = await env.waitReady("GpuDisk", "data");
    expect(ready.status?.sizeBytes).toBe(100 * 1024 ** 3);
    await env.patchSpec("GpuDisk", "data", { size: "200GiB" });
    await env.waitFor("GpuDisk", "data", (o) => o?.status?.size === "200GiB" && reasonOf(o) === "Available");
    // A shrink is refused by the API server's validation (the reconciler refuses it too: unit-tested).
    await expect(env.patchSpec("GpuDisk", "data", { size: "50GiB" })).rejects.toThrow(/only grow/);
    expect((await cloudDisks()).find((d) => d.name === "default-data")?.size).toBe("200GiB");
    await env.remove("GpuDisk", "data");
    await env.waitFor("GpuDisk", "data", (o) => o === undefined);
    expect((await cloudDisks()).some((d) => d.name === "default-data")).toBe(false);
  });
});

describe("GpuVm", () => {
  it("creates a VM with a referenced disk and connection details, corrects drift, changes type, resets, deletes", async () => {
    await env.apply("GpuDisk", "vm-disk", { size: "10GiB", location: "us-east1-a" });
    await env.apply(
      "GpuVm",
      "trainer",
      vmSpec({ disks: [{ diskRef: { name: "vm-disk" } }], connectionDetails: { secretName: "trainer-ssh" } }),
    );
    const ready = await env.waitReady("GpuVm", "trainer");
    expect(ready.status).toMatchObject({ state: "STATE_RUNNING", hourlyPriceUSD: 1.6, location: "us-east1-a" });
    expect(ready.status?.publicIP).toBeTruthy();
    const vm = (await cloudVms()).find((v) => v.name === "default-trainer");
    expect(vm?.disks.some((d) => d.name === "default-vm-disk")).toBe(true);
    const secret = await env.core.readNamespacedSecret({ namespace: "default", name: "trainer-ssh" });
    expect(Buffer.from(secret.data?.host ?? "", "base64").toString()).toBe(ready.status?.publicIP);
    expect(secret.metadata?.ownerReferences?.[0]?.name).toBe("trainer");

    // Drift: stopped behind the operator's back → started again at the next resync.
    await env.admin("PUT", `/vms/${vm?.id}/state`, { state: "STATE_STOPPED" });
    await env.waitFor(
      "GpuVm",
      "trainer",
      (o) => o?.status?.operation !== undefined && (o.status.operation as { name: string }).name === "START",
    );
    await env.waitFor("GpuVm", "trainer", (o) => o?.status?.state === "STATE_RUNNING" && reasonOf(o) === "Available");

    // Type change inside the family: STOP, UPDATE, START; power state restored.
    await env.patchSpec("GpuVm", "trainer", { type: "a100.2x" });
    const changed = await env.waitFor(
      "GpuVm",
      "trainer",
      (o) => o?.status?.type === "a100.2x" && o.status.state === "STATE_RUNNING" && reasonOf(o) === "Available",
    );
    const names = ((changed?.status?.operations ?? []) as { name: string }[]).map((op) => op.name);
    expect(names.slice(0, 3)).toEqual(["START", "UPDATE", "STOP"]);

    // Reset through the annotation, once.
    await env.annotate("GpuVm", "trainer", { "gpucloud.dev/reset-requested-at": "2026-11-21T12:00:00Z" });
    const reset = await env.waitFor(
      "GpuVm",
      "trainer",
      (o) => o?.status?.lastResetRequestedAt === "2026-11-21T12:00:00Z",
    );
    expect(((reset?.status?.operations ?? []) as { name: string }[]).some((op) => op.name === "RESET")).toBe(true);

    // A type outside the family is refused.
    await env.patchSpec("GpuVm", "trainer", { type: "a40.1x" }).catch(() => undefined);
    const after = await env.get("GpuVm", "trainer");
    if (after?.spec.type === "a40.1x") {
      const stalled = await env.waitFor("GpuVm", "trainer", (o) => condition(o, "Stalled")?.status === "True");
      expect(reasonOf(stalled)).toBe("ImmutableFieldChanged");
      await env.patchSpec("GpuVm", "trainer", { type: "a100.2x" });
    }

    // Power state Stopped.
    await env.patchSpec("GpuVm", "trainer", { powerState: "Stopped" });
    await env.waitFor("GpuVm", "trainer", (o) => o?.status?.state === "STATE_STOPPED" && reasonOf(o) === "Available");

    // Deletion order: the disk waits until the VM is gone.
    await env.remove("GpuDisk", "vm-disk");
    await env.remove("GpuVm", "trainer");
    await env.waitFor("GpuVm", "trainer", (o) => o === undefined);
    await env.waitFor("GpuDisk", "vm-disk", (o) => o === undefined);
    expect((await cloudVms()).some((v) => v.name === "default-trainer")).toBe(false);
    expect((await cloudDisks()).some((d) => d.name === "default-vm-disk")).toBe(false);
  });

  it("a VM gone from the cloud reads as gone at deletion (404 is done)", async () => {
    await env.apply("GpuVm", "vanishing", vmSpec());
    const ready = await env.waitReady("GpuVm", "vanishing");
    await env.admin("DELETE", `/resources/vms/${ready.status?.id}`);
    await env.remove("GpuVm", "vanishing");
    await env.waitFor("GpuVm", "vanishing", (o) => o === undefined);
  });

  it("orphan keeps the cloud VM; import adopts it by id; observe mirrors without writing", async () => {
    await env.apply("GpuVm", "keeper", vmSpec({ deletionPolicy: "Orphan" }));
    const ready = await env.waitReady("GpuVm", "keeper");
    const id = String(ready.status?.id);
    await env.remove("GpuVm", "keeper");
    await env.waitFor("GpuVm", "keeper", (o) => o === undefined);
    expect((await cloudVms()).some((v) => v.id === id)).toBe(true);

    await env.apply("GpuVm", "watcher", vmSpec({ managementPolicy: "Observe", id }));
    const observed = await env.waitReady("GpuVm", "watcher");
    expect(reasonOf(observed)).toBe("Observed");
    expect(observed.metadata.finalizers ?? []).not.toContain("gpucloud.dev/finalizer");
    await env.remove("GpuVm", "watcher");
    await env.waitFor("GpuVm", "watcher", (o) => o === undefined);

    await env.apply("GpuVm", "imported", vmSpec({ id }));
    const imported = await env.waitReady("GpuVm", "imported");
    expect(imported.status?.id).toBe(id);
    await env.remove("GpuVm", "imported");
    await env.waitFor("GpuVm", "imported", (o) => o === undefined);
    expect((await cloudVms()).some((v) => v.id === id)).toBe(false);
  });

  it("paused makes no cloud call, and deleting a paused object leaves the VM behind with a warning", async () => {
    await env.apply("GpuVm", "sleepy", vmSpec());
    const ready = await env.waitReady("GpuVm", "sleepy");
    await env.annotate("GpuVm", "sleepy", { "gpucloud.dev/paused": "true" });
    await env.waitFor("GpuVm", "sleepy", (o) => reasonOf(o) === "Paused");
    await env.patchSpec("GpuVm", "sleepy", { powerState: "Stopped" });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const vm = (await cloudVms()).find((v) => v.id === ready.status?.id);
    expect(vm?.state).toBe("STATE_RUNNING");
    await env.remove("GpuVm", "sleepy");
    await env.waitFor("GpuVm", "sleepy", (o) => o === undefined);
    expect((await cloudVms()).some((v) => v.id === ready.status?.id)).toBe(true);
  });

  it("falls back to the next location when the first has no capacity", async () => {
    await env.admin("PUT", "/capacity", { "us-east1-a": { "a40.1x": { capacity: 0 } } });
    await env.apply(
      "GpuVm",
      "roamer",
      vmSpec({ type: "a40.1x", location: undefined, locations: ["us-east1-a", "eu-iceland1-a"] }),
    );
    const ready = await env.waitReady("GpuVm", "roamer");
    expect(ready.status).toMatchObject({ location: "eu-iceland1-a", locationIndex: 1 });
    await env.remove("GpuVm", "roamer");
    await env.waitFor("GpuVm", "roamer", (o) => o === undefined);
  });

  it("stalls CapacityUnavailable when no location has capacity", async () => {
    await env.admin("PUT", "/capacity", {
      "us-east1-a": { "a40.2x": { capacity: 0 } },
      "eu-iceland1-a": { "a40.2x": { capacity: 0 } },
    });
    await env.apply(
      "GpuVm",
      "stuck",
      vmSpec({ type: "a40.2x", location: undefined, locations: ["us-east1-a", "eu-iceland1-a"] }),
    );
    const stalled = await env.waitFor("GpuVm", "stuck", (o) => condition(o, "Stalled")?.status === "True");
    expect(reasonOf(stalled)).toBe("CapacityUnavailable");
    expect((await cloudVms()).some((v) => v.name === "default-stuck")).toBe(false);
    await env.remove("GpuVm", "stuck");
    await env.waitFor("GpuVm", "stuck", (o) => o === undefined);
  });
});

describe("GpuFirewallRule", () => {
  it("waits for its network and VM, creates, corrects drift, and is deleted before its network", async () => {
    await env.apply("GpuFirewallRule", "ssh", {
      networkRef: { name: "fw-net" },
      direction: "ingress",
      action: "allow",
      protocols: ["tcp"],
      sources: [{ cidr: "0.0.0.0/0" }],
      destinations: [{ vmRef: { name: "fw-vm" } }],
      destinationPorts: ["22"],
    });
    const missing = await env.waitFor("GpuFirewallRule", "ssh", (o) => reasonOf(o) === "ReferenceNotFound");
    expect(condition(missing, "Ready")?.message).toMatch(/^GpuNetwork default\/fw-net does not exist: create it/);
    await env.apply("GpuNetwork", "fw-net", {});
    await env.apply("GpuVm", "fw-vm", vmSpec());
    const ready = await env.waitReady("GpuFirewallRule", "ssh", 10_000);
    const rule = (await cloudRules()).find((r) => r.id === ready.status?.id);
    expect(rule?.destination_ports).toEqual(["22"]);
    expect(ready.status?.printableProtocols).toBe("tcp");

    await env.admin("PATCH", `/firewall-rules/${rule?.id}`, { destination_ports: ["2222"] });
    await env.waitFor(
      "GpuFirewallRule",
      "ssh",
      (o) =>
        (o?.status?.operations as { name: string }[] | undefined)?.[0]?.name === "UPDATE" &&
        reasonOf(o) === "Available",
    );
    expect((await cloudRules()).find((r) => r.id === rule?.id)?.destination_ports).toEqual(["22"]);

    await env.remove("GpuNetwork", "fw-net");
    const inUse = await env.waitFor("GpuNetwork", "fw-net", (o) => reasonOf(o) === "InUse");
    expect(condition(inUse, "Stalled")?.status).toBe("True");
    expect(condition(inUse, "Ready")?.message).toMatch(/GpuFirewallRules default\/ssh still use this network/);
    await env.remove("GpuFirewallRule", "ssh");
    await env.remove("GpuVm", "fw-vm");
    await env.waitFor("GpuNetwork", "fw-net", (o) => o === undefined, 10_000);
    expect((await cloudRules()).some((r) => r.id === rule?.id)).toBe(false);
  });
});
