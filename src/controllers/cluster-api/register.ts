// Wiring of the Cluster API provider's controllers (GpuCluster, GpuMachine, GpuMachineTemplate) on the runtime:
// the informers of Cluster API's Clusters and Machines and of the infrastructure kinds, the operator kinds they
// own (the managed kinds' informers, shared), the ports of access.ts onto the runtime's KubeClient, the catalogue
// reads through the credentials (cached per account), and the watches that wake an owner when what it reads
// changes. Registered only when the API server serves Cluster API (clusterApiServed).
import type { KubernetesObject } from "@kubernetes/client-node";
import { CLUSTER_API_LABELS } from "../../api/cluster-api.ts";
import { gpuClusterKind } from "../../api/gpu-cluster.ts";
import { gpuMachineKind } from "../../api/gpu-machine.ts";
import { gpuMachineTemplateKind } from "../../api/gpu-machine-template.ts";
import {
  type Controller,
  KubeApiError,
  type KubeResource,
  type Manager,
  type ObjectInformer,
  statusOf,
} from "../../runtime/index.ts";
import type { CloudAccount } from "../accounts/cloud-account.ts";
import type { CredentialStore } from "../accounts/credentials.ts";
import { kubeAccessFor, resourceOf } from "../core/kube-access.ts";
import type {
  CatalogueAccess,
  ClusterApiReads,
  OwnedAccess,
  OwnedKind,
  SecretAccess,
  SelfPatch,
  TypeSpec,
} from "./access.ts";
import { GpuClusterReconciler } from "./cluster.ts";
import { GpuMachineReconciler } from "./machine.ts";
import { CLUSTER_API_GROUP, CLUSTER_API_VERSION, CLUSTERS, MACHINES, MetadataView, viewOf } from "./objects.ts";
import { GpuMachineTemplateReconciler } from "./template.ts";

export interface ClusterApiControllerDeps {
  /** The informers of the owned kinds (the managed kinds' own, shared with their controllers). */
  informers: Record<OwnedKind, ObjectInformer>;
  credentials: CredentialStore<CloudAccount>;
}

/** Whether the API server serves Cluster API's Clusters and Machines (v1beta2): the provider's controllers need them. */
export async function clusterApiServed(manager: Manager): Promise<boolean> {
  const groupVersion = `${CLUSTER_API_GROUP}/${CLUSTER_API_VERSION}`;
  // One list of at most nothing (a name no object has) in a namespace the operator may read: 404 when not served.
  const namespace = manager.config.watchNamespaces[0] ?? "default";
  try {
    await manager.kube.listObjects(CLUSTERS, namespace, { fieldSelector: "metadata.name=gpuvm-operator-probe" });
    return true;
  } catch (error) {
    if (statusOf(error) === 404) return false;
    // Forbidden or unreachable: say so, and run without them rather than fail to start.
    manager.logger.warn({ err: error, groupVersion }, "could not tell whether Cluster API is installed");
    return false;
  }
}

function ownedAccess(manager: Manager, informers: ClusterApiControllerDeps["informers"]): OwnedAccess {
  const resource = (kind: OwnedKind): KubeResource => informers[kind].resource;
  return {
    get: (kind, namespace, name) => informers[kind].get(namespace, name),
    list: (kind, namespace) => informers[kind].list(namespace),
    // A list by name: the operator may list and watch its kinds, not get them one by one.
    read: async (kind, namespace, name) =>
      (await manager.kube.listObjects(resource(kind), namespace, { fieldSelector: `metadata.name=${name}` }))[0],
    create: async (kind, namespace, body) =>
      (await manager.kube.createObject(resource(kind), namespace, body as KubernetesObject)).type === "created"
        ? "created"
        : "exists",
    patch: async (kind, namespace, name, patch) => {
      const result = await manager.kube.patchObject(resource(kind), namespace, name, patch);
      return result.type === "notFound" ? "gone" : result.type === "conflict" ? "conflict" : "written";
    },
    delete: (kind, namespace, name, uid) => manager.kube.deleteObject(resource(kind), namespace, name, uid),
  };
}

function secretAccess(manager: Manager): SecretAccess {
  return {
    read: async (namespace, name) => {
      const secret = await manager.kube.getSecret(namespace, name);
      if (secret === undefined) return undefined;
      const data = Object.fromEntries(
        Object.entries(secret.data ?? {}).map(([key, value]) => [key, Buffer.from(value, "base64").toString("utf8")]),
      );
      const ownerUids = (secret.metadata?.ownerReferences ?? []).map((reference) => reference.uid);
      return { uid: secret.metadata?.uid ?? "", data, ownerUids };
    },
    create: async (namespace, body) => {
      try {
        await manager.kube.createSecret(namespace, body);
        return "created";
      } catch (error) {
        if (error instanceof KubeApiError && error.status === 409) return "exists";
        throw error;
      }
    },
    delete: async (namespace, name, uid) => {
      const result = await manager.kube.deleteOwned("Secret", namespace, name, uid);
      return result.type === "notFound" ? "gone" : result.type === "conflict" ? "conflict" : "deleted";
    },
  };
}

