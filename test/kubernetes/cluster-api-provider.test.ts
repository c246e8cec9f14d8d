// The provider's kinds and packaging with the real Cluster API v1.14 (core and kubeadm bootstrap managers) on a
// real management cluster, and the simulator's node-join emulation against a real workload cluster (ADR 0022).
// The test plays the provider's controllers, which are not written yet: it writes what they will write (a VM in
// the simulator booted with the Machine's bootstrap data, providerID, provisioned, addresses) and checks what
// Cluster API and the emulated kubelet make of it.
// - clusterctl (built from the module proxy) reads deploy/cluster-api/ as a provider repository: the components
//   and the cluster template, whose objects pass our CRDs and apply next to Cluster API; Cluster API reads the
//   GpuCluster by the v1beta2 contract (endpoint, failure domains, provisioned, Ready mirrored).
// - A MachineDeployment of GpuMachines: each Machine's cloud-config boots a simulator VM, the join is checked as
//   kubeadm checks it, a Node with providerID gpucloud://<vm id> registers, the Machines run with their nodeRef;
//   a stopped VM's Node goes NotReady, a deleted VM's Node goes; a wrong CA hash or an expired token leaves no
//   Node and says why in the simulator's admin API.
import { execFile } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { createManifestValidator } from "../../src/api/validate.ts";
import { Vm } from "../../src/cloud/wire.ts";
import {
  type BuiltCapi,
  builtKubeBinaries,
  clusterApiSourceDir,
  ensureCapiBinaries,
  REPO_ROOT,
} from "../../src/control-plane/binaries.ts";
import { type RunningClusterApi, startClusterApi } from "../../src/control-plane/cluster-api.ts";
import { type RunningControlPlane, startControlPlane } from "../../src/control-plane/control-plane.ts";
import { installCrds } from "../../src/control-plane/crds.ts";
import { type KubeTarget, kubeExpect, kubeRequest } from "../../src/control-plane/http.ts";
import { caCertHash, parseKubeadmJoin } from "../../src/control-plane/kubeadm-join.ts";
import { applyManifests, parseManifests, readManifests } from "../../src/control-plane/operator-identity.ts";
import {
  declareWorkloadCluster,
  type RunningWorkloadCluster,
  startWorkloadCluster,
} from "../../src/control-plane/workload-cluster.ts";
import type { NodeJoinRecord, RunningSimulator } from "../../src/simulator/index.ts";
import { startSimulator } from "../../src/simulator/index.ts";
import { eventually } from "../../src/util/eventually.ts";
import { isRecord } from "../../src/util/is-record.ts";
import { type Api, apiFor, opOf } from "../simulator/helpers.ts";
import {
  bootstrapDataOf,
  create,
  field,
  get,
  machinesRunning,
  machinesWithBootstrapData,
  mergePatch,
} from "./kube-objects.ts";

const run = promisify(execFile);
const PACKAGING = path.join(REPO_ROOT, "deploy/cluster-api");
const CAPI = "/apis/cluster.x-k8s.io/v1beta2";
const BOOTSTRAP = "/apis/bootstrap.cluster.x-k8s.io/v1beta2";
const INFRA_GROUP = "infrastructure.cluster.x-k8s.io";
const INFRA = `/apis/${INFRA_GROUP}/v1alpha1`;
const SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFJd4knmLnu7vb1EZH4MrFswCzeoXJt+H962yEUHk+WU me@example.com";

let capi: BuiltCapi | undefined;
let management: RunningControlPlane | undefined;
let workload: RunningWorkloadCluster | undefined;
let clusterApi: RunningClusterApi | undefined;
let simulator: RunningSimulator | undefined;
let work = "";

