// The test playing Cluster API on the Kubernetes API test double, for the provider's controllers in-process: the
// Cluster and Machine CRDs (v1beta2, the fields the provider reads, the rest kept), and the objects Cluster API's
// controllers would make: a Cluster with its GpuCluster, a Machine with its bootstrap data and its GpuMachine.
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { type Env, type ManagedView, NAMESPACE as TEST_NAMESPACE } from "../harness.ts";

export const NAMESPACE = TEST_NAMESPACE;
export const CAPI_GROUP = "cluster.x-k8s.io";
export const CAPI_VERSION = "v1beta2";
export const INFRA_GROUP = "infrastructure.cluster.x-k8s.io";
export const INFRA_VERSION = "v1alpha1";

function crd(kind: string, plural: string): Record<string, unknown> {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.${CAPI_GROUP}` },
    spec: {
      group: CAPI_GROUP,
      names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() },
      scope: "Namespaced",
      versions: [
        {
          name: CAPI_VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: {
            openAPIV3Schema: {
              type: "object",
              properties: {
                spec: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
                status: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
              },
            },
          },
        },
      ],
    },
  };
}

/** Cluster API's Cluster and Machine CRDs as the double serves them (schemaless beyond spec and status). */
export const CLUSTER_API_CRDS = [crd("Cluster", "clusters"), crd("Machine", "machines")];

export interface Created {
  name: string;
  uid: string;
}

async function createObject(
  env: Env,
  group: string,
  version: string,
  plural: string,
  body: Record<string, unknown>,
): Promise<Created> {
  const created = (await env.custom.createNamespacedCustomObject({
    group,
    version,
    plural,
    namespace: NAMESPACE,
    body,
  })) as {
    metadata: { name: string; uid: string };
  };
  return { name: created.metadata.name, uid: created.metadata.uid };
}

async function patchStatus(env: Env, group: string, version: string, plural: string, name: string, status: unknown) {
  await env.custom.patchNamespacedCustomObjectStatus(
    { group, version, plural, namespace: NAMESPACE, name, body: { status } },
    MERGE,
  );
}

const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

function ownerRef(kind: string, apiVersion: string, owner: Created) {
  return { apiVersion, kind, name: owner.name, uid: owner.uid, controller: true, blockOwnerDeletion: true };
}

export interface TestCluster {
  cluster: Created;
  gpuCluster: Created;
}

/** A Cluster (infrastructure provisioned once its GpuCluster is, as Cluster API would mark it) and its GpuCluster. */
export async function createCluster(
  env: Env,
  name: string,
  gpuClusterSpec: Record<string, unknown>,
  clusterSpec: Record<string, unknown> = {},
): Promise<TestCluster> {
  const cluster = await createObject(env, CAPI_GROUP, CAPI_VERSION, "clusters", {
    apiVersion: `${CAPI_GROUP}/${CAPI_VERSION}`,
    kind: "Cluster",
    metadata: { name, namespace: NAMESPACE },
    spec: { infrastructureRef: { apiGroup: INFRA_GROUP, kind: "GpuCluster", name }, ...clusterSpec },
  });
  const gpuCluster = await createObject(env, INFRA_GROUP, INFRA_VERSION, "gpuclusters", {
    apiVersion: `${INFRA_GROUP}/${INFRA_VERSION}`,
    kind: "GpuCluster",
    metadata: {
      name,
      namespace: NAMESPACE,
      labels: { "cluster.x-k8s.io/cluster-name": name },
      ownerReferences: [ownerRef("Cluster", `${CAPI_GROUP}/${CAPI_VERSION}`, cluster)],
    },
    spec: gpuClusterSpec,
  });
  return { cluster, gpuCluster };
}

/** What Cluster API's Cluster controller does once the GpuCluster says provisioned. */
export async function markInfrastructureProvisioned(env: Env, cluster: string): Promise<void> {
  await patchStatus(env, CAPI_GROUP, CAPI_VERSION, "clusters", cluster, {
    initialization: { infrastructureProvisioned: true },
  });
}

export async function patchCluster(env: Env, name: string, spec: Record<string, unknown>): Promise<void> {
  await env.custom.patchNamespacedCustomObject(
    { group: CAPI_GROUP, version: CAPI_VERSION, plural: "clusters", namespace: NAMESPACE, name, body: { spec } },
    MERGE,
  );
}

export const CLOUD_CONFIG = (name: string) =>
  `#cloud-config\nruncmd:\n  - kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml # ${name}\n`;

/**
 * A Machine (bootstrap data named when `withBootstrapData`) and its GpuMachine from `spec`, owned by it and
 * labelled with the cluster, as Cluster API makes them from a MachineDeployment.
 */
export async function createMachine(
  env: Env,
  options: {
    name: string;
    cluster: string;
    spec: Record<string, unknown>;
    withBootstrapData?: boolean;
    failureDomain?: string;
    /** false: the GpuMachine without its owner reference yet, as the MachineSet makes it (setMachineOwner adds it). */
    withOwner?: boolean;
  },
): Promise<{ machine: Created; gpuMachine: Created }> {
  const { name, cluster } = options;
  const dataSecretName = `${name}-data`;
  if (options.withBootstrapData !== false) await createBootstrapData(env, dataSecretName, cluster, name);
  const machine = await createObject(env, CAPI_GROUP, CAPI_VERSION, "machines", {
    apiVersion: `${CAPI_GROUP}/${CAPI_VERSION}`,
    kind: "Machine",
    metadata: { name, namespace: NAMESPACE, labels: { "cluster.x-k8s.io/cluster-name": cluster } },
    spec: {
      clusterName: cluster,
      bootstrap: options.withBootstrapData === false ? {} : { dataSecretName },
      infrastructureRef: { apiGroup: INFRA_GROUP, kind: "GpuMachine", name },
      ...(options.failureDomain !== undefined ? { failureDomain: options.failureDomain } : {}),
    },
  });
  const gpuMachine = await createObject(env, INFRA_GROUP, INFRA_VERSION, "gpumachines", {
    apiVersion: `${INFRA_GROUP}/${INFRA_VERSION}`,
    kind: "GpuMachine",
    metadata: {
      name,
      namespace: NAMESPACE,
      labels: { "cluster.x-k8s.io/cluster-name": cluster },
      ...(options.withOwner === false
        ? {}
        : { ownerReferences: [ownerRef("Machine", `${CAPI_GROUP}/${CAPI_VERSION}`, machine)] }),
    },
    spec: options.spec,
  });
  return { machine, gpuMachine };
}

/** What Cluster API's Machine controller does to a GpuMachine the MachineSet made: its owner reference. */
export async function setMachineOwner(env: Env, machine: Created): Promise<void> {
  await env.custom.patchNamespacedCustomObject(
    {
      group: INFRA_GROUP,
      version: INFRA_VERSION,
      plural: "gpumachines",
      namespace: NAMESPACE,
      name: machine.name,
      body: { metadata: { ownerReferences: [ownerRef("Machine", `${CAPI_GROUP}/${CAPI_VERSION}`, machine)] } },
    },
    MERGE,
  );
}

/** The bootstrap data Secret the kubeadm bootstrap provider writes (key value, format cloud-config). */
export async function createBootstrapData(env: Env, secretName: string, cluster: string, machine: string) {
  await env.core.createNamespacedSecret({
    namespace: NAMESPACE,
    body: {
      metadata: { name: secretName, labels: { "cluster.x-k8s.io/cluster-name": cluster } },
      type: "cluster.x-k8s.io/secret",
      stringData: { value: CLOUD_CONFIG(machine), format: "cloud-config" },
    },
  });
}

/** What Cluster API's Machine controller does once the bootstrap provider has written the data. */
export async function setBootstrapData(env: Env, machine: string, cluster: string): Promise<void> {
  const dataSecretName = `${machine}-data`;
  await createBootstrapData(env, dataSecretName, cluster, machine);
  await env.custom.patchNamespacedCustomObject(
    {
      group: CAPI_GROUP,
      version: CAPI_VERSION,
      plural: "machines",
      namespace: NAMESPACE,
      name: machine,
      body: { spec: { bootstrap: { dataSecretName } } },
    },
    MERGE,
  );
}

/** An infrastructure object (GpuCluster, GpuMachine, GpuMachineTemplate) by plural, or undefined. */
export async function getInfra(env: Env, plural: string, name: string): Promise<ManagedView | undefined> {
  return env.custom
    .getNamespacedCustomObject({ group: INFRA_GROUP, version: INFRA_VERSION, plural, namespace: NAMESPACE, name })
    .then(
      (object) => object as ManagedView,
      () => undefined,
    );
}

export async function waitInfra(
  env: Env,
  plural: string,
  name: string,
  check: (object: ManagedView | undefined) => boolean,
  timeoutMs = 10_000,
): Promise<ManagedView | undefined> {
  const deadline = Date.now() + timeoutMs;
  let last: ManagedView | undefined;
  while (Date.now() < deadline) {
    last = await getInfra(env, plural, name);
    if (check(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`timed out waiting for ${plural} ${name}; last seen: ${JSON.stringify(last)}`);
}

export async function createTemplate(env: Env, name: string, type: string, cluster?: string): Promise<void> {
  await createObject(env, INFRA_GROUP, INFRA_VERSION, "gpumachinetemplates", {
    apiVersion: `${INFRA_GROUP}/${INFRA_VERSION}`,
    kind: "GpuMachineTemplate",
    metadata: {
      name,
      namespace: NAMESPACE,
      ...(cluster !== undefined ? { labels: { "cluster.x-k8s.io/cluster-name": cluster } } : {}),
    },
    spec: { template: { spec: { type, sshPublicKey: SSH } } },
  });
}

export async function deleteInfra(env: Env, plural: string, name: string, annotations?: Record<string, string>) {
  if (annotations !== undefined) {
    await env.custom.patchNamespacedCustomObject(
      {
        group: INFRA_GROUP,
        version: INFRA_VERSION,
        plural,
        namespace: NAMESPACE,
        name,
        body: { metadata: { annotations } },
      },
      MERGE,
    );
  }
  await env.custom.deleteNamespacedCustomObject({
    group: INFRA_GROUP,
    version: INFRA_VERSION,
    plural,
    namespace: NAMESPACE,
    name,
  });
}

export const SSH = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ0ZXN0a2V5Zm9ydGhlb3BlcmF0b3J0ZXN0cw test@example";

export async function patchInfra(env: Env, plural: string, name: string, body: Record<string, unknown>): Promise<void> {
  await env.custom.patchNamespacedCustomObject(
    { group: INFRA_GROUP, version: INFRA_VERSION, plural, namespace: NAMESPACE, name, body },
    MERGE,
  );
}
