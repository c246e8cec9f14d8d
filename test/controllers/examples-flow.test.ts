// The playground's flow (`kubectl apply -f examples/`): a network, a disk and a VM that attaches the disk, with
// cloud operations that take a while (as in the playground), through the real operator: simulator + Kubernetes
// API test double. Every object is POSTed once, the disk shows its attachment within seconds, and condition
// times are written as metav1.Time (whole seconds).
import { EventsV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Env, NAMESPACE, startEnv, vmSpec } from "./harness.ts";

let env: Env;
beforeAll(async () => {
  // Long enough that a create is still in flight (and its name not yet listed) when the watch events of the
  // first pass's writes wake the key; the resync (30 s) is far beyond every wait below.
  env = await startEnv({ simulator: { latencyMs: 400 } });
});
afterAll(async () => {
  await env?.close();
});

async function requestCounts(): Promise<Record<string, number>> {
  const answer = (await env.admin("GET", "/requests")) as { counts: Record<string, number> };
  return answer.counts;
}

async function notes(name: string): Promise<string[]> {
  const events = await env.kubeConfig.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace: NAMESPACE });
  return events.items.filter((e) => e.regarding?.name === name).map((e) => `${e.reason ?? ""} ${e.note ?? ""}`);
}

const attachedVmIds = (o: Awaited<ReturnType<Env["get"]>>): string[] =>
  ((o?.status?.attachedTo as { vmId: string }[] | undefined) ?? []).map((a) => a.vmId);

describe("applying the examples", () => {
  it("POSTs each object once (no 409, no adoption of our own create)", async () => {
    await env.admin("DELETE", "/requests");
    await env.apply("GpuNetwork", "training-net", { cidr: "10.20.0.0/16" });
    await env.apply("GpuDisk", "datasets", { size: "100GiB", location: "us-east1-a" });
    await env.apply("GpuDisk", "scratch", { size: "50GiB", location: "us-east1-a" });
    await env.apply("GpuVm", "trainer", vmSpec({ disks: [{ diskRef: { name: "datasets" }, mode: "read-write" }] }));
    await env.waitReady("GpuNetwork", "training-net", 15_000);
    await env.waitReady("GpuVm", "trainer", 15_000);
    await env.waitReady("GpuDisk", "scratch", 15_000);

    const counts = await requestCounts();
    const posts = Object.entries(counts).filter(([route]) => route.startsWith("POST "));
    expect(Object.fromEntries(posts)).toEqual({
      "POST /v0.1/projects/:projectId/disks": 2,
      "POST /v0.1/projects/:projectId/vms": 1,
      "POST /v0.1/projects/:projectId/vpc/networks": 1,
    });
    const metrics = await env.manager.metrics.registry.metrics();
    expect(metrics).not.toMatch(/gpucloud_api_requests_total\{method="POST",[^}]*code="409"\}/);
    for (const name of ["training-net", "datasets", "scratch", "trainer"]) {
      expect((await notes(name)).join("\n")).not.toMatch(/adopted/);
    }
    expect((await notes("trainer")).join("\n")).toMatch(/creating default-trainer/);
  }, 30_000);

  it("shows a disk attached and detached by a VM within seconds, not at the next resync", async () => {
    const vm = await env.waitReady("GpuVm", "trainer");
    const vmId = vm.status?.id ?? "";
    // Attached by the create.
    await env.waitFor("GpuDisk", "datasets", (o) => attachedVmIds(o).includes(vmId), 4000);
    // Attached by an UPDATE of the VM's disks.
    await env.patchSpec("GpuVm", "trainer", {
      disks: [
        { diskRef: { name: "datasets" }, mode: "read-write" },
        { diskRef: { name: "scratch" }, mode: "read-write" },
      ],
    });
    await env.waitFor("GpuDisk", "scratch", (o) => attachedVmIds(o).includes(vmId), 4000);
    // Detached by an UPDATE: the VM no longer refers to the disk, which must still learn of it.
    await env.patchSpec("GpuVm", "trainer", { disks: [{ diskRef: { name: "datasets" }, mode: "read-write" }] });
    await env.waitFor("GpuDisk", "scratch", (o) => attachedVmIds(o).length === 0, 4000);
    // Detached by the terminate.
    await env.remove("GpuVm", "trainer");
    await env.waitFor("GpuVm", "trainer", (o) => o === undefined, 8000);
    await env.waitFor("GpuDisk", "datasets", (o) => attachedVmIds(o).length === 0, 4000);
  }, 30_000);

  it("writes condition times at whole seconds", async () => {
    const disk = await env.waitReady("GpuDisk", "datasets");
    const times = (disk.status?.conditions ?? []).map((c) => (c as { lastTransitionTime?: string }).lastTransitionTime);
    expect(times).toHaveLength(4); // Ready, Reconciling, Stalled, Synced
    for (const time of times) expect(time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  });
});
