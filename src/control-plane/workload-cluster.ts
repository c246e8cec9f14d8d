// A Cluster API workload cluster on loopback: a real kube-apiserver with its own etcd, set up as `kubeadm init`
// leaves a cluster for nodes that join with a bootstrap token (bootstrap token authentication, the bootstrap
// signer and token cleaner controllers, kube-public/cluster-info readable anonymously); the Secrets Cluster API
// reaches it through (`<cluster>-kubeconfig`, `<cluster>-ca`); the externally managed control-plane object
// that declares it to Cluster API (ADR 0022).
import { readFile } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { isRecord } from "../util/is-record.ts";
import { type ControlPlaneOptions, type RunningControlPlane, startControlPlane } from "./control-plane.ts";
import { installCrds } from "./crds.ts";
import { type KubeTarget, kubeExpect } from "./http.ts";
import { applyManifests, type ManifestObject } from "./operator-identity.ts";
import { ControlPlaneError } from "./processes.ts";

export interface RunningWorkloadCluster extends RunningControlPlane {
  /** Where nodes dial it: Cluster.spec.controlPlaneEndpoint. */
  endpoint: { host: string; port: number };
  /** The cluster CA (PEM) and its key: the `<cluster>-ca` Secret. */
  caPem: string;
  caKeyPem: string;
  /** kube-apiserver's version (GET /version), the version its control-plane object reports. */
  version: string;
}

/** kube-controller-manager's controllers in a workload cluster: kubeadm enables the bootstrap token ones. */
const WORKLOAD_CONTROLLERS = [
  "garbage-collector-controller",
  "namespace-controller",
  "bootstrap-signer-controller",
  "token-cleaner-controller",
];

/** What `kubeadm init` (phase bootstrap-token) creates for joining nodes, for a cluster reached at `server`. */
function tokenBootstrapManifests(server: string, caPem: string): ManifestObject[] {
  // cluster-info's kubeconfig: the admin's cluster (server and CA) and nothing else, as kubeadm writes it.
  const clusterInfo = [
    "apiVersion: v1",
    "clusters:",
    "- cluster:",
    `    certificate-authority-data: ${Buffer.from(caPem).toString("base64")}`,
    `    server: ${server}`,
    '  name: ""',
    "contexts: null",
    'current-context: ""',
    "kind: Config",
    "preferences: {}",
    "users: null",
    "",
  ].join("\n");
  const clusterInfoRole = "kubeadm:bootstrap-signer-clusterinfo";
  return [
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "cluster-info", namespace: "kube-public" },
      data: { kubeconfig: clusterInfo },
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: clusterInfoRole, namespace: "kube-public" },
      rules: [{ apiGroups: [""], resources: ["configmaps"], resourceNames: ["cluster-info"], verbs: ["get"] }],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: clusterInfoRole, namespace: "kube-public" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: clusterInfoRole },
      subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: "system:anonymous" }],
    },
    {
      // Bootstrap tokens may create the kubelet's CSR (kubeadm's kubeadm:kubelet-bootstrap).
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "kubeadm:kubelet-bootstrap" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "system:node-bootstrapper" },
      subjects: [
        {
          apiGroup: "rbac.authorization.k8s.io",
          kind: "Group",
          name: "system:bootstrappers:kubeadm:default-node-token",
        },
      ],
    },
  ];
}

/**
 * Starts a workload cluster's control plane (etcd, kube-apiserver with bootstrap token authentication,
 * kube-controller-manager with the bootstrap signer and token cleaner) and sets it up for token discovery.
 */
export async function startWorkloadCluster(
  options: Pick<ControlPlaneOptions, "bin" | "dataDir" | "keepData" | "port" | "log">,
): Promise<RunningWorkloadCluster> {
  const plane = await startControlPlane({
    ...options,
    controllers: WORKLOAD_CONTROLLERS,
    apiServerArgs: ["--enable-bootstrap-token-auth"],
  });
  try {
    const certDir = path.join(plane.dataDir, "certs");
    const caPem = await readFile(path.join(certDir, "ca.crt"), "utf8");
    const caKeyPem = await readFile(path.join(certDir, "ca.key"), "utf8");
    const version = await kubeExpect(plane.admin, { path: "/version" }, [200]);
    const gitVersion = isRecord(version.json) ? version.json.gitVersion : undefined;
    if (typeof gitVersion !== "string") throw new ControlPlaneError("workload cluster: /version has no gitVersion");
    await applyManifests(plane.admin, tokenBootstrapManifests(plane.url, caPem));
    const url = new URL(plane.url);
    return {
      ...plane,
      endpoint: { host: url.hostname, port: Number(url.port) },
      caPem,
      caKeyPem,
      version: gitVersion,
    };
  } catch (error) {
    await plane.close();
    throw error;
  }
}