function selfPatch(manager: Manager, resource: KubeResource): SelfPatch {
  return async (namespace, name, patch) => {
    const result = await manager.kube.patchObject(resource, namespace, name, patch);
    if (result.type === "written") {
      const { resourceVersion = "", generation } = result.object.metadata ?? {};
      return { type: "written", resourceVersion, ...(generation !== undefined ? { generation } : {}) };
    }
    if (result.type === "unchanged") return { type: "written", resourceVersion: "" };
    return result.type === "conflict" ? { type: "conflict" } : { type: "gone" };
  };
}

/** How long catalogue answers are kept per account: capacity for a while, the VM types' specs far longer. */
const CAPACITY_TTL_MS = 30_000;
const SPECS_TTL_MS = 10 * 60_000;

/** The catalogue reads through an object's credentials, each answer kept per account for a while. */
export function catalogueAccess(
  credentials: CredentialStore<CloudAccount>,
  now: () => number = Date.now,
): CatalogueAccess {
  const capacity = new Map<string, { at: number; available: boolean }>();
  const specs = new Map<string, { at: number; read: Promise<Map<string, TypeSpec>> }>();
  const accountKey = (account: CloudAccount) => `${account.projectId}@${account.apiUrl}`;
  return {
    async locationsWithCapacity(namespace, credentialsRef, locations, signal) {
      const resolved = credentials.resolve(namespace, credentialsRef);
      if (resolved.type === "missing") return resolved;
      const account = resolved.handle.account;
      const available: string[] = [];
      for (const location of locations) {
        const key = `${accountKey(account)}/${location}`;
        let known = capacity.get(key);
        if (known === undefined || now() - known.at > CAPACITY_TTL_MS) {
          const answer = await account.client.catalogue.availabilities(account.projectId, { location }, { signal });
          const items = answer.filter((item) => item.location === location);
          known = { at: now(), available: items.some((item) => item.available) };
          capacity.set(key, known);
        }
        if (known.available) available.push(location);
      }
      return { type: "ok", value: available };
    },
    async typeSpec(namespace, credentialsRef, type, signal) {
      const resolved = credentials.resolve(namespace, credentialsRef);
      if (resolved.type === "missing") return resolved;
      const account = resolved.handle.account;
      const key = accountKey(account);
      const entry = specs.get(key);
      if (entry === undefined || now() - entry.at > SPECS_TTL_MS) {
        const read = account.client.catalogue
          .specs(account.projectId, { signal })
          .then(
            (answer) =>
              new Map<string, TypeSpec>(
                answer.map((item) => [
                  item.product_name,
                  { cpuCores: item.cpu_cores, memoryGb: item.memory_gb, gpus: item.num_gpu, cpuType: item.cpu_type },
                ]),
              ),
          );
        specs.set(key, { at: now(), read });
        read.catch(() => specs.delete(key));
        return { type: "ok", value: (await read).get(type) };
      }
      return { type: "ok", value: (await entry.read).get(type) };
    },
  };
}

/** The keys of the objects whose controller reference names an owner of `kind`. */
function ownerKeys(kind: string) {
  return (object: KubernetesObject): string[] => {
    const owner = object.metadata?.ownerReferences?.find(
      (reference) => reference.controller === true && reference.kind === kind,
    );
    return owner === undefined ? [] : [`${object.metadata?.namespace ?? ""}/${owner.name}`];
  };
}

/** The key of the infrastructure object of `kind` a Cluster or Machine names (spec.infrastructureRef). */
function infrastructureOf(kind: string) {
  return (object: KubernetesObject): string[] => {
    const reference = (object as { spec?: { infrastructureRef?: { kind?: string; name?: string } } }).spec
      ?.infrastructureRef;
    return reference?.kind === kind && reference.name !== undefined
      ? [`${object.metadata?.namespace ?? ""}/${reference.name}`]
      : [];
  };
}

