// Issue #31's "Done when", on the real control planes: `npm start -- --capi` (Cluster API v1.14.2's core and kubeadm
// bootstrap managers, a workload cluster the simulator's VMs join, the Cluster `playground`), the operator run as
// deploy/ installs it (its ServiceAccount, deploy/'s RBAC, leader election) by the test so that it can be killed,
// and the user's commands: kubectl apply of examples/cluster-api/, kubectl scale, a MachineHealthCheck, the paused
// annotation, clusterctl move to a third kube-apiserver, kubectl delete of the Cluster. The cloud is read through
// the simulator's API and its write log (every create and delete the operator sent).
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureCredentials } from "../../src/cli/playground/kube.ts";
import { operatorArgs } from "../../src/cli/playground/operator-process.ts";
import { type BuiltCapi, builtKubeBinaries, ensureCapiBinaries, REPO_ROOT } from "../../src/control-plane/binaries.ts";
import { type RunningClusterApi, startClusterApi } from "../../src/control-plane/cluster-api.ts";
import { type RunningControlPlane, startControlPlane } from "../../src/control-plane/control-plane.ts";
import { type KubeTarget, kubeExpect, kubeTargetOf } from "../../src/control-plane/http.ts";
import { applyManifests, installOperatorIdentity, readManifests } from "../../src/control-plane/operator-identity.ts";
import {
  installLoopbackControlPlaneKind,
  markControlPlaneInitialized,
} from "../../src/control-plane/workload-cluster.ts";
import type { WriteLogEntry } from "../../src/simulator/request-log.ts";
import { eventually, type Playground, RunningProcess, startPlayground } from "../e2e/harness.ts";
import { field, get, list, machinesRunning } from "./kube-objects.ts";
import { auditedRequests, grantedPermissions, ONLY_THE_CLUSTER_API_CONTROLLERS_USE, rbacVerdict } from "./rbac.ts";
import { kubeBin } from "./shared.ts";

const run = promisify(execFile);
const NS = "/namespaces/default";
const CAPI = `/apis/cluster.x-k8s.io/v1beta2${NS}`;
const INFRA = `/apis/infrastructure.cluster.x-k8s.io/v1alpha1${NS}`;
const GPUCLOUD = `/apis/gpucloud.dev/v1alpha1${NS}`;
const MACHINES = `${CAPI}/machines`;
const OPERATOR_USER = "system:serviceaccount:gpuvm-system:gpuvm-operator";
/** Cloud names of the example's VMs: `default-<machine>`. */
const WORKER_PREFIX = "default-gpu-workers-";

let pg: Playground | undefined;
let operator: RunningProcess | undefined;
let third: { plane: RunningControlPlane; clusterApi: RunningClusterApi; operator: RunningProcess } | undefined;
let capi: BuiltCapi | undefined;
const timings: Record<string, number> = {};

function setup() {
  if (pg === undefined) throw new Error("beforeAll did not start the playground");
  return pg;
}

async function targetOf(kubeconfigPath: string): Promise<KubeTarget> {
  return kubeTargetOf(await readFile(kubeconfigPath, "utf8"));
}

/**
 * The account's background list every 2 s (--poll-interval; default 30 s): a VM stopped behind the operator's back
 * is seen within seconds, so that the paused case shows a pause that holds, not an operator that had not looked.
 */
const POLL_INTERVAL = { GPUVM_POLL_INTERVAL: "2s" };

/** Starts the operator against the playground and waits until its Cluster API controllers run. */
async function operatorFor(playground: Playground): Promise<RunningProcess> {
  const started = new RunningProcess(playground.operatorArgs(), POLL_INTERVAL);
  await started.waitForOutput('"controller":"gpumachine"', 120_000);
  return started;
}

