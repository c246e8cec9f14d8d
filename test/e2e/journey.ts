// The newcomer's journey: playground up, `kubectl apply -f examples/`, everything Ready, changes reach the cloud,
// `kubectl delete -f examples/` empties the cloud and leaves no finalizer behind. The same journey runs on the
// Kubernetes API test double (journey.test.ts) and on a real control plane (test/kubernetes/journey.test.ts).
import { stat } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type CustomObject,
  eventually,
  isReady,
  KINDS,
  listCloud,
  listObjects,
  type Playground,
  startPlayground,
  waitAllReady,
} from "./harness.ts";

export interface JourneyOptions {
  kube: "double" | "real";
  /** The kubectl to drive it with (PATH's by default). */
  kubectl?: string;
  /** Called with every object seen while the examples converge (polled), and once with all of them Ready. */
  whileConverging?: (objects: CustomObject[]) => Promise<void>;
  whenReady?: (objects: CustomObject[], playground: Playground) => Promise<void>;
  /** Registers further tests that run after the journey, before the playground stops. */
  after?: (playground: () => Playground) => void;
}

async function allObjects(playground: Playground): Promise<CustomObject[]> {
  return (await Promise.all(KINDS.map((kind) => listObjects(playground, kind.plural)))).flat();
}

const GIB = 1024 ** 3;

function sizeInBytes(size: unknown): number {
  const match = typeof size === "string" ? /^(\d+)(GiB|TiB)$/.exec(size) : null;
  if (match === null) throw new Error(`not a size: ${String(size)}`);
  return Number(match[1]) * (match[2] === "TiB" ? 1024 * GIB : GIB);
}

