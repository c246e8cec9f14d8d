// Two shards over the same objects, as real processes: `playground --shards 2`. Every object is reconciled by
// its own shard only (the Events about it name that shard's replica), and when shard 1 dies without handing its
// Lease over, its objects wait for shard 1 — shard 0 never takes them, it only marks their Synced condition False
// (WaitingForOwner) once their spec changed — until a new shard-1 replica takes the Lease over.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { EventsV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { shardOfKey } from "../../src/runtime/sharding.ts";
import {
  type CustomObject,
  eventually,
  listObjects,
  type Playground,
  RunningProcess,
  sleep,
  startPlayground,
} from "./harness.ts";

const run = promisify(execFile);
const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ0ZXN0a2V5Zm9ydGhlb3BlcmF0b3J0ZXN0cw test@example";
const NAMES = Array.from({ length: 10 }, (_, i) => `sharded-${i}`);

let playground: Playground | undefined;
const extra: RunningProcess[] = [];
afterEach(async () => {
  await Promise.all(extra.splice(0).map((process) => process.stop("SIGKILL")));
  await playground?.close();
  playground = undefined;
});

const shardOf = (name: string): number => shardOfKey(`default/${name}`, 2);

function upToDate(object: CustomObject | undefined): boolean {
  const ready = object?.status?.conditions?.find((c) => c.type === "Ready");
  return ready?.status === "True" && object?.status?.observedGeneration === object?.metadata.generation;
}

describe("playground --shards 2", () => {
  it("reconciles each object in its own shard only; a dead shard's objects wait for that shard's Lease", async () => {
    const pg = await startPlayground({ latencyMs: 200, shards: 2 });
    playground = pg;
    expect(new Set(NAMES.map(shardOf))).toEqual(new Set([0, 1]));
    for (const name of NAMES) {
      await pg.customObjects.createNamespacedCustomObject({
        group: "gpucloud.dev",
        version: "v1alpha1",
        plural: "gpuvms",
        namespace: "default",
        body: {
          apiVersion: "gpucloud.dev/v1alpha1",
          kind: "GpuVm",
          metadata: { name },
          spec: { type: "a40.1x", location: "us-east1-a", sshPublicKey: SSH_KEY },
        },
      });
    }
    const byName = async () => new Map((await listObjects(pg, "gpuvms")).map((o) => [o.metadata.name, o]));
    await eventually(
      "every VM Ready",
      async () =>
        (await byName()).size === NAMES.length && [...(await byName()).values()].every(upToDate) ? true : undefined,
      120_000,
    );

    // The Events about each object were written by its own shard's replica (POD_NAME playground-shard-<i>).
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(pg.kubeconfigPath);
    const events = kubeConfig.makeApiClient(EventsV1Api);
    const reporters = new Map<string, Set<string>>();
    for (const event of (await events.listNamespacedEvent({ namespace: "default" })).items) {
      const name = event.regarding?.name;
      if (event.regarding?.kind !== "GpuVm" || name === undefined) continue;
      const shard = /^playground-shard-(\d+)_/.exec(event.reportingInstance ?? "")?.[1];
      reporters.set(name, new Set([...(reporters.get(name) ?? []), shard ?? "?"]));
    }
    for (const name of NAMES) expect(reporters.get(name)).toEqual(new Set([String(shardOf(name))]));

    // Shard 1 dies (SIGKILL: its Lease is not released). Only this playground's own child is looked for.
    const { stdout } = await run("pgrep", ["-P", String(pg.process.child.pid), "-f", "--", "--shard-index 1"]);
    const pids = stdout
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map(Number);
    for (const pid of pids) process.kill(pid, "SIGKILL");
    await sleep(500);
    for (const name of NAMES) {
      await pg.customObjects.patchNamespacedCustomObject(
        {
          group: "gpucloud.dev",
          version: "v1alpha1",
          plural: "gpuvms",
          namespace: "default",
          name,
          body: { spec: { powerState: "Stopped" } },
        },
        MERGE,
      );
    }
    const ofShard = (shard: number) => NAMES.filter((name) => shardOf(name) === shard);
    await eventually(
      "shard 0's VMs stopped",
      async () => {
        const all = await byName();
        return ofShard(0).every((name) => upToDate(all.get(name))) ? true : undefined;
      },
      60_000,
    );
    const waiting = await byName();
    for (const name of ofShard(1)) expect(upToDate(waiting.get(name))).toBe(false);
    // Never shown as Synced for the old spec: once shard 1 has had no leader for twice the lease duration, shard 0's
    // leader turns their Synced condition False (WaitingForOwner); their Ready stays what it was.
    const syncedReason = (object: CustomObject | undefined) =>
      object?.status?.conditions?.find((c) => c.type === "Synced" && c.status === "False")?.reason;
    await eventually(
      "shard 1's VMs marked WaitingForOwner",
      async () => {
        const all = await byName();
        return ofShard(1).every((name) => syncedReason(all.get(name)) === "WaitingForOwner") ? true : undefined;
      },
      60_000,
    );

    // A new shard-1 replica takes the Lease over once it expires, and catches up.
    const replacement = new RunningProcess(pg.operatorArgs({ index: 1, count: 2 }), {
      POD_NAME: "replacement-shard-1",
    });
    extra.push(replacement);
    await eventually(
      "shard 1's VMs stopped by the new replica",
      async () => {
        const all = await byName();
        return ofShard(1).every((name) => upToDate(all.get(name))) ? true : undefined;
      },
      90_000,
    );
    const leases = (await (
      await fetch(`${pg.kubeUrl}/apis/coordination.k8s.io/v1/namespaces/default/leases`, {
        headers: { authorization: "Bearer playground" },
      })
    ).json()) as { items: { metadata: { name: string }; spec: { holderIdentity?: string } }[] };
    const holders = Object.fromEntries(leases.items.map((l) => [l.metadata.name, l.spec.holderIdentity ?? ""]));
    expect(holders["gpuvm-operator.gpucloud.dev-shard-0-of-2"]).toMatch(/^playground-shard-0_/);
    expect(holders["gpuvm-operator.gpucloud.dev-shard-1-of-2"]).toMatch(/^replacement-shard-1_/);
  });
});
