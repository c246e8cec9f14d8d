// The real Cluster API (core manager and kubeadm bootstrap provider, v1.14) on a management cluster of its own,
// with a workload cluster declared through an externally managed control plane (ADR 0022): a MachineDeployment
// of 2 workers becomes Machines, KubeadmConfigs and bootstrap data whose `kubeadm join` passes kubeadm's own
// checks against the workload cluster; the test plays the infrastructure provider (a minimal infrastructure
// CRD defined here) and the kubelet, and the Machines reach Running with a nodeRef. Then the join checker's
// refusals, on the same real clusters: a wrong CA hash, a wrong token secret, an unknown endpoint, an expired token.
import { mkdtemp, readdir, readFile, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { builtKubeBinaries, ensureCapiBinaries } from "../../src/control-plane/binaries.ts";
import { type RunningClusterApi, startClusterApi } from "../../src/control-plane/cluster-api.ts";
import { type RunningControlPlane, startControlPlane } from "../../src/control-plane/control-plane.ts";
import { installCrds } from "../../src/control-plane/crds.ts";
import { type KubeTarget, kubeExpect, kubeRequest } from "../../src/control-plane/http.ts";
import { caCertHash, checkKubeadmJoin, parseKubeadmJoin } from "../../src/control-plane/kubeadm-join.ts";
import { registerNode } from "../../src/control-plane/node-registration.ts";
import { applyManifests } from "../../src/control-plane/operator-identity.ts";
import {
  declareWorkloadCluster,
  type RunningWorkloadCluster,
  startWorkloadCluster,
} from "../../src/control-plane/workload-cluster.ts";
import { eventually } from "../../src/util/eventually.ts";
import { isRecord } from "../../src/util/is-record.ts";
import {
  bootstrapDataOf,
  create,
  field,
  list,
  machinesRunning,
  machinesWithBootstrapData,
  mergePatch,
} from "./kube-objects.ts";

const NAMESPACE = "workers";
const CLUSTER = "gpu";
const INFRA_GROUP = "infrastructure.test.gpucloud.dev";
const INFRA_VERSION = "v1alpha1";
const CAPI = "/apis/cluster.x-k8s.io/v1beta2";
const BOOTSTRAP = "/apis/bootstrap.cluster.x-k8s.io/v1beta2";
const INFRA = `/apis/${INFRA_GROUP}/${INFRA_VERSION}`;

let management: RunningControlPlane | undefined;
let workload: RunningWorkloadCluster | undefined;
let clusterApi: RunningClusterApi | undefined;

/** A minimal infrastructure kind to the v1beta2 contract (the real provider's kinds come later). */
function infraCrd(kind: string, plural: string): Record<string, unknown> {
  const open = { type: "object", "x-kubernetes-preserve-unknown-fields": true };
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.${INFRA_GROUP}`, labels: { "cluster.x-k8s.io/v1beta2": INFRA_VERSION } },
    spec: {
      group: INFRA_GROUP,
      names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() },
      scope: "Namespaced",
      versions: [
        {
          name: INFRA_VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: { openAPIV3Schema: { type: "object", properties: { spec: open, status: open } } },
        },
      ],
    },
  };
}

/** A MachineDeployment of workers from the test's templates (the selector is left to Cluster API's defaulting). */
function machineDeployment(name: string, replicas: number, version: string): Record<string, unknown> {
  return {
    apiVersion: "cluster.x-k8s.io/v1beta2",
    kind: "MachineDeployment",
    metadata: { name },
    spec: {
      clusterName: CLUSTER,
      replicas,
      template: {
        spec: {
          clusterName: CLUSTER,
          version,
          bootstrap: {
            configRef: { apiGroup: "bootstrap.cluster.x-k8s.io", kind: "KubeadmConfigTemplate", name: "workers" },
          },
          infrastructureRef: { apiGroup: INFRA_GROUP, kind: "TestInfraMachineTemplate", name: "workers" },
        },
      },
    },
  };
}

beforeAll(async () => {
  const kube = await builtKubeBinaries();
  if (kube === undefined) throw new Error("the kubernetes project's global setup builds the binaries first");
  const capi = await ensureCapiBinaries({ kube, log: () => {} });
  const controllers = ["garbage-collector-controller", "namespace-controller", "clusterrole-aggregation-controller"];
  management = await startControlPlane({ bin: kube.bin, controllers });
  workload = await startWorkloadCluster({ bin: kube.bin });
  clusterApi = await startClusterApi({
    managementCluster: management,
    capi,
    bin: kube.bin,
    log: (line) => console.log(line),
  });
}, 300_000);

afterAll(async () => {
  await clusterApi?.close();
  await workload?.close();
  await management?.close();
});

function clusters(): { admin: KubeTarget; workloadAdmin: KubeTarget; workload: RunningWorkloadCluster } {
  if (management === undefined || workload === undefined) throw new Error("beforeAll did not start the clusters");
  return { admin: management.admin, workloadAdmin: workload.admin, workload };
}

describe("Cluster API v1.14 with a workload cluster", () => {
  let bootstrapData: string[] = [];

  it("turns a MachineDeployment of 2 into Machines that join the workload cluster and run", async () => {
    const { admin, workloadAdmin, workload } = clusters();
    await create(admin, "/api/v1/namespaces", { metadata: { name: NAMESPACE } });
    const controlPlaneRef = await declareWorkloadCluster(admin, workload, { namespace: NAMESPACE, name: CLUSTER });

    // The infrastructure provider's part: its CRDs, and RBAC aggregated to the Cluster API manager.
    await installCrds(admin, [
      infraCrd("TestInfraCluster", "testinfraclusters"),
      infraCrd("TestInfraMachine", "testinframachines"),
      infraCrd("TestInfraMachineTemplate", "testinframachinetemplates"),
    ]);
    await applyManifests(admin, [
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        metadata: { name: "test-infra-provider", labels: { "cluster.x-k8s.io/aggregate-to-manager": "true" } },
        rules: [{ apiGroups: [INFRA_GROUP], resources: ["*"], verbs: ["*"] }],
      },
    ]);
    const ns = `/namespaces/${NAMESPACE}`;
    await create(admin, `${INFRA}${ns}/testinfraclusters`, {
      apiVersion: `${INFRA_GROUP}/${INFRA_VERSION}`,
      kind: "TestInfraCluster",
      metadata: { name: CLUSTER },
      spec: {},
    });
    await mergePatch(admin, `${INFRA}${ns}/testinfraclusters/${CLUSTER}/status`, {
      status: { initialization: { provisioned: true } },
    });
    await create(admin, `${CAPI}${ns}/clusters`, {
      apiVersion: "cluster.x-k8s.io/v1beta2",
      kind: "Cluster",
      metadata: { name: CLUSTER },
      spec: {
        controlPlaneRef,
        infrastructureRef: { apiGroup: INFRA_GROUP, kind: "TestInfraCluster", name: CLUSTER },
      },
    });
    await create(admin, `${INFRA}${ns}/testinframachinetemplates`, {
      apiVersion: `${INFRA_GROUP}/${INFRA_VERSION}`,
      kind: "TestInfraMachineTemplate",
      metadata: { name: "workers" },
      spec: { template: { spec: { type: "a100-80gb.1x" } } },
    });
    await create(admin, `${BOOTSTRAP}${ns}/kubeadmconfigtemplates`, {
      apiVersion: "bootstrap.cluster.x-k8s.io/v1beta2",
      kind: "KubeadmConfigTemplate",
      metadata: { name: "workers" },
      spec: {
        template: { spec: { joinConfiguration: { nodeRegistration: { name: "{{ ds.meta_data.local_hostname }}" } } } },
      },
    });
    await create(admin, `${CAPI}${ns}/machinedeployments`, machineDeployment("workers", 2, workload.version));

    // Cluster API's webhooks, served on loopback: defaulting (the selector the schema requires), validation,
    // and conversion to the older API version by each manager.
    const deployment = (await kubeExpect(admin, { path: `${CAPI}${ns}/machinedeployments/workers` }, [200])).json;
    expect(field(deployment, "spec", "selector", "matchLabels")).toMatchObject({
      "cluster.x-k8s.io/deployment-name": "workers",
    });
    const refused = await kubeRequest(admin, {
      method: "POST",
      path: `${CAPI}${ns}/machinedeployments?dryRun=All`,
      body: machineDeployment("bad-version", 1, "vNext"),
    });
    expect(refused.status).toBe(422);
    expect(field(refused.json, "message")).toContain(
      'admission webhook "validation.machinedeployment.cluster.x-k8s.io" denied the request',
    );
    expect(field(refused.json, "message")).toContain("must be a valid semantic version");
    const v1beta1 = await kubeExpect(
      admin,
      { path: `/apis/cluster.x-k8s.io/v1beta1${ns}/machinedeployments/workers` },
      [200],
    );
    expect(field(v1beta1.json, "apiVersion")).toBe("cluster.x-k8s.io/v1beta1");
    const template = await kubeExpect(
      admin,
      { path: `/apis/bootstrap.cluster.x-k8s.io/v1beta1${ns}/kubeadmconfigtemplates/workers` },
      [200],
    );
    expect(field(template.json, "apiVersion")).toBe("bootstrap.cluster.x-k8s.io/v1beta1");

    // Cluster API: the Cluster takes the control plane's word that it is initialized and reachable.
    const cluster = await eventually(
      "the Cluster's control plane initialized",
      async () => {
        const found = (await kubeExpect(admin, { path: `${CAPI}${ns}/clusters/${CLUSTER}` }, [200])).json;
        return field(found, "status", "initialization", "controlPlaneInitialized") === true ? found : undefined;
      },
      120_000,
    );
    expect(field(cluster, "spec", "controlPlaneEndpoint")).toEqual(workload.endpoint);

    // Two Machines with their KubeadmConfigs and bootstrap data.
    const machines = await machinesWithBootstrapData(admin, `${CAPI}${ns}/machines`, 2);
    expect(await list(admin, `${BOOTSTRAP}${ns}/kubeadmconfigs`)).toHaveLength(2);
    const endpoint = `${workload.endpoint.host}:${workload.endpoint.port}`;
    bootstrapData = [];
    for (const machine of machines) {
      const secretName = String(field(machine, "spec", "bootstrap", "dataSecretName"));
      const secret = (await kubeExpect(admin, { path: `/api/v1${ns}/secrets/${secretName}` }, [200])).json;
      expect(Buffer.from(String(field(secret, "data", "format")), "base64").toString()).toBe("cloud-config");
      const data = bootstrapDataOf(isRecord(secret) ? secret : {});
      bootstrapData.push(data);
      const join = parseKubeadmJoin(data);
      expect(join.apiServerEndpoint).toBe(endpoint);
      expect(join.caCertHashes).toEqual([caCertHash(workload.caPem)]);
      // The token exists in the workload cluster's kube-system, as the kubeadm bootstrap provider created it.
      const token = (
        await kubeExpect(
          workloadAdmin,
          { path: `/api/v1/namespaces/kube-system/secrets/bootstrap-token-${join.discoveryToken.id}` },
          [200],
        )
      ).json;
      expect(field(token, "type")).toBe("bootstrap.kubernetes.io/token");
      // kubeadm's own checks pass (the bootstrap signer signs cluster-info for a new token within moments).
      const check = await eventually("the join accepted", async () => {
        const result = await checkKubeadmJoin(data, { knownEndpoints: [endpoint] });
        return result.ok ? result : undefined;
      });
      expect(check.verified.username).toBe(`system:bootstrap:${join.discoveryToken.id}`);
      expect(check.verified.groups).toContain("system:bootstrappers:kubeadm:default-node-token");
    }

    // The infrastructure provider's part: each machine provisioned with a providerID, and its Node joins.
    const infraMachines = await list(admin, `${INFRA}${ns}/testinframachines`);
    expect(infraMachines).toHaveLength(2);
    for (const [index, infraMachine] of infraMachines.entries()) {
      const name = String(field(infraMachine, "metadata", "name"));
      const providerID = `test://${name}`;
      await mergePatch(admin, `${INFRA}${ns}/testinframachines/${name}`, { spec: { providerID } });
      await mergePatch(admin, `${INFRA}${ns}/testinframachines/${name}/status`, {
        status: {
          initialization: { provisioned: true },
          addresses: [{ type: "InternalIP", address: `10.0.0.${10 + index}` }],
        },
      });
      await registerNode(workloadAdmin, {
        name,
        providerID,
        addresses: [{ type: "InternalIP", address: `10.0.0.${10 + index}` }],
        capacity: { "nvidia.com/gpu": "1" },
        kubeletVersion: workload.version,
      });
    }
    const running = await machinesRunning(admin, `${CAPI}${ns}/machines`, 2);
    const providerIds = running.map((machine) => field(machine, "spec", "providerID")).sort();
    expect(providerIds).toEqual(
      infraMachines.map((machine) => `test://${String(field(machine, "metadata", "name"))}`).sort(),
    );
    for (const machine of running) {
      expect(field(machine, "status", "nodeRef", "name")).toBe(
        String(field(machine, "spec", "infrastructureRef", "name")),
      );
    }
  });

  it("refuses a join with a wrong CA hash, a wrong token secret, an unknown endpoint or an expired token", async () => {
    const { workloadAdmin, workload } = clusters();
    const [data] = bootstrapData;
    if (data === undefined) throw new Error("the first test produced no bootstrap data");
    const endpoint = `${workload.endpoint.host}:${workload.endpoint.port}`;
    const join = parseKubeadmJoin(data);
    const known = { knownEndpoints: [endpoint] };

    const otherHash = caCertHash(clusters().admin.ca ?? "");
    const wrongHash = await checkKubeadmJoin(data.replace(join.caCertHashes[0] ?? "", otherHash), known);
    expect(wrongHash).toMatchObject({ ok: false, reason: "CAHashMismatch" });

    const wrongSecret = await checkKubeadmJoin(
      data.replace(
        `${join.discoveryToken.id}.${join.discoveryToken.secret}`,
        `${join.discoveryToken.id}.0000000000000000`,
      ),
      known,
    );
    expect(wrongSecret).toMatchObject({ ok: false, reason: "SignatureMismatch" });

    const elsewhere = await checkKubeadmJoin(data, { knownEndpoints: ["127.0.0.1:1"] });
    expect(elsewhere).toMatchObject({ ok: false, reason: "UnknownEndpoint" });

    // The Machine has its Node, so Cluster API no longer refreshes the token: expired, it is unsigned and removed.
    const tokenPath = `/api/v1/namespaces/kube-system/secrets/bootstrap-token-${join.discoveryToken.id}`;
    const past = Buffer.from(new Date(Date.now() - 60_000).toISOString().replace(/\.\d+Z$/, "Z")).toString("base64");
    await mergePatch(workloadAdmin, tokenPath, { data: { expiration: past } });
    const expired = await eventually("the expired token refused", async () => {
      const result = await checkKubeadmJoin(data, known);
      return result.ok ? undefined : result;
    });
    expect(expired).toMatchObject({ ok: false, reason: "TokenInvalidOrExpired" });
    await eventually("the token cleaner deleting the expired token", async () =>
      (await kubeRequest(workloadAdmin, { path: tokenPath })).status === 404 ? true : undefined,
    );
  });

  it("reports a manager that exits during start-up with its log, and leaves no process or folder behind", async () => {
    const kube = await builtKubeBinaries();
    if (kube === undefined) throw new Error("no Kubernetes build");
    const capi = await ensureCapiBinaries({ kube, log: () => {} });
    const plane = await startControlPlane({ bin: kube.bin, controllers: ["clusterrole-aggregation-controller"] });
    const dataDir = await mkdtemp(path.join(tmpdir(), "gpuvm-capi-failed-"));
    try {
      const failed = startClusterApi({
        managementCluster: plane,
        capi,
        bin: kube.bin,
        dataDir,
        extraArgs: { "bootstrap-kubeadm": ["--no-such-flag"] },
      });
      await expect(failed).rejects.toThrow(/capi-kubeadm-bootstrap-manager exited:[\s\S]*unknown flag: --no-such-flag/);
      // Both managers were started from dataDir (their kubeconfigs are there): none runs, and the folder is gone.
      const running: string[] = [];
      for (const pid of await readdir("/proc").catch(() => [] as string[])) {
        const commandLine = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
        if (/^\d+$/.test(pid) && commandLine.includes(dataDir)) running.push(commandLine.replaceAll("\0", " "));
      }
      expect(running).toEqual([]);
      await expect(stat(dataDir)).rejects.toThrow("ENOENT");
    } finally {
      await plane.close();
    }
  });
});
