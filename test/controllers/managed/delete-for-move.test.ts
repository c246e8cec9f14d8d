// `clusterctl move` copies a cluster's objects to another management cluster, then deletes them from this one
// with the annotation clusterctl.cluster.x-k8s.io/delete-for-move (and removes their finalizers right after):
// the copy manages the cloud resource from then on, so the deletion here must not touch it.
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Vm } from "../../../src/cloud/wire.ts";
import { type Env, eventsAbout, startEnv, vmSpec } from "../harness.ts";

let env: Env;

beforeAll(async () => {
  env = await startEnv();
});

afterAll(async () => {
  await env?.close();
});

it("releases a GpuVm deleted for a clusterctl move without deleting its VM", async () => {
  await env.apply("GpuVm", "moved", vmSpec());
  const ready = await env.waitReady("GpuVm", "moved");
  const id = ready.status?.id;
  await env.annotate("GpuVm", "moved", { "clusterctl.cluster.x-k8s.io/delete-for-move": "" });
  await env.remove("GpuVm", "moved");
  await env.waitFor("GpuVm", "moved", (vm) => vm === undefined);
  const vms = (await env.cloud<{ items: Vm[] }>("vms")).items;
  expect(vms.find((vm) => vm.id === id)?.state).toBe("STATE_RUNNING");
  expect((await eventsAbout(env, "moved")).join("\n")).toContain("moved by clusterctl");
});