beforeAll(async () => {
  const started = Date.now();
  pg = await startPlayground({
    latencyMs: 500,
    withoutOperator: true,
    kube: "real",
    capi: true,
    kubectl: kubeBin("kubectl"),
  });
  timings.playgroundSeconds = (Date.now() - started) / 1000;
  operator = await operatorFor(pg);
  const kube = await builtKubeBinaries();
  if (kube === undefined) throw new Error("the kubernetes project's global setup builds the binaries first");
  capi = await ensureCapiBinaries({ kube, log: () => {} });
}, 360_000);

afterAll(async () => {
  await third?.operator.stop();
  await third?.clusterApi.close();
  await third?.plane.close();
  await operator?.stop();
  await pg?.close();
  console.log(`cluster-api-controllers timings: ${JSON.stringify(timings)}`);
}, 120_000);

interface CloudVm {
  id: string;
  name: string;
  state: string;
  location: string;
}

async function cloudItems<T>(route: string): Promise<T[]> {
  const playground = setup();
  const query = route === "vms" ? "?limit=500" : "";
  const body = (await playground.cloudGet(`/projects/${playground.cloud.projectId}/${route}${query}`)) as {
    items?: T[];
  };
  return body.items ?? [];
}

async function workerVms(): Promise<CloudVm[]> {
  return (await cloudItems<CloudVm>("vms")).filter((vm) => vm.name.startsWith(WORKER_PREFIX));
}

function adminUrl(): string {
  return `${new URL(setup().cloud.url).origin}/_sim`;
}

async function writeLog(): Promise<WriteLogEntry[]> {
  const answer = (await (await fetch(`${adminUrl()}/requests/log`)).json()) as { writes: WriteLogEntry[] };
  return answer.writes;
}

/** The account's family lists (GET …/vms?…, …/vpc/networks): shared by every object of the account. */
const FAMILY_LIST = /^GET \S*\/projects\/[^/]+\/(vms|disks|vpc\/networks|vpc\/firewall-rules)(\?\S*)?$/;

/**
 * The cloud requests received so far, by route, but the account's background family lists (which go on while
 * something of the account read them lately, paused or not: docs/cluster-api.md says so).
 */
async function cloudRequests(): Promise<Record<string, number>> {
  const answer = (await (await fetch(`${adminUrl()}/requests`)).json()) as { counts: Record<string, number> };
  return Object.fromEntries(Object.entries(answer.counts).filter(([route]) => !FAMILY_LIST.test(route)));
}

/** The operator's accepted creates of a cloud family (POST …/vms, …/vpc/networks, …) in the write log. */
function creates(log: WriteLogEntry[], route: string): WriteLogEntry[] {
  return log.filter(
    (entry) =>
      entry.method === "POST" &&
      entry.route === `/projects/:projectId/${route}` &&
      entry.status !== undefined &&
      entry.status !== "lost" &&
      entry.status < 300,
  );
}

async function timed<T>(name: string, work: () => Promise<T>): Promise<T> {
  const started = Date.now();
  try {
    return await work();
  } finally {
    timings[name] = (Date.now() - started) / 1000;
  }
}

/** Every Machine, Running, and the Node each names: Ready with the machine's providerID. */
async function runningWithNodes(management: KubeTarget, workload: KubeTarget, count: number) {
  const machines = await machinesRunning(management, MACHINES, count);
  for (const machine of machines) {
    const nodeName = String(field(machine, "status", "nodeRef", "name"));
    const node = await get(workload, `/api/v1/nodes/${nodeName}`);
    expect(field(node, "spec", "providerID")).toBe(field(machine, "spec", "providerID"));
    const conditions = field(node, "status", "conditions") as { type: string; status: string }[];
    expect(conditions.find((condition) => condition.type === "Ready")?.status).toBe("True");
  }
  return machines;
}

