// The GpuMachine and GpuCluster controllers in-process, on the simulator and the Kubernetes API test double, with
// the test playing Cluster API (its Clusters and Machines): a Machine's VM is a GpuVm the GpuMachine owns, booted
// with the bootstrap data; providerID, addresses, failure domain and provisioned follow; machines spread over
// the cluster's failure domains unless the Machine names one; pause reaches the GpuVm; deletion takes the VM.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Vm } from "../../../src/cloud/wire.ts";
import { condition, type Env, type ManagedView, startEnv } from "../harness.ts";
import {
  CLOUD_CONFIG,
  CLUSTER_API_CRDS,
  createCluster,
  createMachine,
  deleteInfra,
  getInfra,
  markInfrastructureProvisioned,
  patchCluster,
  SSH,
  setBootstrapData,
  setMachineOwner,
  waitInfra,
} from "./capi-double.ts";

let env: Env;

beforeAll(async () => {
  env = await startEnv({ crds: CLUSTER_API_CRDS, clusterApi: true });
  await createCluster(env, "gpu", { locations: ["us-east1-a", "eu-iceland1-a"] });
  await waitInfra(env, "gpuclusters", "gpu", (c) => initialized(c));
  await markInfrastructureProvisioned(env, "gpu");
}, 30_000);

afterAll(async () => {
  await env?.close();
});

function initialized(object: ManagedView | undefined): boolean {
  return (
    (object?.status as { initialization?: { provisioned?: boolean } } | undefined)?.initialization?.provisioned === true
  );
}

const machineSpec = { type: "a100-80gb.8x", sshPublicKey: SSH };

async function cloudVms(): Promise<Vm[]> {
  return (await env.cloud<{ items: Vm[] }>("vms?limit=500")).items;
}

async function requestCount(): Promise<number> {
  const { counts } = (await env.admin("GET", "/requests")) as { counts: Record<string, number> };
  return Object.values(counts).reduce((sum, value) => sum + value, 0);
}

describe("GpuCluster", () => {
  it("lists the spec's locations with capacity as failure domains, provisioned and Ready", async () => {
    const cluster = await getInfra(env, "gpuclusters", "gpu");
    expect(cluster?.status?.failureDomains).toEqual([
      { name: "us-east1-a", controlPlane: true },
      { name: "eu-iceland1-a", controlPlane: true },
    ]);
    expect(condition(cluster, "Ready")).toMatchObject({ status: "True", reason: "Available" });
    expect(condition(cluster, "Paused")).toMatchObject({ status: "False", reason: "NotPaused" });
    expect(cluster?.metadata.finalizers).toContain("gpucloud.dev/finalizer");
    expect(cluster?.metadata.annotations?.["clusterctl.cluster.x-k8s.io/block-move"]).toBeDefined();
  });
});