/** Cluster API's label on the objects of one cluster (Secrets it caches, the control plane it owns). */
export const CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name";
const CLUSTER_SECRET_TYPE = "cluster.x-k8s.io/secret";

/**
 * The Secrets Cluster API reads a cluster through, by its conventions: `<cluster>-kubeconfig` (key `value`: a
 * kubeconfig, the admin's) and `<cluster>-ca` (`tls.crt`, `tls.key`: the kubeadm bootstrap provider pins the
 * CA's hash in every join), both labelled with the cluster's name.
 */
export function clusterSecrets(
  workload: Pick<RunningWorkloadCluster, "kubeconfigYaml" | "caPem" | "caKeyPem">,
  cluster: { namespace: string; name: string },
): ManifestObject[] {
  const metadata = (suffix: string) => ({
    name: `${cluster.name}-${suffix}`,
    namespace: cluster.namespace,
    labels: { [CLUSTER_NAME_LABEL]: cluster.name },
  });
  const b64 = (text: string): string => Buffer.from(text).toString("base64");
  return [
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: metadata("kubeconfig"),
      type: CLUSTER_SECRET_TYPE,
      data: { value: b64(workload.kubeconfigYaml()) },
    },
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: metadata("ca"),
      type: CLUSTER_SECRET_TYPE,
      data: { "tls.crt": b64(workload.caPem), "tls.key": b64(workload.caKeyPem) },
    },
  ];
}

// ---- The externally managed control plane (ADR 0022) ---------------------------------------------------------

export const LOOPBACK_CONTROL_PLANE = {
  group: "controlplane.test.gpucloud.dev",
  version: "v1alpha1",
  kind: "LoopbackControlPlane",
  plural: "loopbackcontrolplanes",
} as const;

/**
 * The CRD of the control-plane kind that declares a workload cluster to Cluster API: the contract's fields only
 * (spec.controlPlaneEndpoint, spec.version; status.initialization.controlPlaneInitialized,
 * status.externalManagedControlPlane, status.version), labelled with the contract version it implements.
 */
export function loopbackControlPlaneCrd(): Record<string, unknown> {
  const { group, version, kind, plural } = LOOPBACK_CONTROL_PLANE;
  const endpoint = {
    type: "object",
    required: ["host", "port"],
    properties: { host: { type: "string", minLength: 1 }, port: { type: "integer", minimum: 1, maximum: 65535 } },
  };
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    // Its objects belong to a cluster: clusterctl move looks for the CRDs with clusterctl's label.
    metadata: {
      name: `${plural}.${group}`,
      labels: { "cluster.x-k8s.io/v1beta2": version, "clusterctl.cluster.x-k8s.io": "" },
    },
    spec: {
      group,
      names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase(), categories: ["cluster-api"] },
      scope: "Namespaced",
      versions: [
        {
          name: version,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [
            { name: "Endpoint", type: "string", jsonPath: ".spec.controlPlaneEndpoint.host" },
            { name: "Port", type: "integer", jsonPath: ".spec.controlPlaneEndpoint.port" },
            { name: "Version", type: "string", jsonPath: ".spec.version" },
            {
              name: "Initialized",
              type: "boolean",
              jsonPath: ".status.initialization.controlPlaneInitialized",
            },
          ],
          schema: {
            openAPIV3Schema: {
              type: "object",
              description: "A workload cluster's control plane that the test harness runs (a loopback kube-apiserver).",
              properties: {
                apiVersion: { type: "string" },
                kind: { type: "string" },
                metadata: { type: "object" },
                spec: {
                  type: "object",
                  required: ["controlPlaneEndpoint", "version"],
                  properties: { controlPlaneEndpoint: endpoint, version: { type: "string" } },
                },
                status: {
                  type: "object",
                  properties: {
                    initialization: {
                      type: "object",
                      properties: { controlPlaneInitialized: { type: "boolean" } },
                    },
                    externalManagedControlPlane: { type: "boolean" },
                    version: { type: "string" },
                    conditions: {
                      type: "array",
                      items: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
                    },
                  },
                },
              },
            },
          },
        },
      ],
    },
  };
}

/**
 * The kubeadm bootstrap provider's ServiceAccount, as its components name it: since Cluster API v1.14 it reads
 * the Cluster's control-plane object (its spec.version, for templates in KubeadmConfig files), and its own
 * ClusterRole only grants KubeadmControlPlanes, so a control-plane kind grants it reads itself.
 */