describe("the Cluster API provider on the real Cluster API (npm start -- --capi)", () => {
  it("kubectl apply -f examples/cluster-api/: 3 Machines Running with their Nodes, spread over the failure domains", async () => {
    const playground = setup();
    const management = await targetOf(playground.kubeconfigPath);
    const workload = await targetOf(path.join(playground.stateDir, "workload.kubeconfig"));
    const version = field(await get(workload, "/version"), "gitVersion");
    const deployment = await readFile(path.join(REPO_ROOT, "examples/cluster-api/03-machine-deployment.yaml"), "utf8");
    expect(deployment).toContain(`version: ${String(version)}`);
    const machines = await timed("threeMachinesRunningSeconds", async () => {
      await playground.kubectl("apply", "-f", "examples/cluster-api/");
      return runningWithNodes(management, workload, 3);
    });
    const domains = new Set<string>();
    for (const machine of machines) {
      const name = String(field(machine, "spec", "infrastructureRef", "name"));
      const gpuMachine = await get(management, `${INFRA}/gpumachines/${name}`);
      expect(field(gpuMachine, "spec", "providerID")).toBe(field(machine, "spec", "providerID"));
      expect(field(gpuMachine, "status", "initialization", "provisioned")).toBe(true);
      domains.add(String(field(gpuMachine, "status", "failureDomain")));
      expect(field(machine, "status", "failureDomain")).toBe(field(gpuMachine, "status", "failureDomain"));
    }
    expect([...domains].sort()).toEqual(["eu-iceland1-a", "us-east1-a"]);
    expect(await workerVms()).toHaveLength(3);
  });

  it("the template says what a node of it offers (status.capacity, status.nodeInfo): what its Nodes report", async () => {
    const playground = setup();
    const management = await targetOf(playground.kubeconfigPath);
    const workload = await targetOf(path.join(playground.stateDir, "workload.kubeconfig"));
    const template = await get(management, `${INFRA}/gpumachinetemplates/gpu-workers`);
    const capacity = field(template, "status", "capacity") as Record<string, string>;
    expect(field(template, "status", "nodeInfo")).toEqual({ architecture: "amd64", operatingSystem: "linux" });
    const [node] = await list(workload, "/api/v1/nodes");
    expect(capacity).toEqual({
      cpu: field(node, "status", "capacity", "cpu"),
      memory: field(node, "status", "capacity", "memory"),
      "nvidia.com/gpu": "8",
    });
  });

  it("scales to 5 through a SIGKILL of the operator mid-create, with no second VM for any Machine; then to 0", async () => {
    const playground = setup();
    const management = await targetOf(playground.kubeconfigPath);
    const workload = await targetOf(path.join(playground.stateDir, "workload.kubeconfig"));
    await playground.kubectl("scale", "machinedeployment", "gpu-workers", "--replicas", "5");
    // A create in flight: its intent recorded, its answer maybe not (the VM may exist without the GpuVm knowing).
    await eventually(
      "a new GpuVm with its create in flight",
      async () => {
        const vms = await list(management, `${GPUCLOUD}/gpuvms`);
        return vms.length > 3 && vms.some((vm) => field(vm, "status", "createPending") !== undefined)
          ? true
          : undefined;
      },
      60_000,
      25,
    );
    await operator?.stop("SIGKILL");
    operator = await operatorFor(playground);
    const machines = await timed("fiveMachinesAfterKillSeconds", () => runningWithNodes(management, workload, 5));
    const vms = await workerVms();
    expect(vms).toHaveLength(5);
    expect(new Set(vms.map((vm) => vm.name)).size).toBe(5);
    expect(vms.map((vm) => `gpucloud://${vm.id}`).sort()).toEqual(
      machines.map((m) => field(m, "spec", "providerID")).sort(),
    );
    expect(creates(await writeLog(), "vms")).toHaveLength(5);

    await timed("scaleToZeroSeconds", async () => {
      await playground.kubectl("scale", "machinedeployment", "gpu-workers", "--replicas", "0");
      await eventually(
        "no Machine left",
        async () => ((await list(management, MACHINES)).length === 0 ? true : undefined),
        180_000,
      );
    });
    expect(await workerVms()).toEqual([]);
    expect(await list(management, `${GPUCLOUD}/gpuvms`)).toEqual([]);
  });

  it("replaces a Machine whose Node a MachineHealthCheck finds GPUUnhealthy: its VM deleted, a new one joined", async () => {
    const playground = setup();
    const management = await targetOf(playground.kubeconfigPath);
    const workload = await targetOf(path.join(playground.stateDir, "workload.kubeconfig"));
    await playground.kubectl("scale", "machinedeployment", "gpu-workers", "--replicas", "2");
    const before = await runningWithNodes(management, workload, 2);
    await kubeExpect(
      management,
      {
        method: "POST",
        path: `${CAPI}/machinehealthchecks`,
        body: {
          apiVersion: "cluster.x-k8s.io/v1beta2",
          kind: "MachineHealthCheck",
          metadata: { name: "gpu-health" },
          spec: {
            clusterName: "playground",
            selector: { matchLabels: { "cluster.x-k8s.io/deployment-name": "gpu-workers" } },
            checks: { unhealthyNodeConditions: [{ type: "GPUUnhealthy", status: "True", timeoutSeconds: 1 }] },
          },
        },
      },
      [201],
    );
    await eventually("the MachineHealthCheck watching both", async () => {
      const check = await get(management, `${CAPI}/machinehealthchecks/gpu-health`);
      return field(check, "status", "currentHealthy") === 2 ? true : undefined;
    });
    const [sick] = before;
    const sickName = String(field(sick, "metadata", "name"));
    const sickNode = String(field(sick, "status", "nodeRef", "name"));
    const sickVm = String(field(sick, "spec", "providerID")).replace("gpucloud://", "");
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    // As a GPU health agent reports an Xid error: a condition of the Node (strategic merge: the others stay).
    await kubeExpect(
      workload,
      {
        method: "PATCH",
        path: `/api/v1/nodes/${sickNode}/status`,
        body: {
          status: {
            conditions: [
              {
                type: "GPUUnhealthy",
                status: "True",
                reason: "XidError",
                message: "Xid 79: GPU has fallen off the bus",
                lastHeartbeatTime: now,
                lastTransitionTime: now,
              },
            ],
          },
        },
        contentType: "application/strategic-merge-patch+json",
      },
      [200],
    );
    await timed("healthCheckReplacementSeconds", async () => {
      await eventually(
        "the sick Machine replaced by a Running one",
        async () => {
          const machines = await list(management, MACHINES);
          const running = machines.filter((m) => field(m, "status", "phase") === "Running");
          const names = machines.map((m) => String(field(m, "metadata", "name")));
          return !names.includes(sickName) && running.length === 2 ? true : undefined;
        },
        240_000,
      );
    });
    expect((await workerVms()).map((vm) => vm.id)).not.toContain(sickVm);
    const after = await runningWithNodes(management, workload, 2);
    expect(after.map((m) => field(m, "status", "nodeRef", "name"))).not.toContain(sickNode);
  });

  it("stops every cloud call while paused (cluster.x-k8s.io/paused), and catches up once resumed", async () => {
    const playground = setup();
    const management = await targetOf(playground.kubeconfigPath);
    await playground.kubectl("annotate", "gpumachines", "--all", "cluster.x-k8s.io/paused=");
    await playground.kubectl("annotate", "gpucluster", "playground", "cluster.x-k8s.io/paused=");
    const paused = (object: Record<string, unknown>) =>
      (field(object, "status", "conditions") as { type: string; status: string }[] | undefined)?.some(
        (c) => c.type === "Paused" && c.status === "True",
      ) === true;
    await eventually("every GpuMachine and the GpuCluster Paused", async () => {
      const objects = [
        ...(await list(management, `${INFRA}/gpumachines`)),
        ...(await list(management, `${INFRA}/gpuclusters`)),
      ];
      return objects.every(paused) ? true : undefined;
    });
    for (const machine of await list(management, `${INFRA}/gpumachines`)) {
      expect(field(machine, "metadata", "annotations", "clusterctl.cluster.x-k8s.io/block-move")).toBeUndefined();
    }
    const [vm] = await workerVms();
    if (vm === undefined) throw new Error("no worker VM");
    const before = await cloudRequests();
    // Drift nobody may look at while paused: a VM stopped behind the operator's back.
    await fetch(`${adminUrl()}/vms/${vm.id}/state`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ state: "STATE_STOPPED" }),
    });
    // Unpaused, the next background list (2 s) shows the VM stopped and its GpuVm starts it at once.
    await new Promise((resolve) => setTimeout(resolve, 8_000));
    expect(await cloudRequests()).toEqual(before);
    expect((await workerVms()).find((candidate) => candidate.id === vm.id)?.state).toBe("STATE_STOPPED");

    await playground.kubectl("annotate", "gpumachines", "--all", "cluster.x-k8s.io/paused-");
    await playground.kubectl("annotate", "gpucluster", "playground", "cluster.x-k8s.io/paused-");
    await eventually(
      "the stopped VM running again",
      async () => {
        const found = (await workerVms()).find((candidate) => candidate.id === vm.id);
        return found?.state === "STATE_RUNNING" ? true : undefined;
      },
      120_000,
    );
  });
});