beforeAll(async () => {
  const kube = await builtKubeBinaries();
  if (kube === undefined) throw new Error("the kubernetes project's global setup builds the binaries first");
  capi = await ensureCapiBinaries({ kube, log: () => {} });
  work = await mkdtemp(path.join(tmpdir(), "gpuvm-capi-provider-"));
  const controllers = ["garbage-collector-controller", "namespace-controller", "clusterrole-aggregation-controller"];
  management = await startControlPlane({ bin: kube.bin, controllers, crdDirs: [path.join(REPO_ROOT, "crds")] });
  workload = await startWorkloadCluster({ bin: kube.bin });
  clusterApi = await startClusterApi({ managementCluster: management, capi, bin: kube.bin });
  // The provider's role for Cluster API's manager, as deploy/ and the components install it.
  await applyManifests(
    management.admin,
    await readManifests(path.join(REPO_ROOT, "deploy/cluster-api-manager-role.yaml")),
  );
  simulator = await startSimulator({
    port: 0,
    latencyMs: 0,
    rateLimit: false,
    nodeJoin: {
      clusters: [{ name: "gpu", kubeconfig: workload.kubeconfigYaml() }],
      retryIntervalMs: 500,
      discoveryTimeoutMs: 5000,
    },
  });
}, 300_000);

afterAll(async () => {
  await simulator?.close();
  await clusterApi?.close();
  await workload?.close();
  await management?.close();
  if (work !== "") await rm(work, { recursive: true, force: true });
});

function setup() {
  if (capi === undefined || management === undefined || workload === undefined || simulator === undefined) {
    throw new Error("beforeAll did not start everything");
  }
  return { capi, admin: management.admin, workload, cloud: apiFor(simulator) };
}

/** clusterctl with a home of its own (no version check, no proxy, nothing read from the user's config). */
async function clusterctl(args: string[], variables: Record<string, string> = {}): Promise<string> {
  const { capi } = setup();
  const home = path.join(work, "home");
  await mkdir(home, { recursive: true });
  const env = { PATH: process.env.PATH ?? "", HOME: home, CLUSTERCTL_DISABLE_VERSIONCHECK: "true", GOPROXY: "off" };
  try {
    const { stdout } = await run(capi.bin("clusterctl"), args, { env: { ...env, ...variables }, timeout: 60_000 });
    return stdout;
  } catch (error) {
    throw new Error(`clusterctl ${args.join(" ")}: ${(error as { stderr?: string }).stderr ?? ""}`, { cause: error });
  }
}

/** deploy/cluster-api/ as clusterctl's local repository (<provider>/<version>/), and a config naming it. */
async function providerRepository(): Promise<string> {
  const version = path.join(work, "repository", "infrastructure-gpucloud", "v0.1.0");
  await mkdir(version, { recursive: true });
  for (const file of await readdir(PACKAGING)) await copyFile(path.join(PACKAGING, file), path.join(version, file));
  const config = path.join(work, "clusterctl.yaml");
  await writeFile(
    config,
    `providers:\n  - name: gpucloud\n    url: file://${version}/infrastructure-components.yaml\n    type: InfrastructureProvider\n`,
  );
  return config;
}

function documents(yaml: string): Record<string, unknown>[] {
  return parseAllDocuments(yaml)
    .map((document) => document.toJS() as unknown)
    .filter(isRecord);
}

/** The collection path of an object (every kind here is plural by an s). */
function collectionOf(object: Record<string, unknown>, namespace: string): string {
  const apiVersion = String(object.apiVersion);
  const plural = `${String(object.kind).toLowerCase()}s`;
  return `${apiVersion === "v1" ? "/api/v1" : `/apis/${apiVersion}`}/namespaces/${namespace}/${plural}`;
}

const TEMPLATE_VARIABLES = {
  GPUCLOUD_API_URL: "https://gpucloud.example/v0.1",
  GPUCLOUD_API_KEY: "a-project-api-key",
  GPUCLOUD_PROJECT_ID: "6a3c5d2e-0000-4000-8000-000000000001",
  GPUCLOUD_IMAGE: "ubuntu22.04-k8s-v1.37.2",
  GPUCLOUD_SSH_PUBLIC_KEY: SSH_KEY,
  GPUCLOUD_LOCATIONS: "[us-east1-a, eu-iceland1-a]",
  CONTROL_PLANE_ENDPOINT_HOST: "api.gpu.example",
};