export const KUBEADM_BOOTSTRAP_SERVICE_ACCOUNT = {
  namespace: "capi-kubeadm-bootstrap-system",
  name: "capi-kubeadm-bootstrap-manager",
} as const;

/**
 * RBAC for the control-plane kind: the core manager reads, patches (owner reference, cluster label) and deletes
 * (with the Cluster) the objects through its aggregated ClusterRole; the kubeadm bootstrap manager reads them through a binding.
 */
function loopbackControlPlaneRbac(): ManifestObject[] {
  const { group, plural } = LOOPBACK_CONTROL_PLANE;
  const rbac = "rbac.authorization.k8s.io";
  const reader = `gpuvm-test:${plural}:reader`;
  return [
    {
      apiVersion: `${rbac}/v1`,
      kind: "ClusterRole",
      metadata: { name: `gpuvm-test:${plural}`, labels: { "cluster.x-k8s.io/aggregate-to-manager": "true" } },
      rules: [
        {
          apiGroups: [group],
          resources: [plural, `${plural}/status`],
          // delete: the Cluster's deletion deletes its control-plane object (and waits for it to go).
          verbs: ["get", "list", "watch", "patch", "update", "delete"],
        },
      ],
    },
    {
      apiVersion: `${rbac}/v1`,
      kind: "ClusterRole",
      metadata: { name: reader },
      rules: [{ apiGroups: [group], resources: [plural], verbs: ["get", "list", "watch"] }],
    },
    {
      apiVersion: `${rbac}/v1`,
      kind: "ClusterRoleBinding",
      metadata: { name: reader },
      roleRef: { apiGroup: rbac, kind: "ClusterRole", name: reader },
      subjects: [{ kind: "ServiceAccount", ...KUBEADM_BOOTSTRAP_SERVICE_ACCOUNT }],
    },
  ];
}

const Created = z.object({ metadata: z.object({ name: z.string() }) });

/** The LoopbackControlPlane kind in a management cluster: its CRD, and the RBAC Cluster API's managers need for it. */
export async function installLoopbackControlPlaneKind(management: KubeTarget): Promise<void> {
  await installCrds(management, [loopbackControlPlaneCrd()]);
  await applyManifests(management, loopbackControlPlaneRbac());
}

function loopbackControlPlanePath(cluster: { namespace: string; name: string }): string {
  const { group, version, plural } = LOOPBACK_CONTROL_PLANE;
  return `/apis/${group}/${version}/namespaces/${cluster.namespace}/${plural}/${cluster.name}`;
}

/**
 * The status that declares the control plane initialized and externally managed, as a control plane provider
 * writes it (again after `clusterctl move`, which copies objects without their status).
 */
export async function markControlPlaneInitialized(
  management: KubeTarget,
  workload: Pick<RunningWorkloadCluster, "version">,
  cluster: { namespace: string; name: string },
): Promise<void> {
  const status = {
    initialization: { controlPlaneInitialized: true },
    externalManagedControlPlane: true,
    version: workload.version,
  };
  await kubeExpect(
    management,
    {
      method: "PATCH",
      path: `${loopbackControlPlanePath(cluster)}/status`,
      body: { status },
      contentType: "application/merge-patch+json",
    },
    [200],
  );
}

/**
 * Declares a running workload cluster to Cluster API in the management cluster: its Secrets, and a
 * LoopbackControlPlane (installed with its aggregated RBAC if missing) whose status says the control plane is
 * initialized and externally managed. Returns the reference for the Cluster's `spec.controlPlaneRef`.
 */
export async function declareWorkloadCluster(
  management: KubeTarget,
  workload: Pick<RunningWorkloadCluster, "kubeconfigYaml" | "caPem" | "caKeyPem" | "endpoint" | "version">,
  cluster: { namespace: string; name: string },
): Promise<{ apiGroup: string; kind: string; name: string }> {
  const { group, version, kind } = LOOPBACK_CONTROL_PLANE;
  await installLoopbackControlPlaneKind(management);
  await applyManifests(management, clusterSecrets(workload, cluster));
  const object = {
    apiVersion: `${group}/${version}`,
    kind,
    metadata: { name: cluster.name, namespace: cluster.namespace },
    spec: { controlPlaneEndpoint: workload.endpoint, version: workload.version },
  };
  const applied = await kubeExpect(
    management,
    {
      method: "PATCH",
      path: `${loopbackControlPlanePath(cluster)}?fieldManager=gpuvm-test&force=true`,
      body: JSON.stringify(object),
      contentType: "application/apply-patch+yaml",
    },
    [200, 201],
  );
  Created.parse(applied.json);
  await markControlPlaneInitialized(management, workload, cluster);
  return { apiGroup: group, kind, name: cluster.name };
}
