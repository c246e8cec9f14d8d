// The newcomer's journey (test/e2e/journey.ts) on a real control plane: `npm start -- --kube real` with the
// operator running as deploy/ installs it (its ServiceAccount's token, deploy/rbac.yaml, leader election), driven by
// kubectl of the same release. On top of the journey: Argo CD's health Lua and kstatus judge the live objects, and
// the audit log shows whether deploy/'s RBAC is exactly what the operator needs.
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { expect, it } from "vitest";
import { type CustomObject, eventually, listCloud, listObjects } from "../e2e/harness.ts";
import { describeJourney } from "../e2e/journey.ts";
import { argocdHealth, kstatus } from "./peers.ts";
import { auditedRequests, grantedPermissions, ONLY_THE_CLUSTER_API_CONTROLLERS_USE, rbacVerdict } from "./rbac.ts";
import { kubeBin } from "./shared.ts";

/**
 * Needed, but only on paths a run may or may not take, so the audit log may not show them: the operator's
 * code uses each (call sites named). They never count as unneeded, used or not.
 */
const NEEDED_WHEN_REACHED: Record<string, string> = {
  "get core/secrets (cluster-wide)": "publishConnectionDetails reads once on an informer cache miss",
  "get core/configmaps (cluster-wide)": "publishConnectionDetails reads once on an informer cache miss",
  "create core/secrets (cluster-wide)": "publishConnectionDetails, spec.connectionDetails.secretName",
  "create core/configmaps (cluster-wide)": "publishConnectionDetails, spec.connectionDetails.configMapName",
  "patch core/secrets (cluster-wide)": "publishConnectionDetails when the details change",
  "patch core/configmaps (cluster-wide)": "publishConnectionDetails when the details change",
  "patch events.k8s.io/events (cluster-wide)": "runtime/events.ts when an Event repeats (series)",
  "delete core/secrets (cluster-wide)": "deleteOwnedObjects when a GpuVm that published to a Secret goes",
  "delete core/configmaps (cluster-wide)": "deleteOwnedObjects when a GpuVm that published to a ConfigMap goes",
  // The examples hold no GpuBudget: a budget's ledger is written only where one covers an object.
  "patch gpucloud.dev/gpubudgets/status (cluster-wide)":
    "kubeBudgetRecords.writeStatus: a reservation, settlement or release in a budget (controllers/budgets/)",
  "get gpucloud.dev/gpucloudclaims (in gpuvm-system)":
    "ClaimStore.acquire reads the holder of a claim its create found taken (claims.ts)",
};

const OPERATOR_USER = "system:serviceaccount:gpuvm-system:gpuvm-operator";

function condition(object: CustomObject, type: string): string | undefined {
  return object.status?.conditions?.find((candidate) => candidate.type === type)?.status;
}

/** Objects seen with Reconciling=True while the examples converged, one per name and resourceVersion. */
const reconciling = new Map<string, CustomObject>();