describe("clusterctl packaging (deploy/cluster-api/)", () => {
  it("clusterctl generate provider reads the components: one namespace, the provider's labels, GPUCLOUD_API_URL, every CRD", async () => {
    const config = await providerRepository();
    const described = await clusterctl([
      "generate",
      "provider",
      "--infrastructure",
      "gpucloud:v0.1.0",
      "--config",
      config,
      "--describe",
    ]);
    expect(described).toMatch(/TargetNamespace:\s+gpuvm-system/);
    expect(described).toMatch(/Variables:\s+- GPUCLOUD_API_URL/);
    const rendered = documents(
      await clusterctl(["generate", "provider", "--infrastructure", "gpucloud:v0.1.0", "--config", config], {
        GPUCLOUD_API_URL: "https://gpucloud.example/v0.1",
      }),
    );
    for (const object of rendered) {
      expect(field(object, "metadata", "labels"), String(field(object, "metadata", "name"))).toMatchObject({
        "cluster.x-k8s.io/provider": "infrastructure-gpucloud",
        "clusterctl.cluster.x-k8s.io": "",
      });
    }
    const crds = rendered.filter((object) => object.kind === "CustomResourceDefinition");
    const repositoryCrds = (await readdir(path.join(REPO_ROOT, "crds"))).filter((file) => file.endsWith(".yaml"));
    expect(crds).toHaveLength(repositoryCrds.length);
    const machineCrd = crds.find((crd) => field(crd, "metadata", "name") === `gpumachines.${INFRA_GROUP}`);
    expect(field(machineCrd, "metadata", "labels")).toMatchObject({ "cluster.x-k8s.io/v1beta2": "v1alpha1" });
    const deployment = rendered.find((object) => object.kind === "Deployment");
    const [container] = field(deployment, "spec", "template", "spec", "containers") as Record<string, unknown>[];
    expect(container).toMatchObject({ name: "manager", image: "localhost/gpuvm-operator:0.1.0" });
    expect(container?.args).toEqual(expect.arrayContaining(["--api-url", "https://gpucloud.example/v0.1"]));
    expect(rendered.filter((object) => object.kind === "Namespace").map((ns) => field(ns, "metadata", "name"))).toEqual(
      ["gpuvm-system"],
    );
  });

  it("clusterctl generate cluster --from the template: its variables, and objects of our kinds that pass our CRDs", async () => {
    const config = await providerRepository();
    const template = path.join(PACKAGING, "cluster-template.yaml");
    const variables = await clusterctl([
      "generate",
      "cluster",
      "gpu",
      "--from",
      template,
      "--target-namespace",
      "team-a",
      "--list-variables",
      "--config",
      config,
    ]);
    for (const name of [
      ...Object.keys(TEMPLATE_VARIABLES).filter((v) => v !== "GPUCLOUD_LOCATIONS"),
      "KUBERNETES_VERSION",
    ]) {
      expect(variables.split("Optional Variables:")[0]).toContain(`- ${name}`);
    }
    const generated = documents(await generatedCluster("team-a"));
    expect(generated.map((object) => object.kind)).toEqual([
      "Secret",
      "Cluster",
      "GpuCluster",
      "KubeadmControlPlane",
      "GpuMachineTemplate",
      "MachineDeployment",
      "GpuMachineTemplate",
      "KubeadmConfigTemplate",
    ]);
    for (const object of generated) expect(field(object, "metadata", "namespace")).toBe("team-a");
    const validator = createManifestValidator();
    const ours = generated.filter((object) => String(object.apiVersion).startsWith(`${INFRA_GROUP}/`));
    expect(ours).toHaveLength(3);
    for (const object of ours) expect(validator.check(object)).toEqual({ kind: object.kind, problems: [] });
    expect(field(ours[0], "spec")).toEqual({
      controlPlaneEndpoint: { host: "api.gpu.example", port: 6443 },
      locations: ["us-east1-a", "eu-iceland1-a"],
      credentialsRef: { name: "gpu-gpucloud-credentials" },
    });
  });

  it("applies next to Cluster API, which reads the GpuCluster by the v1beta2 contract", async () => {
    const { capi, admin } = setup();
    // The kubeadm control plane provider is not run here: its CRDs (labelled as its components label them) suffice.
    const source = await clusterApiSourceDir(capi);
    const bases = path.join(source, "controlplane/kubeadm/config/crd/bases");
    const kcpCrds = [];
    for (const file of await readdir(bases)) {
      for (const crd of parseManifests(await readFile(path.join(bases, file), "utf8"))) {
        kcpCrds.push({ ...crd, metadata: { ...crd.metadata, labels: { "cluster.x-k8s.io/v1beta2": "v1beta2" } } });
      }
    }
    await installCrds(admin, kcpCrds);
    await create(admin, "/api/v1/namespaces", { metadata: { name: "team-a" } });
    for (const object of documents(await generatedCluster("team-a"))) {
      await create(admin, collectionOf(object, "team-a"), object);
    }
    const ns = "/namespaces/team-a";
    // Cluster API's manager writes our kind: its owner reference, by its aggregated role.
    await eventually("the GpuCluster owned by its Cluster", async () => {
      const owners = field(await get(admin, `${INFRA}${ns}/gpuclusters/gpu`), "metadata", "ownerReferences");
      return Array.isArray(owners) && owners.some((owner) => field(owner, "kind") === "Cluster") ? true : undefined;
    });
    const aggregated = await get(admin, "/apis/rbac.authorization.k8s.io/v1/clusterroles/capi-aggregated-manager-role");
    expect(JSON.stringify(aggregated.rules)).toContain(
      '"resources":["gpuclusters","gpumachines","gpumachinetemplates"]',
    );
    // What the GpuCluster controller will write, read by the Cluster controller at the contract's paths.
    const failureDomains = [
      { name: "us-east1-a", controlPlane: true },
      { name: "eu-iceland1-a", controlPlane: true },
    ];
    await mergePatch(admin, `${INFRA}${ns}/gpuclusters/gpu/status`, {
      status: {
        initialization: { provisioned: true },
        failureDomains,
        conditions: [
          {
            type: "Ready",
            status: "True",
            reason: "Available",
            message: "2 failure domains",
            lastTransitionTime: now(),
          },
        ],
      },
    });
    const cluster = await eventually(
      "the Cluster's infrastructure provisioned",
      async () => {
        const found = await get(admin, `${CAPI}${ns}/clusters/gpu`);
        return field(found, "status", "initialization", "infrastructureProvisioned") === true ? found : undefined;
      },
      120_000,
    );
    expect(field(cluster, "spec", "controlPlaneEndpoint")).toEqual({ host: "api.gpu.example", port: 6443 });
    // Copied, sorted by name (Cluster API's contract accessor sorts them).
    expect(field(cluster, "status", "failureDomains")).toEqual(
      [...failureDomains].sort((a, b) => a.name.localeCompare(b.name)),
    );
    const conditions = field(cluster, "status", "conditions") as Record<string, unknown>[];
    expect(conditions.find((condition) => condition.type === "InfrastructureReady")).toMatchObject({ status: "True" });
  });
});