export function describeJourney(options: JourneyOptions): void {
  describe(`playground journey (${options.kube === "real" ? "real control plane" : "Kubernetes API test double"})`, () => {
    let playground: Playground;

    beforeAll(async () => {
      playground = await startPlayground({ latencyMs: 200, kube: options.kube, kubectl: options.kubectl });
    });

    afterAll(async () => {
      if (playground === undefined) return;
      const exit = await playground.close({ signal: "SIGTERM" });
      // Ctrl-C/SIGTERM is a clean stop: the operator first, then the servers, exit code 0.
      expect(exit.code).toBe(0);
      expect(playground.process.output).toContain("[playground] stopped.");
    });

    it("writes a kubeconfig, cloud.json and the credentials Secret", async () => {
      expect(playground.cloud.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v0\.1$/);
      const secret = await playground.kubectl("get", "secret", "gpucloud-credentials", "-n", "default", "-o", "json");
      const data = (JSON.parse(secret) as { data: Record<string, string> }).data;
      expect(Buffer.from(data.projectId ?? "", "base64").toString()).toBe(playground.cloud.projectId);
      expect(Buffer.from(data.apiUrl ?? "", "base64").toString()).toBe(playground.cloud.url);
    });

    it("makes every example Ready and creates one cloud resource per object", async () => {
      await playground.kubectl("apply", "-f", "examples/");
      if (options.whileConverging !== undefined) {
        // Sample the objects until all are Ready, so that the hook sees them while they reconcile.
        const check = options.whileConverging;
        await eventually(
          "every example Ready",
          async () => {
            const objects = await allObjects(playground);
            await check(objects);
            return objects.length > 0 && objects.every(isReady) ? true : undefined;
          },
          120_000,
          50,
        );
      }
      await playground.kubectl("wait", "--for=condition=Ready", "gvm/trainer", "--timeout=120s");
      await waitAllReady(playground);
      await options.whenReady?.(await allObjects(playground), playground);
      const claimed: string[] = [];
      for (const kind of KINDS) {
        const objects = await listObjects(playground, kind.plural);
        const cloudIds = (await listCloud(playground, kind.cloudRoute)).map((item) => item.id);
        expect(cloudIds.sort(), kind.kind).toEqual(objects.map((object) => object.status?.id).sort());
        claimed.push(...cloudIds.map(String));
      }
      // Who manages what is recorded in the operator's own namespace, not the examples' (ADR 0021).
      const claims = await playground.kubectl(
        "get",
        "gpucloudclaims",
        "-n",
        "gpuvm-system",
        "-o",
        "jsonpath={.items[*].spec.id}",
      );
      expect(claims.split(" ").filter(Boolean).sort()).toEqual(claimed.sort());
      expect(await playground.kubectl("get", "gpucloudclaims", "-n", "default", "-o", "name")).toBe("");
      const table = await playground.kubectl("get", "gpucloud");
      expect(table).toContain("trainer");
      // Columns read like kubectl's own: RUNNING, tcp, the GpuVm a disk is attached to, SYNCED next to READY.
      const row = (output: string, name: string): string[] =>
        (output.split("\n").find((line) => line.split(/\s+/)[0] === name) ?? "").trim().split(/\s+/);
      const vms = await playground.kubectl("get", "gvm");
      expect(vms.split("\n")[0]?.trim().split(/\s+/)).toEqual(
        expect.arrayContaining(["STATE", "READY", "SYNCED", "REASON"]),
      );
      expect(row(vms, "trainer")).toEqual(expect.arrayContaining(["RUNNING", "True", "Available"]));
      expect(row(await playground.kubectl("get", "gdisk"), "datasets")).toContain("trainer");
      expect(row(await playground.kubectl("get", "gfw"), "allow-ssh")).toContain("tcp");
    });

    it("keeps every file holding the API key, a password or a private key readable by its owner only", async () => {
      const modeOf = async (name: string): Promise<number> =>
        (await stat(path.join(playground.stateDir, name))).mode & 0o777;
      const files =
        options.kube === "real"
          ? ["kubeconfig", "operator.kubeconfig", "cloud.json", "cloud-state.json", "kube/certs/ca.key"]
          : ["kubeconfig", "cloud.json", "cloud-state.json", "cluster-state.json"];
      for (const file of files) {
        expect(await eventually(`${file} written`, () => modeOf(file)), file).toBe(0o600);
      }
    });

    it("shows the operator's Events in kubectl get events and kubectl describe", async () => {
      // The operator writes Events through events.k8s.io/v1; kubectl reads them through core/v1.
      const written = JSON.parse(
        await playground.kubectl("get", "events.v1.events.k8s.io", "-n", "default", "-o", "json"),
      ) as { items: { reason?: string; regarding?: { kind?: string; name?: string } }[] };
      const reasons = written.items
        .filter((event) => event.regarding?.kind === "GpuVm" && event.regarding.name === "trainer")
        .map((event) => event.reason ?? "");
      expect(reasons.length, "Events recorded for gvm/trainer").toBeGreaterThan(0);
      const listed = await playground.kubectl("get", "events", "-n", "default");
      expect(listed).toContain("gpuvm/trainer");
      const described = await playground.kubectl("describe", "gvm", "trainer");
      expect(described).not.toMatch(/Events:\s+<none>/);
      for (const reason of new Set(reasons)) expect(described).toMatch(new RegExp(`\\s${reason}\\s`));
    });

    it("stops and starts the VM when spec.powerState changes", async () => {
      const [vm] = await listObjects(playground, "gpuvms");
      const vmId = vm?.status?.id;
      expect(vmId).toBeTypeOf("string");
      const vmRoute = `/projects/${playground.cloud.projectId}/vms/${vmId}`;
      await playground.kubectl("patch", "gvm/trainer", "--type=merge", "-p", '{"spec":{"powerState":"Stopped"}}');
      await eventually("the cloud VM stopped", async () => {
        const cloudVm = (await playground.cloudGet(vmRoute)) as { state: string };
        return cloudVm.state === "STATE_STOPPED" ? true : undefined;
      });
      await playground.kubectl("patch", "gvm/trainer", "--type=merge", "-p", '{"spec":{"powerState":"Running"}}');
      await eventually("the cloud VM running again", async () => {
        const cloudVm = (await playground.cloudGet(vmRoute)) as { state: string };
        return cloudVm.state === "STATE_RUNNING" ? true : undefined;
      });
      await waitAllReady(playground);
    });

    it("changes the VM type within its family and grows the disk", async () => {
      const [vm] = await listObjects(playground, "gpuvms");
      const [disk] = await listObjects(playground, "gpudisks");
      const currentType = String(vm?.spec.type);
      const family = currentType.slice(0, currentType.lastIndexOf("."));
      const newType = currentType === `${family}.1x` ? `${family}.2x` : `${family}.1x`;
      const grownBytes = sizeInBytes(disk?.spec.size) + 1024 * GIB;
      const grownSize = `${grownBytes / (1024 * GIB)}TiB`;
      await playground.kubectl(
        "patch",
        "gvm/trainer",
        "--type=merge",
        "-p",
        JSON.stringify({ spec: { type: newType } }),
      );
      await playground.kubectl(
        "patch",
        `gpudisk/${disk?.metadata.name}`,
        "--type=merge",
        "-p",
        JSON.stringify({ spec: { size: grownSize } }),
      );
      const projectRoute = `/projects/${playground.cloud.projectId}`;
      await eventually(
        "the cloud VM to have the new type and run again",
        async () => {
          const cloudVm = (await playground.cloudGet(`${projectRoute}/vms/${vm?.status?.id}`)) as {
            type: string;
            state: string;
          };
          return cloudVm.type === newType && cloudVm.state === "STATE_RUNNING" ? true : undefined;
        },
        90_000,
      );
      await eventually("the cloud disk to have grown", async () => {
        const cloudDisk = (await playground.cloudGet(`${projectRoute}/disks/${disk?.status?.id}`)) as { size: string };
        return sizeInBytes(cloudDisk.size) === grownBytes ? true : undefined;
      });
      await waitAllReady(playground);
    });

    it("empties the cloud on kubectl delete -f examples/ and leaves no finalizer", async () => {
      await playground.kubectl("delete", "-f", "examples/", "--timeout=120s");
      for (const kind of KINDS) {
        // kubectl delete returns once every object is gone, and a finalizer may only go once the cloud resource
        // is gone: no waiting here.
        expect(await listObjects(playground, kind.plural), kind.kind).toEqual([]);
        expect(await listCloud(playground, kind.cloudRoute), kind.kind).toEqual([]);
      }
    });

    options.after?.(() => playground);
  });
}