describeJourney({
  kube: "real",
  kubectl: kubeBin("kubectl"),
  async whileConverging(objects) {
    for (const object of objects) {
      const generationSeen = object.status?.observedGeneration === object.metadata.generation;
      if (condition(object, "Reconciling") === "True" && generationSeen) {
        const version = (object.metadata as { resourceVersion?: string }).resourceVersion;
        reconciling.set(`${object.metadata.name}@${version}`, object);
      }
    }
  },
  async whenReady(objects) {
    expect(objects.length).toBeGreaterThanOrEqual(4);
    const [health, status] = await Promise.all([argocdHealth(objects), kstatus(objects)]);
    const names = objects.map((object) => object.metadata.name);
    expect(health.map((answer) => answer.status)).toEqual(names.map(() => "Healthy"));
    expect(status.map((answer) => answer.status)).toEqual(names.map(() => "Current"));

    const samples = [...reconciling.values()];
    expect(samples.length, "objects seen with Reconciling=True while converging").toBeGreaterThan(0);
    const [sampleHealth, sampleStatus] = await Promise.all([argocdHealth(samples), kstatus(samples)]);
    expect(new Set(sampleHealth.map((answer) => answer.status))).toEqual(new Set(["Progressing"]));
    expect(new Set(sampleStatus.map((answer) => answer.status))).toEqual(new Set(["InProgress"]));
  },
  after(playground) {
    it("marks a disk the cloud refuses Stalled: kstatus Failed, Argo CD Degraded", async () => {
      const pg = playground();
      const manifest = path.join(pg.stateDir, "stalled-disk.yaml");
      await writeFile(
        manifest,
        "apiVersion: gpucloud.dev/v1alpha1\nkind: GpuDisk\nmetadata:\n  name: nowhere\n  namespace: default\nspec:\n  size: 100GiB\n  location: nowhere1-z\n",
      );
      await pg.kubectl("apply", "-f", manifest);
      const stalled = await eventually("the disk Stalled", async () => {
        const disk = (await listObjects(pg, "gpudisks")).find((object) => object.metadata.name === "nowhere");
        return disk !== undefined && condition(disk, "Stalled") === "True" ? disk : undefined;
      });
      expect((await kstatus([stalled]))[0]?.status).toBe("Failed");
      expect((await argocdHealth([stalled]))[0]?.status).toBe("Degraded");
      await pg.kubectl("delete", "-f", manifest, "--timeout=60s");
    });

    it("removes the connection-details Secret with its GpuVm", async () => {
      const pg = playground();
      await eventually("trainer-connection to be gone", async () => {
        const left = await pg.kubectl("get", "secrets", "-n", "default", "-o", "name");
        return left.includes("secret/trainer-connection") ? undefined : true;
      });
    });

    it("publishes connection details to a ConfigMap, and removes it with its GpuVm", async () => {
      // The examples publish to a Secret; this covers the ConfigMap path (and its permissions).
      const pg = playground();
      const manifest = path.join(pg.stateDir, "viewer.yaml");
      await writeFile(
        manifest,
        [
          "apiVersion: gpucloud.dev/v1alpha1",
          "kind: GpuVm",
          "metadata:",
          "  name: viewer",
          "  namespace: default",
          "spec:",
          "  type: a100-80gb.1x",
          "  locations: [us-east1-a]",
          "  image: ubuntu22.04-nvidia-550",
          "  sshPublicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFJd4knmLnu7vb1EZH4MrFswCzeoXJt+H962yEUHk+WU viewer@example.com",
          "  connectionDetails:",
          "    configMapName: viewer-connection",
          "",
        ].join("\n"),
      );
      await pg.kubectl("apply", "-f", manifest);
      const host = await eventually("the ConfigMap with the VM's address", async () => {
        const text = await pg.kubectl("get", "configmap", "viewer-connection", "-o", "jsonpath={.data.host}");
        return text === "" ? undefined : text;
      });
      expect(host).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
      await pg.kubectl("delete", "-f", manifest, "--timeout=60s");
      await eventually("viewer-connection to be gone", async () => {
        const left = await pg.kubectl("get", "configmaps", "-n", "default", "-o", "name");
        return left.includes("configmap/viewer-connection") ? undefined : true;
      });
    });

    it("scales a GpuVmPool with kubectl scale gpool/workers --replicas 5 (the CRD's scale subresource)", async () => {
      // #15 on the real API server: kubectl of the same release goes through /scale, and the operator, under
      // deploy/'s RBAC, creates the five child GpuVms (owned by the pool) and their cloud VMs.
      const pg = playground();
      const poolFile = "examples/05-gpu-vm-pool.yaml";
      await pg.kubectl("apply", "-f", poolFile);
      const readyReplicas = (replicas: number) =>
        eventually(
          `workers with ${replicas} Ready replicas`,
          async () => {
            const pool = (await listObjects(pg, "gpuvmpools")).find((object) => object.metadata.name === "workers");
            const done =
              pool !== undefined &&
              pool.status?.observedGeneration === pool.metadata.generation &&
              condition(pool, "Ready") === "True" &&
              pool.status?.readyReplicas === replicas;
            return done ? pool : undefined;
          },
          180_000,
        );
      await readyReplicas(2);
      expect(await pg.kubectl("scale", "gpool/workers", "--replicas", "5")).toContain(
        "gpuvmpool.gpucloud.dev/workers scaled",
      );
      const pool = await readyReplicas(5);
      expect(pool.spec.replicas).toBe(5);
      const scale = JSON.parse(
        await pg.kubectl("get", "--raw", "/apis/gpucloud.dev/v1alpha1/namespaces/default/gpuvmpools/workers/scale"),
      ) as { kind: string; spec: { replicas: number }; status: { replicas: number; selector: string } };
      expect(scale).toMatchObject({
        kind: "Scale",
        spec: { replicas: 5 },
        status: { replicas: 5, selector: "gpucloud.dev/pool=workers" },
      });
      const children = (await listObjects(pg, "gpuvms")).filter((vm) =>
        (
          vm.metadata as { ownerReferences?: { kind: string; name: string; controller?: boolean }[] }
        ).ownerReferences?.some(
          (owner) => owner.kind === "GpuVmPool" && owner.name === "workers" && owner.controller === true,
        ),
      );
      expect(children).toHaveLength(5);
      expect(children.every((vm) => condition(vm, "Ready") === "True")).toBe(true);
      const selected = await pg.kubectl("get", "gvm", "-l", scale.status.selector, "-o", "name");
      expect(selected.trim().split("\n").sort()).toEqual(
        children.map((vm) => `gpuvm.gpucloud.dev/${vm.metadata.name}`).sort(),
      );
      const cloudVms = (await listCloud(pg, "vms")).filter((vm) => String(vm.name).startsWith("default-workers-"));
      expect(cloudVms.map((vm) => vm.id).sort()).toEqual(children.map((vm) => vm.status?.id).sort());
      await pg.kubectl("delete", "-f", poolFile, "--timeout=180s");
      expect((await listObjects(pg, "gpuvms")).filter((vm) => vm.metadata.name.startsWith("workers-"))).toEqual([]);
      await eventually("the pool's cloud VMs to be gone", async () => {
        const left = (await listCloud(pg, "vms")).filter((vm) => String(vm.name).startsWith("default-workers-"));
        return left.length === 0 ? true : undefined;
      });
    });

    it("ran under exactly deploy/'s RBAC: nothing refused, nothing granted in vain", async () => {
      const pg = playground();
      const requests = await auditedRequests(path.join(pg.stateDir, "kube", "audit.log"), OPERATOR_USER);
      const verdict = rbacVerdict(await grantedPermissions(), requests);
      console.log(`RBAC check: ${verdict.requests} requests of ${OPERATOR_USER}\n${JSON.stringify(verdict, null, 2)}`);
      expect(verdict.requests).toBeGreaterThan(50);
      expect(verdict.missing, "requests RBAC refused: deploy/rbac.yaml lacks these").toEqual([]);
      const unexplained = verdict.unused.filter(
        (permission) =>
          NEEDED_WHEN_REACHED[permission] === undefined && !ONLY_THE_CLUSTER_API_CONTROLLERS_USE.has(permission),
      );
      expect(unexplained, "granted by deploy/rbac.yaml, never used by the operator").toEqual([]);
    });
  },
});
