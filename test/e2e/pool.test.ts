// The GpuVmPool on the playground, driven with kubectl: `kubectl scale gpool/workers --replicas 5` (through the
// scale subresource), `kubectl get gpool -w` following a scale-up and a rolling replacement, and the operator
// killed with SIGKILL in the middle of a scale-up: after a restart there are exactly as many cloud VMs as asked.
import { type ChildProcess, spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type CustomObject,
  eventually,
  listCloud,
  listObjects,
  type Playground,
  REPO_ROOT,
  type RunningProcess,
  startOperator,
  startPlayground,
} from "./harness.ts";

const POOL_FILE = "examples/05-gpu-vm-pool.yaml";

/** `kubectl get gpool -w` in the background; its output so far. */
function watchPools(playground: Playground): { child: ChildProcess; output(): string; stop(): Promise<string> } {
  let text = "";
  const child = spawn("kubectl", ["get", "gpool", "-w"], {
    cwd: REPO_ROOT,
    env: { ...process.env, KUBECONFIG: playground.kubeconfigPath },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout?.on("data", (chunk: Buffer) => {
    text += chunk.toString("utf8");
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    text += chunk.toString("utf8");
  });
  return {
    child,
    output: () => text,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGTERM");
        await exited;
      }
      return text;
    },
  };
}

interface WatchRow {
  desired: number;
  ready: number | undefined;
  upToDate: number | undefined;
  reason: string;
}

/** The rows of `kubectl get gpool -w` (NAME DESIRED READY UP-TO-DATE LOCATIONS $/HOUR REASON AGE). */
function rowsOf(output: string): WatchRow[] {
  return output
    .split("\n")
    .filter((line) => line.startsWith("workers "))
    .map((line) => {
      const cells = line.trim().split(/\s+/);
      const number = (text: string | undefined) => {
        const value = Number(text);
        return text === undefined || !Number.isFinite(value) ? undefined : value;
      };
      return {
        desired: Number(cells[1]),
        ready: number(cells[2]),
        upToDate: number(cells[3]),
        reason: cells.at(-2) ?? "",
      };
    });
}

async function pool(playground: Playground): Promise<CustomObject | undefined> {
  return (await listObjects(playground, "gpuvmpools")).find((object) => object.metadata.name === "workers");
}

async function waitPool(playground: Playground, replicas: number, extra: (p: CustomObject) => boolean = () => true) {
  return eventually(
    `workers with ${replicas} Ready replicas`,
    async () => {
      const current = await pool(playground);
      const ready = current?.status?.conditions?.find((condition) => condition.type === "Ready");
      const done =
        current !== undefined &&
        current.status?.observedGeneration === current.metadata.generation &&
        ready?.status === "True" &&
        current.status?.readyReplicas === replicas &&
        extra(current);
      return done ? current : undefined;
    },
    180_000,
  );
}

async function workerVms(playground: Playground): Promise<Record<string, unknown>[]> {
  return (await listCloud(playground, "vms")).filter((vm) => String(vm.name).startsWith("default-workers-"));
}