/** clusterctl with a home of its own (no version check, nothing read from the user's config). */
async function clusterctl(args: string[]): Promise<string> {
  if (capi === undefined) throw new Error("no Cluster API build");
  const home = await mkdtemp(path.join(tmpdir(), "gpuvm-clusterctl-"));
  try {
    await mkdir(home, { recursive: true });
    const env = { PATH: process.env.PATH ?? "", HOME: home, CLUSTERCTL_DISABLE_VERSIONCHECK: "true", GOPROXY: "off" };
    const { stdout, stderr } = await run(capi.bin("clusterctl"), args, { env, timeout: 300_000 });
    return `${stdout}${stderr}`;
  } catch (error) {
    throw new Error(`clusterctl ${args.join(" ")}: ${(error as { stderr?: string }).stderr ?? ""}`, { cause: error });
  } finally {
    await rm(home, { recursive: true, force: true });
  }
}

/** A third kube-apiserver as a management cluster: Cluster API, the provider's kinds, the operator against it. */
async function startThirdManagementCluster(playground: Playground) {
  const kube = await builtKubeBinaries();
  if (kube === undefined || capi === undefined) throw new Error("no build");
  const controllers = ["garbage-collector-controller", "namespace-controller", "clusterrole-aggregation-controller"];
  const plane = await startControlPlane({ bin: kube.bin, controllers, crdDirs: [path.join(REPO_ROOT, "crds")] });
  const clusterApi = await startClusterApi({ managementCluster: plane, capi, bin: kube.bin });
  await applyManifests(plane.admin, await readManifests(path.join(REPO_ROOT, "deploy/cluster-api-manager-role.yaml")));
  await installLoopbackControlPlaneKind(plane.admin);
  const account = await installOperatorIdentity(plane.admin);
  await ensureCredentials(plane.admin, playground.cloud);
  const token = await plane.serviceAccountToken(account.namespace, account.name, 3600);
  const kubeconfigPath = path.join(plane.dataDir, "operator.kubeconfig");
  await writeFile(kubeconfigPath, plane.kubeconfigYaml({ token, user: `${account.namespace}:${account.name}` }), {
    mode: 0o600,
  });
  const args = operatorArgs({
    kubeconfigPath,
    apiUrl: playground.cloud.url,
    metricsPort: 0,
    healthPort: 0,
    latencyMs: 500,
    leaderElectionNamespace: account.namespace,
  });
  const started = new RunningProcess(args);
  await started.waitForOutput('"controller":"gpumachine"', 120_000);
  return { plane, clusterApi, operator: started };
}