/** The infrastructure objects of a Cluster's namespace that carry its name (label or owner reference). */
function ofCluster(informer: ObjectInformer, namespace: string, cluster: string): string[] {
  return informer.list(namespace).flatMap((object) => {
    const meta = viewOf(MetadataView, object)?.metadata;
    if (meta === undefined) return [];
    const named =
      meta.labels[CLUSTER_API_LABELS.clusterName] === cluster ||
      meta.ownerReferences.some((reference) => reference.kind === "Cluster" && reference.name === cluster);
    return named ? [`${namespace}/${meta.name}`] : [];
  });
}

/** Registers the three controllers; returns them by kind. */
export function registerClusterApiControllers(
  manager: Manager,
  deps: ClusterApiControllerDeps,
): Record<"GpuCluster" | "GpuMachine" | "GpuMachineTemplate", Controller> {
  const resources = {
    GpuCluster: resourceOf(gpuClusterKind),
    GpuMachine: resourceOf(gpuMachineKind),
    GpuMachineTemplate: resourceOf(gpuMachineTemplateKind),
  };
  const clusters = manager.informerFor(CLUSTERS);
  const machines = manager.informerFor(MACHINES);
  const gpuClusters = manager.informerFor(resources.GpuCluster);
  const gpuMachines = manager.informerFor(resources.GpuMachine);
  const templates = manager.informerFor(resources.GpuMachineTemplate);
  const reads: ClusterApiReads = {
    cluster: (namespace, name) => clusters.get(namespace, name),
    machine: (namespace, name) => machines.get(namespace, name),
    gpuCluster: (namespace, name) => gpuClusters.get(namespace, name),
  };
  const owned = ownedAccess(manager, deps.informers);
  const catalogue = catalogueAccess(deps.credentials);
  const machineReconciler = new GpuMachineReconciler({
    kube: kubeAccessFor(manager, resources.GpuMachine, (namespace, name) => gpuMachines.get(namespace, name)),
    patchSelf: selfPatch(manager, resources.GpuMachine),
    reads,
    owned,
    secrets: secretAccess(manager),
  });
  const clusterReconciler = new GpuClusterReconciler({
    kube: kubeAccessFor(manager, resources.GpuCluster, (namespace, name) => gpuClusters.get(namespace, name)),
    patchSelf: selfPatch(manager, resources.GpuCluster),
    reads,
    owned,
    catalogue,
  });
  const templateReconciler = new GpuMachineTemplateReconciler({
    kube: kubeAccessFor(manager, resources.GpuMachineTemplate, (namespace, name) => templates.get(namespace, name)),
    reads,
    catalogue,
  });
  const namespaceOf = (object: KubernetesObject) => object.metadata?.namespace ?? "";
  const machineController = manager.addController({
    name: "gpumachine",
    resource: resources.GpuMachine,
    reconciler: machineReconciler,
    isEcho: (key, version) => machineReconciler.isEcho(key, version),
    watches: [
      { resource: deps.informers.GpuVm.resource, mapToKeys: ownerKeys(gpuMachineKind.kind) },
      // A Machine's bootstrap data (and its owner reference on the GpuMachine) wake its GpuMachine.
      { resource: MACHINES, mapToKeys: infrastructureOf(gpuMachineKind.kind) },
      // A Cluster paused, resumed or provisioned, and its GpuCluster's failure domains, wake its GpuMachines.
      {
        resource: CLUSTERS,
        mapToKeys: (cluster) => ofCluster(gpuMachines, namespaceOf(cluster), cluster.metadata?.name ?? ""),
      },
      {
        resource: resources.GpuCluster,
        mapToKeys: (gpuCluster) => {
          const cluster = viewOf(MetadataView, gpuCluster)?.metadata.ownerReferences.find(
            (reference) => reference.kind === "Cluster",
          );
          return cluster === undefined ? [] : ofCluster(gpuMachines, namespaceOf(gpuCluster), cluster.name);
        },
      },
    ],
  });
  const clusterController = manager.addController({
    name: "gpucluster",
    resource: resources.GpuCluster,
    reconciler: clusterReconciler,
    isEcho: (key, version) => clusterReconciler.isEcho(key, version),
    watches: [
      { resource: deps.informers.GpuNetwork.resource, mapToKeys: ownerKeys(gpuClusterKind.kind) },
      { resource: deps.informers.GpuFirewallRule.resource, mapToKeys: ownerKeys(gpuClusterKind.kind) },
      { resource: CLUSTERS, mapToKeys: infrastructureOf(gpuClusterKind.kind) },
    ],
  });
  const templateController = manager.addController({
    name: "gpumachinetemplate",
    resource: resources.GpuMachineTemplate,
    reconciler: templateReconciler,
    isEcho: (key, version) => templateReconciler.isEcho(key, version),
  });
  return { GpuCluster: clusterController, GpuMachine: machineController, GpuMachineTemplate: templateController };
}