function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, "Z");
}

async function generatedCluster(namespace: string): Promise<string> {
  const config = await providerRepository();
  return clusterctl(
    [
      "generate",
      "cluster",
      "gpu",
      "--from",
      path.join(PACKAGING, "cluster-template.yaml"),
      "--kubernetes-version",
      setup().workload.version,
      "--control-plane-machine-count",
      "1",
      "--worker-machine-count",
      "2",
      "--target-namespace",
      namespace,
      "--config",
      config,
    ],
    TEMPLATE_VARIABLES,
  );
}

interface BootedMachine {
  name: string;
  vmId: string;
  bootstrapData: string;
}

/**
 * What the GpuMachine controller will do for a Machine: a VM booted with its bootstrap data (changed by `alter`,
 * to make a bad join), then the contract fields of its GpuMachine.
 */
async function provision(
  admin: KubeTarget,
  cloud: Api,
  coreNamespacePath: string,
  infraNamespacePath: string,
  machine: Record<string, unknown>,
  alter: (bootstrapData: string) => string = (data) => data,
): Promise<BootedMachine> {
  const name = String(field(machine, "spec", "infrastructureRef", "name"));
  const secretName = String(field(machine, "spec", "bootstrap", "dataSecretName"));
  const bootstrapData = bootstrapDataOf(await get(admin, `${coreNamespacePath}/secrets/${secretName}`));
  const vmId = await bootVm(cloud, name, alter(bootstrapData));
  const vm = Vm.parse((await cloud.call("GET", cloud.project(`/vms/${vmId}`))).body);
  const ip = vm.network_interfaces[0]?.ips[0];
  const addresses = [
    { type: "InternalIP", address: ip?.private_ipv4.address },
    { type: "ExternalIP", address: ip?.public_ipv4.address },
    { type: "Hostname", address: name },
  ];
  await mergePatch(admin, `${infraNamespacePath}/gpumachines/${name}`, { spec: { providerID: `gpucloud://${vmId}` } });
  await mergePatch(admin, `${infraNamespacePath}/gpumachines/${name}/status`, {
    status: { initialization: { provisioned: true }, addresses, failureDomain: vm.location },
  });
  return { name, vmId, bootstrapData };
}