describe("clusterctl move and the Cluster's deletion", () => {
  it("clusterctl move to a third kube-apiserver recreates nothing in the cloud; the new operator adopts", async () => {
    const playground = setup();
    third = await timed("thirdManagementClusterSeconds", () => startThirdManagementCluster(playground));
    const target = third.plane.admin;
    const vmsBefore = (await workerVms()).map((vm) => vm.id).sort();
    const logBefore = (await writeLog()).length;
    const targetKubeconfig = path.join(third.plane.dataDir, "admin.kubeconfig");
    await writeFile(targetKubeconfig, third.plane.kubeconfigYaml(), { mode: 0o600 });
    const said = await timed("clusterctlMoveSeconds", () =>
      clusterctl([
        "move",
        "--kubeconfig",
        playground.kubeconfigPath,
        "--to-kubeconfig",
        targetKubeconfig,
        "--namespace",
        "default",
        "-v",
        "1",
      ]),
    );
    expect(said).toContain("Moving Cluster API objects");
    // The control plane provider's part: the moved LoopbackControlPlane says initialized again.
    const workload = await targetOf(path.join(playground.stateDir, "workload.kubeconfig"));
    const version = String(field(await get(workload, "/version"), "gitVersion"));
    await markControlPlaneInitialized(target, { version }, { namespace: "default", name: "playground" });
    await timed("movedMachinesRunningSeconds", () => machinesRunning(target, MACHINES, 2));
    await eventually(
      "the moved GpuVms Ready in the new cluster",
      async () => {
        const vms = await list(target, `${GPUCLOUD}/gpuvms`);
        const ready = vms.filter((vm) =>
          (field(vm, "status", "conditions") as { type: string; status: string }[] | undefined)?.some(
            (c) => c.type === "Ready" && c.status === "True",
          ),
        );
        return vms.length === 2 && ready.length === 2 ? true : undefined;
      },
      120_000,
    );
    const source = await targetOf(playground.kubeconfigPath);
    expect(await list(source, `${CAPI}/clusters`)).toEqual([]);
    expect(await list(source, `${GPUCLOUD}/gpuvms`)).toEqual([]);
    expect((await workerVms()).map((vm) => vm.id).sort()).toEqual(vmsBefore);
    const since = (await writeLog()).slice(logBefore);
    expect(since.filter((entry) => entry.method === "POST" || entry.method === "DELETE")).toEqual([]);
  });

  it("deleting the Cluster deletes every VM, disk, network and rule it made", async () => {
    if (third === undefined) throw new Error("the move did not happen");
    const target = third.plane.admin;
    await timed("clusterDeletionSeconds", async () => {
      await kubeExpect(target, { method: "DELETE", path: `${CAPI}/clusters/playground` }, [200, 202]);
      await eventually(
        "the Cluster gone",
        async () => ((await list(target, `${CAPI}/clusters`)).length === 0 ? true : undefined),
        240_000,
      );
    });
    expect(await workerVms()).toEqual([]);
    expect(await cloudItems("disks")).toEqual([]);
    expect(
      (await cloudItems<{ name: string }>("vpc/networks")).filter((network) => network.name !== "default"),
    ).toEqual([]);
    expect(await cloudItems("vpc/firewall-rules")).toEqual([]);
    for (const plural of ["gpuvms", "gpunetworks", "gpufirewallrules"])
      expect(await list(target, `${GPUCLOUD}/${plural}`)).toEqual([]);
  });

  it("ran under deploy/'s RBAC: nothing refused, and every permission only the Cluster API controllers use was used", async () => {
    const playground = setup();
    if (third === undefined) throw new Error("the move did not happen");
    const requests = [
      ...(await auditedRequests(path.join(playground.stateDir, "kube", "audit.log"), OPERATOR_USER)),
      ...(await auditedRequests(third.plane.auditLogPath, OPERATOR_USER)),
    ];
    const verdict = rbacVerdict(await grantedPermissions(), requests);
    expect(verdict.missing, "requests RBAC refused: deploy/rbac.yaml lacks these").toEqual([]);
    expect(verdict.unused.filter((permission) => ONLY_THE_CLUSTER_API_CONTROLLERS_USE.has(permission))).toEqual([]);
  });
});
