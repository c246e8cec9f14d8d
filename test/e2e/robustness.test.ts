// Robustness: the operator killed with SIGKILL in the middle of creates leaves exactly one cloud resource per
// object after a restart, and dropped watches plus a 410 Gone from the Kubernetes API do not stop convergence.
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type CustomObject,
  eventually,
  KINDS,
  listCloud,
  listObjects,
  type Playground,
  type RunningProcess,
  startOperator,
  startPlayground,
  waitAllReady,
} from "./harness.ts";

const EXTRA_DISKS = ["scratch-a", "scratch-b", "scratch-c", "scratch-d", "scratch-e"];

function extraDisksYaml(size: string): string {
  return EXTRA_DISKS.map(
    (name) =>
      `apiVersion: gpucloud.dev/v1alpha1\nkind: GpuDisk\nmetadata:\n  name: ${name}\n  namespace: default\nspec:\n  size: ${size}\n  location: us-east1-a\n`,
  ).join("---\n");
}

function hasOperationInProgress(object: CustomObject): boolean {
  const operation = object.status?.operation as { state?: string } | undefined;
  return operation?.state === "IN_PROGRESS";
}

async function allObjects(playground: Playground): Promise<CustomObject[]> {
  return (await Promise.all(KINDS.map((kind) => listObjects(playground, kind.plural)))).flat();
}

async function expectOneCloudResourcePerObject(playground: Playground): Promise<void> {
  for (const kind of KINDS) {
    const objects = await listObjects(playground, kind.plural);
    const cloudItems = await listCloud(playground, kind.cloudRoute);
    const names = cloudItems.map((item) => item.name);
    expect(new Set(names).size, `${kind.kind}: duplicate cloud names ${names.join(",")}`).toBe(names.length);
    expect(cloudItems.map((item) => item.id).sort(), kind.kind).toEqual(
      objects.map((object) => object.status?.id).sort(),
    );
  }
}

describe("operator crash and Kubernetes API faults", () => {
  let playground: Playground;
  let operator: RunningProcess | undefined;
  let extraDisksFile: string;

  beforeAll(async () => {
    // Slow operations so that the SIGKILL lands while creates are in flight.
    playground = await startPlayground({ latencyMs: 1000, withoutOperator: true });
    extraDisksFile = path.join(playground.stateDir, "extra-disks.yaml");
  });

  afterAll(async () => {
    if (operator !== undefined) {
      const exit = await operator.stop("SIGTERM");
      expect(exit.code, operator.output.slice(-2000)).toBe(0);
    }
    if (playground !== undefined) {
      // Ctrl-C is as clean as SIGTERM.
      const exit = await playground.close({ signal: "SIGINT" });
      expect(exit.code, playground.process.output.slice(-2000)).toBe(0);
    }
  });

  it("prints the command that runs the operator against it", () => {
    expect(playground.process.output).toContain("The operator is not running");
    expect(playground.process.output).toMatch(/npm run operator -- --kubeconfig \S+ --api-url http/);
  });

  it("creates exactly one cloud resource per object after a SIGKILL in the middle of creates", async () => {
    await writeFile(extraDisksFile, extraDisksYaml("100GiB"));
    await playground.kubectl("apply", "-f", "examples/", "-f", extraDisksFile);
    const firstOperator = startOperator(playground);
    operator = firstOperator;
    // Kill as soon as a create is in flight. The VM and the rule wait for their dependencies to be Ready, so
    // when the first disk or network create is in flight they have not been created yet: the crash is
    // guaranteed to land in the middle of the creates, however slow the machine is.
    const inFlight = (object: CustomObject): boolean =>
      object.status?.createPending !== undefined || hasOperationInProgress(object);
    await eventually(
      "the first cloud create to be in flight",
      async () => ((await allObjects(playground)).some(inFlight) ? true : undefined),
      60_000,
      50,
    );
    const killed = await firstOperator.stop("SIGKILL");
    operator = undefined;
    expect(killed.signal).toBe("SIGKILL");
    const afterCrash = await allObjects(playground);
    const unfinished = afterCrash.filter((object) => object.status?.id === undefined || inFlight(object));
    expect(unfinished.length, "objects whose create had not finished at the crash").toBeGreaterThan(0);

    operator = startOperator(playground);
    await waitAllReady(playground, 150_000);
    await expectOneCloudResourcePerObject(playground);
  });

  it("converges through dropped watches and a 410 Gone", async () => {
    const kubeUrl = playground.kubeUrl;
    const injectFault = async (action: "drop-watches" | "compact"): Promise<void> => {
      const response = await fetch(`${kubeUrl}/_double/faults/${action}`, { method: "POST" });
      expect(response.ok, `${action} → HTTP ${response.status}`).toBe(true);
    };
    // A write the operator's GpuDisk/GpuVm/… informers do not watch moves the latest resourceVersion past theirs;
    // then forget the history and end every watch: they resume from a version that is gone and get 410 Gone.
    await playground.kubectl("create", "configmap", "e2e-resource-version-bump", "-n", "default");
    await injectFault("compact");
    await injectFault("drop-watches");
    await writeFile(extraDisksFile, extraDisksYaml("200GiB"));
    await playground.kubectl("apply", "-f", extraDisksFile);
    await injectFault("drop-watches");
    await eventually(
      "every extra disk grown in the cloud",
      async () => {
        const extraIds = (await listObjects(playground, "gpudisks"))
          .filter((disk) => EXTRA_DISKS.includes(disk.metadata.name))
          .map((disk) => disk.status?.id);
        const grown = (await listCloud(playground, "disks")).filter(
          (disk) => extraIds.includes(String(disk.id)) && disk.size === "200GiB",
        );
        return grown.length === EXTRA_DISKS.length ? true : undefined;
      },
      120_000,
    );
    await waitAllReady(playground);
    await expectOneCloudResourcePerObject(playground);
  });
});