async function joinOf(cloud: Api, vmId: string): Promise<NodeJoinRecord | undefined> {
  const answer = await cloud.admin("GET", `/node-joins/vms/${vmId}`);
  return answer.status === 200 ? (answer.body as NodeJoinRecord) : undefined;
}

async function settledJoin(cloud: Api, vmId: string): Promise<NodeJoinRecord> {
  return eventually(
    `the node join of VM ${vmId}`,
    async () => {
      const join = await joinOf(cloud, vmId);
      return join !== undefined && join.state !== "joining" ? join : undefined;
    },
    60_000,
  );
}

/** A VM in the simulator as the GpuMachine controller will make it: the bootstrap data is its startup script. */
async function bootVm(cloud: Api, name: string, startupScript: string): Promise<string> {
  const body = {
    name,
    type: "a100-80gb.8x",
    location: "us-east1-a",
    ssh_public_key: SSH_KEY,
    startup_script: startupScript,
  };
  const op = opOf(await cloud.call("POST", cloud.project("/vms"), body));
  expect((await cloud.settle("vm", op.operation_id)).state).toBe("SUCCEEDED");
  return op.metadata.id;
}

async function readyOf(target: KubeTarget, node: string): Promise<string | undefined> {
  const found = await kubeRequest(target, { path: `/api/v1/nodes/${node}` });
  if (found.status === 404) return "gone";
  const conditions = field(found.json, "status", "conditions");
  return Array.isArray(conditions) ? String(conditions.find((c) => field(c, "type") === "Ready")?.status) : undefined;
}