describe("GpuMachine", () => {
  it("waits for the bootstrap data, then boots a GpuVm with it: providerID, addresses, failure domain, provisioned", async () => {
    await createMachine(env, { name: "worker-a", cluster: "gpu", spec: machineSpec, withBootstrapData: false });
    const waiting = await waitInfra(
      env,
      "gpumachines",
      "worker-a",
      (m) => condition(m, "Ready")?.reason === "WaitingForDependency",
    );
    expect(condition(waiting, "Ready")?.message).toContain("bootstrap data (spec.bootstrap.dataSecretName)");
    expect(await env.get("GpuVm", "worker-a")).toBeUndefined();

    await setBootstrapData(env, "worker-a", "gpu");
    const ready = await waitInfra(env, "gpumachines", "worker-a", (m) => condition(m, "Ready")?.status === "True");
    const vm = await env.get("GpuVm", "worker-a");
    const id = vm?.status?.id;
    expect(id).toBeDefined();
    expect(ready?.spec.providerID).toBe(`gpucloud://${id}`);
    expect(vm?.spec).toMatchObject({
      id,
      type: "a100-80gb.8x",
      startupScriptRef: { kind: "Secret", name: "worker-a-bootstrap", key: "value" },
      credentialsRef: { name: "gpucloud-credentials" },
    });
    expect(vm?.metadata.ownerReferences?.[0]).toMatchObject({ kind: "GpuMachine", name: "worker-a", controller: true });
    const status = ready?.status as Record<string, unknown>;
    expect(status.initialization).toEqual({ provisioned: true });
    expect(status.failureDomain).toBe("us-east1-a");
    expect(status.addresses).toEqual([
      { type: "InternalIP", address: vm?.status?.privateIP },
      { type: "ExternalIP", address: vm?.status?.publicIP },
      { type: "Hostname", address: "default-worker-a" },
    ]);
    // The cloud's VM was booted with the Machine's bootstrap data.
    const record = (await env.admin("GET", `/state`)) as { vms: { id: string; startupScript?: string }[] };
    expect(record.vms.find((candidate) => candidate.id === id)?.startupScript).toBe(CLOUD_CONFIG("worker-a"));
  });

  it("writes nothing to a GpuMachine until Cluster API has set its Machine owner reference", async () => {
    // Cluster API's MachineSet makes the GpuMachine, then the Machine; its Machine controller then sets the owner
    // reference with a patch that a write of ours in between would make fail (or fail ours).
    const { machine, gpuMachine } = await createMachine(env, {
      name: "worker-late",
      cluster: "gpu",
      spec: machineSpec,
      withBootstrapData: false,
      withOwner: false,
    });
    const made = await getInfra(env, "gpumachines", gpuMachine.name);
    // A GpuMachine made after it, with its owner: once it has a status, worker-late has had its pass too.
    await createMachine(env, { name: "worker-owned", cluster: "gpu", spec: machineSpec, withBootstrapData: false });
    await waitInfra(env, "gpumachines", "worker-owned", (m) => condition(m, "Ready") !== undefined);
    const untouched = await getInfra(env, "gpumachines", gpuMachine.name);
    expect(untouched?.metadata.resourceVersion).toBe(made?.metadata.resourceVersion);
    expect(untouched?.status).toBeUndefined();

    await setMachineOwner(env, machine);
    const waiting = await waitInfra(
      env,
      "gpumachines",
      gpuMachine.name,
      (m) => condition(m, "Ready")?.reason === "WaitingForDependency",
    );
    expect(condition(waiting, "Ready")?.message).toContain("bootstrap data (spec.bootstrap.dataSecretName)");
  });

  it("spreads machines without a failure domain over the cluster's, and honours Machine.spec.failureDomain", async () => {
    await createMachine(env, { name: "worker-b", cluster: "gpu", spec: machineSpec });
    await createMachine(env, { name: "worker-c", cluster: "gpu", spec: machineSpec });
    await createMachine(env, { name: "worker-d", cluster: "gpu", spec: machineSpec, failureDomain: "us-east1-a" });
    const domains: Record<string, string> = {};
    for (const name of ["worker-b", "worker-c", "worker-d"]) {
      const ready = await waitInfra(env, "gpumachines", name, (m) => condition(m, "Ready")?.status === "True");
      domains[name] = String((ready?.status as { failureDomain?: string } | undefined)?.failureDomain);
    }
    // worker-a is in us-east1-a: b and c go where there are fewer, then alternate.
    expect([domains["worker-b"], domains["worker-c"]].sort()).toEqual(["eu-iceland1-a", "us-east1-a"]);
    expect(domains["worker-d"]).toBe("us-east1-a");
    expect((await cloudVms()).filter((vm) => vm.name.startsWith("default-worker-"))).toHaveLength(4);
  });

  it("pauses with its Cluster: the GpuVm pauses, block-move goes, no cloud call; resumes after", async () => {
    await patchCluster(env, "gpu", { paused: true });
    const paused = await waitInfra(env, "gpumachines", "worker-a", (m) => condition(m, "Paused")?.status === "True");
    expect(paused?.metadata.annotations?.["clusterctl.cluster.x-k8s.io/block-move"]).toBeUndefined();
    expect((await env.get("GpuVm", "worker-a"))?.metadata.annotations?.["gpucloud.dev/paused"]).toBe("true");
    for (const name of ["worker-b", "worker-c", "worker-d"]) {
      await waitInfra(env, "gpumachines", name, (m) => condition(m, "Paused")?.status === "True");
    }
    await waitInfra(env, "gpuclusters", "gpu", (c) => condition(c, "Paused")?.status === "True");
    const before = await requestCount();
    await env.admin("PUT", `/vms/${(await env.get("GpuVm", "worker-a"))?.status?.id}/state`, {
      state: "STATE_STOPPED",
    });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    // The VM stopped behind the operator's back: nobody looks while paused (the admin API is not counted).
    expect(await requestCount()).toBe(before);

    await patchCluster(env, "gpu", { paused: false });
    const resumed = await waitInfra(env, "gpumachines", "worker-a", (m) => condition(m, "Paused")?.status === "False");
    expect(resumed?.metadata.annotations?.["clusterctl.cluster.x-k8s.io/block-move"]).toBeDefined();
    // The stopped VM is started again by its GpuVm.
    await env.waitFor(
      "GpuVm",
      "worker-a",
      (vm) => vm?.metadata.annotations?.["gpucloud.dev/paused"] === undefined && vm?.status?.state === "STATE_RUNNING",
    );
  });

  it("deletes its GpuVm and VM with it, and only then lets go", async () => {
    const id = (await env.get("GpuVm", "worker-d"))?.status?.id;
    await deleteInfra(env, "gpumachines", "worker-d");
    await waitInfra(env, "gpumachines", "worker-d", (m) => m === undefined, 15_000);
    expect(await env.get("GpuVm", "worker-d")).toBeUndefined();
    expect((await cloudVms()).map((vm) => vm.id)).not.toContain(id);
    expect(
      await env.core.readNamespacedSecret({ namespace: "default", name: "worker-d-bootstrap" }).catch(() => undefined),
    ).toBeUndefined();
  });

  it("lets go without a cloud call when clusterctl move deletes it (delete-for-move on it and its GpuVm)", async () => {
    const id = (await env.get("GpuVm", "worker-c"))?.status?.id;
    const annotations = { "clusterctl.cluster.x-k8s.io/delete-for-move": "" };
    await env.annotate("GpuVm", "worker-c", annotations);
    await env.remove("GpuVm", "worker-c");
    await deleteInfra(env, "gpumachines", "worker-c", annotations);
    await waitInfra(env, "gpumachines", "worker-c", (m) => m === undefined, 15_000);
    await env.waitFor("GpuVm", "worker-c", (vm) => vm === undefined);
    expect((await cloudVms()).map((vm) => vm.id)).toContain(id);
  });

  it("writes its status once per step of the story: none for a GpuVm without status, none for its own providerID", async () => {
    // Each GpuMachine write sets off a pass of Cluster API's Machine controller (and a Machine status patch).
    const path = "/gpumachines/worker-writes";
    await createMachine(env, { name: "worker-writes", cluster: "gpu", spec: machineSpec });
    const ready = await waitInfra(env, "gpumachines", "worker-writes", (m) => condition(m, "Ready")?.status === "True");
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const writes = env.double.writes().filter((write) => write.path.includes(path) && write.method !== "GET");
    // The finalizer with block-move; status "GpuVm made"; the GpuVm's creating mirrored; providerID; Ready.
    expect(writes.map((write) => (write.path.endsWith("/status") ? "status" : "object"))).toEqual([
      "object",
      "status",
      "status",
      "object",
      "status",
    ]);
    const last = await getInfra(env, "gpumachines", "worker-writes");
    expect(last?.metadata.resourceVersion).toBe(ready?.metadata.resourceVersion);
    expect((last?.status as { observedGeneration?: number } | undefined)?.observedGeneration).toBe(
      last?.metadata.generation,
    );
    for (const type of ["Ready", "Reconciling", "Stalled", "Paused"]) {
      const observed = (condition(last, type) as { observedGeneration?: number } | undefined)?.observedGeneration;
      expect(observed).toBe(last?.metadata.generation);
    }
  });

  it("spreads machines whose bootstrap data comes at once: each placement counts those chosen before it", async () => {
    // Cluster API's kubeadm bootstrap provider writes many Machines' data within moments: their passes overlap,
    // and one placed while another is still between its choice and its GpuVm's create must see that choice.
    await createCluster(env, "burst", { locations: ["us-east1-a", "eu-iceland1-a"] });
    await waitInfra(env, "gpuclusters", "burst", (c) => initialized(c));
    await markInfrastructureProvisioned(env, "burst");
    const names = ["burst-1", "burst-2", "burst-3", "burst-4", "burst-5", "burst-6"];
    const spec = { type: "a100.1x", sshPublicKey: SSH };
    for (const name of names) {
      await createMachine(env, { name, cluster: "burst", spec, withBootstrapData: false });
      await waitInfra(env, "gpumachines", name, (m) => condition(m, "Ready")?.reason === "WaitingForDependency");
    }
    await Promise.all(names.map((name) => setBootstrapData(env, name, "burst")));
    const counts: Record<string, number> = {};
    for (const name of names) {
      const ready = await waitInfra(env, "gpumachines", name, (m) => condition(m, "Ready")?.status === "True");
      const domain = String((ready?.status as { failureDomain?: string } | undefined)?.failureDomain);
      counts[domain] = (counts[domain] ?? 0) + 1;
    }
    expect(counts).toEqual({ "us-east1-a": 3, "eu-iceland1-a": 3 });
  });

  it("stalls a type the cloud does not offer, and makes no GpuVm", async () => {
    await createMachine(env, { name: "worker-x", cluster: "gpu", spec: { ...machineSpec, type: "h200.8x" } });
    const stalled = await waitInfra(env, "gpumachines", "worker-x", (m) => condition(m, "Stalled")?.status === "True");
    expect(condition(stalled, "Ready")).toMatchObject({ reason: "InvalidSpec" });
    expect(condition(stalled, "Ready")?.message).toContain("spec.type h200.8x is not a VM type this cloud offers");
    expect(await env.get("GpuVm", "worker-x")).toBeUndefined();
  });
});