describe("GpuVmPool on the playground", () => {
  let playground: Playground;
  let operator: RunningProcess | undefined;

  beforeAll(async () => {
    playground = await startPlayground({ latencyMs: 500, withoutOperator: true });
    operator = startOperator(playground);
    await playground.kubectl("apply", "-f", POOL_FILE);
    await waitPool(playground, 2);
  });

  afterAll(async () => {
    if (playground === undefined) return;
    await playground.kubectl("delete", "-f", POOL_FILE, "--timeout=180s");
    expect(await workerVms(playground)).toEqual([]);
    expect((await listObjects(playground, "gpuvms")).filter((vm) => vm.metadata.name.startsWith("workers-"))).toEqual(
      [],
    );
    await operator?.stop("SIGTERM");
    await playground.close();
  });

  it("scales with kubectl scale gpool/workers --replicas 5, as kubectl get gpool -w shows", async () => {
    const watch = watchPools(playground);
    await eventually("the watch to list the pool", async () => (watch.output().includes("workers") ? true : undefined));
    expect(await playground.kubectl("scale", "gpool/workers", "--replicas", "5")).toContain(
      "gpuvmpool.gpucloud.dev/workers scaled",
    );
    const scaled = await waitPool(playground, 5);
    const output = await watch.stop();
    const rows = rowsOf(output);
    expect(output.split("\n")[0]).toMatch(/^NAME\s+DESIRED\s+READY\s+UP-TO-DATE\s+LOCATIONS\s+\$\/HOUR\s+REASON\s+AGE/);
    expect(rows.some((row) => row.desired === 5 && row.reason === "Scaling")).toBe(true);
    expect(rows.at(-1)).toMatchObject({ desired: 5, ready: 5, upToDate: 5, reason: "Available" });
    expect(scaled.status?.locationSummary).toBe("us-east1-a=3,us-southcentral1-a=2");
    expect(await workerVms(playground)).toHaveLength(5);
    const scale = JSON.parse(
      await playground.kubectl(
        "get",
        "--raw",
        "/apis/gpucloud.dev/v1alpha1/namespaces/default/gpuvmpools/workers/scale",
      ),
    ) as { spec: { replicas: number }; status: { replicas: number; selector: string } };
    expect(scale).toMatchObject({
      spec: { replicas: 5 },
      status: { replicas: 5, selector: "gpucloud.dev/pool=workers" },
    });
  });

  it("ends with exactly the desired number of cloud VMs after a SIGKILL of the operator during a scale-up", async () => {
    // Slow creates (4 s each) keep the scale-up under way long enough to kill the operator in the middle of it.
    const faults = `${new URL(playground.cloud.url).origin}/_sim/faults`;
    const slowCreates = { latency: [{ method: "POST", route: "/projects/:projectId/vms", ms: 4000 }] };
    await fetch(faults, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(slowCreates),
    });
    await playground.kubectl("scale", "gpool/workers", "--replicas", "9");
    // Kill once the new slots are recorded and the cloud does not have all their VMs yet.
    await eventually(
      "the scale-up to be under way",
      async () => {
        const slots = ((await pool(playground))?.status?.slots as unknown[] | undefined) ?? [];
        return slots.length === 9 && (await workerVms(playground)).length < 9 ? true : undefined;
      },
      60_000,
      50,
    );
    const killed = await operator?.stop("SIGKILL");
    expect(killed?.signal).toBe("SIGKILL");
    expect((await workerVms(playground)).length).toBeLessThan(9);
    await fetch(faults, { method: "DELETE" });
    operator = startOperator(playground);
    await waitPool(playground, 9);
    const cloud = await workerVms(playground);
    expect(cloud).toHaveLength(9);
    const members = (await listObjects(playground, "gpuvms")).filter((vm) => vm.metadata.name.startsWith("workers-"));
    expect(members).toHaveLength(9);
    expect(members.map((vm) => vm.status?.id).sort()).toEqual(cloud.map((vm) => vm.id).sort());
    const disks = (await listCloud(playground, "disks")).filter((disk) =>
      String(disk.name).startsWith("default-workers-"),
    );
    expect(disks).toHaveLength(9);
  });

  it("replaces the replicas one at a time for a new image, as kubectl get gpool -w shows", async () => {
    await playground.kubectl("scale", "gpool/workers", "--replicas", "3");
    await waitPool(playground, 3, (current) => current.status?.replicas === 3);
    const before = new Set((await workerVms(playground)).map((vm) => vm.id));
    const watch = watchPools(playground);
    await eventually("the watch to list the pool", async () => (watch.output().includes("workers") ? true : undefined));
    await playground.kubectl(
      "patch",
      "gpool/workers",
      "--type=merge",
      "-p",
      JSON.stringify({ spec: { template: { spec: { image: "ubuntu24.04-nvidia-565" } } } }),
    );
    await waitPool(playground, 3, (current) => current.status?.updatedReplicas === 3);
    const rows = rowsOf(await watch.stop());
    expect(rows.some((row) => row.reason === "RollingUpdate")).toBe(true);
    // maxUnavailable 1: no row shows fewer than two Ready replicas.
    expect(Math.min(...rows.map((row) => row.ready ?? 0))).toBe(2);
    expect(rows.at(-1)).toMatchObject({ desired: 3, ready: 3, upToDate: 3, reason: "Available" });
    const after = await workerVms(playground);
    expect(after).toHaveLength(3);
    expect(after.filter((vm) => before.has(vm.id))).toEqual([]);
  });
});