describe("node-join emulation with Cluster API's bootstrap data", () => {
  const ns = "/namespaces/workers";
  let booted: BootedMachine[] = [];

  it("boots each Machine's cloud-config in a simulator VM whose Node joins with gpucloud://<vm id>: the Machines run", async () => {
    const { admin, workload, cloud } = setup();
    await create(admin, "/api/v1/namespaces", { metadata: { name: "workers" } });
    const controlPlaneRef = await declareWorkloadCluster(admin, workload, { namespace: "workers", name: "gpu" });
    await create(admin, `${INFRA}${ns}/gpuclusters`, {
      apiVersion: `${INFRA_GROUP}/v1alpha1`,
      kind: "GpuCluster",
      metadata: { name: "gpu" },
      spec: { locations: ["us-east1-a"] },
    });
    await mergePatch(admin, `${INFRA}${ns}/gpuclusters/gpu/status`, {
      status: { initialization: { provisioned: true }, failureDomains: [{ name: "us-east1-a", controlPlane: true }] },
    });
    await create(admin, `${CAPI}${ns}/clusters`, {
      apiVersion: "cluster.x-k8s.io/v1beta2",
      kind: "Cluster",
      metadata: { name: "gpu" },
      spec: { controlPlaneRef, infrastructureRef: { apiGroup: INFRA_GROUP, kind: "GpuCluster", name: "gpu" } },
    });
    await create(admin, `${INFRA}${ns}/gpumachinetemplates`, {
      apiVersion: `${INFRA_GROUP}/v1alpha1`,
      kind: "GpuMachineTemplate",
      metadata: { name: "workers" },
      spec: { template: { spec: { type: "a100-80gb.8x", locations: ["us-east1-a"], sshPublicKey: SSH_KEY } } },
    });
    await create(admin, `${BOOTSTRAP}${ns}/kubeadmconfigtemplates`, {
      apiVersion: "bootstrap.cluster.x-k8s.io/v1beta2",
      kind: "KubeadmConfigTemplate",
      metadata: { name: "workers" },
      spec: {
        template: { spec: { joinConfiguration: { nodeRegistration: { name: "{{ ds.meta_data.local_hostname }}" } } } },
      },
    });
    await create(admin, `${CAPI}${ns}/machinedeployments`, {
      apiVersion: "cluster.x-k8s.io/v1beta2",
      kind: "MachineDeployment",
      metadata: { name: "workers" },
      spec: {
        clusterName: "gpu",
        replicas: 2,
        template: {
          spec: {
            clusterName: "gpu",
            version: workload.version,
            bootstrap: {
              configRef: { apiGroup: "bootstrap.cluster.x-k8s.io", kind: "KubeadmConfigTemplate", name: "workers" },
            },
            infrastructureRef: { apiGroup: INFRA_GROUP, kind: "GpuMachineTemplate", name: "workers" },
          },
        },
      },
    });

    // Cluster API makes two Machines, their GpuMachines from our template, and their bootstrap data.
    const machines = await machinesWithBootstrapData(admin, `${CAPI}${ns}/machines`, 2);
    booted = [];
    for (const machine of machines) {
      const name = String(field(machine, "spec", "infrastructureRef", "name"));
      const gpuMachine = await get(admin, `${INFRA}${ns}/gpumachines/${name}`);
      expect(field(gpuMachine, "spec")).toMatchObject({ type: "a100-80gb.8x", locations: ["us-east1-a"] });
      expect(field(gpuMachine, "metadata", "labels")).toMatchObject({ "cluster.x-k8s.io/cluster-name": "gpu" });
      booted.push(await provision(admin, cloud, `/api/v1${ns}`, `${INFRA}${ns}`, machine));
    }

    // The emulated kubelets: kubeadm's checks pass against the real cluster, the Nodes register.
    for (const machine of booted) {
      expect(await settledJoin(cloud, machine.vmId)).toMatchObject({
        state: "joined",
        cluster: "gpu",
        node: machine.name,
        providerID: `gpucloud://${machine.vmId}`,
      });
      const node = await get(workload.admin, `/api/v1/nodes/${machine.name}`);
      expect(field(node, "spec", "providerID")).toBe(`gpucloud://${machine.vmId}`);
      expect(field(node, "status", "capacity", "nvidia.com/gpu")).toBe("8");
    }
    const running = await machinesRunning(admin, `${CAPI}${ns}/machines`, 2);
    for (const machine of running) {
      const name = String(field(machine, "spec", "infrastructureRef", "name"));
      const vmId = booted.find((candidate) => candidate.name === name)?.vmId;
      expect(field(machine, "spec", "providerID")).toBe(`gpucloud://${vmId}`);
      expect(field(machine, "status", "nodeRef", "name")).toBe(name);
      expect(field(machine, "status", "initialization", "infrastructureProvisioned")).toBe(true);
      expect(field(machine, "status", "addresses")).toEqual(
        expect.arrayContaining([{ type: "Hostname", address: name }]),
      );
    }
  });

  it("holds the CRDs' rules on the real API server: a providerID is set once, a template does not change", async () => {
    const { admin } = setup();
    const [machine] = booted;
    if (machine === undefined) throw new Error("the first test booted no machine");
    const changed = await kubeRequest(admin, {
      method: "PATCH",
      path: `${INFRA}${ns}/gpumachines/${machine.name}`,
      body: { spec: { providerID: "gpucloud://another-vm" } },
      contentType: "application/merge-patch+json",
    });
    expect(changed.status).toBe(422);
    expect(field(changed.json, "message")).toContain("providerID cannot change once set: it names the machine's VM");
    const template = await kubeRequest(admin, {
      method: "PATCH",
      path: `${INFRA}${ns}/gpumachinetemplates/workers`,
      body: { spec: { template: { spec: { type: "a100-80gb.4x" } } } },
      contentType: "application/merge-patch+json",
    });
    expect(template.status).toBe(422);
    expect(field(template.json, "message")).toContain("spec.template is immutable");
    // The Cluster column reads Cluster API's label with escaped dots.
    const table = await kubeExpect(
      admin,
      { path: `${INFRA}${ns}/gpumachines/${machine.name}`, accept: "application/json;as=Table;v=v1;g=meta.k8s.io" },
      [200],
    );
    const rows = field(table.json, "rows");
    const columns = (field(table.json, "columnDefinitions") as { name: string }[]).map((column) => column.name);
    const cells = Array.isArray(rows) ? (field(rows[0], "cells") as unknown[]) : [];
    expect(cells[columns.indexOf("Cluster")]).toBe("gpu");
  });

  it("makes a stopped VM's Node NotReady and a started one's Ready; a deleted VM takes its Node", async () => {
    const { workload, cloud } = setup();
    const [machine] = booted;
    if (machine === undefined) throw new Error("the first test booted no machine");
    const action = async (name: "STOP" | "START") => {
      const op = opOf(await cloud.call("PATCH", cloud.project(`/vms/${machine.vmId}`), { action: name }));
      await cloud.settle("vm", op.operation_id);
    };
    await action("STOP");
    await eventually("the Node NotReady", async () =>
      (await readyOf(workload.admin, machine.name)) === "Unknown" ? true : undefined,
    );
    await action("START");
    await eventually("the Node Ready", async () =>
      (await readyOf(workload.admin, machine.name)) === "True" ? true : undefined,
    );
    const op = opOf(await cloud.call("DELETE", cloud.project(`/vms/${machine.vmId}`)));
    await cloud.settle("vm", op.operation_id);
    await eventually("the Node gone", async () =>
      (await readyOf(workload.admin, machine.name)) === "gone" ? true : undefined,
    );
  });

  it("leaves no Node for a wrong CA hash or an expired token: the Machine waits, the simulator's admin API says why", async () => {
    const { admin, workload, cloud } = setup();
    const machine = booted[1];
    if (machine === undefined) throw new Error("the first test booted no second machine");
    const join = parseKubeadmJoin(machine.bootstrapData);

    // A third Machine whose VM boots with a CA hash that is not the cluster's.
    await mergePatch(admin, `${CAPI}${ns}/machinedeployments/workers`, { spec: { replicas: 3 } });
    const machines = await machinesWithBootstrapData(admin, `${CAPI}${ns}/machines`, 3);
    const third = machines.find((m) => !booted.some((b) => b.name === field(m, "spec", "infrastructureRef", "name")));
    if (third === undefined) throw new Error("no third Machine");
    const wrongCa = (data: string) => data.replace(/sha256:[0-9a-f]{64}/g, caCertHash(admin.ca ?? ""));
    const bad = await provision(admin, cloud, `/api/v1${ns}`, `${INFRA}${ns}`, third, wrongCa);
    const refused = await settledJoin(cloud, bad.vmId);
    expect(refused).toMatchObject({ state: "refused", reason: "CAHashMismatch", providerID: `gpucloud://${bad.vmId}` });
    expect(await readyOf(workload.admin, bad.name)).toBe("gone");
    // Cluster API's own words on the Machine: provisioned, waiting for its Node.
    const waiting = `Waiting for a Node with spec.providerID gpucloud://${bad.vmId} to exist`;
    const thirdPath = `${CAPI}${ns}/machines/${String(field(third, "metadata", "name"))}`;
    await eventually("the third Machine waiting for its Node", async () => {
      const conditions = field(await get(admin, thirdPath), "status", "conditions");
      const nodeHealthy = Array.isArray(conditions)
        ? conditions.find((c) => field(c, "type") === "NodeHealthy")
        : undefined;
      return field(nodeHealthy, "message") === waiting ? true : undefined;
    });

    // The Machine has its Node, so Cluster API no longer refreshes its token: expired, the signer unsigns it.
    const tokenPath = `/api/v1/namespaces/kube-system/secrets/bootstrap-token-${join.discoveryToken.id}`;
    const past = new Date(Date.now() - 60_000).toISOString().replace(/\.\d+Z$/, "Z");
    await mergePatch(workload.admin, tokenPath, { data: { expiration: Buffer.from(past).toString("base64") } });
    await eventually("cluster-info unsigned for the expired token", async () => {
      const info = await get(workload.admin, "/api/v1/namespaces/kube-public/configmaps/cluster-info");
      return field(info, "data", `jws-kubeconfig-${join.discoveryToken.id}`) === undefined ? true : undefined;
    });
    const expired = await bootVm(cloud, "expired-token", machine.bootstrapData);
    const outcome = await settledJoin(cloud, expired);
    expect(outcome).toMatchObject({ state: "refused", reason: "TokenInvalidOrExpired" });
    expect(outcome.message).toContain(
      `token id "${join.discoveryToken.id}" is invalid for this cluster or it has expired`,
    );
    expect(await readyOf(workload.admin, "expired-token")).toBe("gone");
  });
});
