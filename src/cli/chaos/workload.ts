// The objects of a chaos run: two healthy tenants (one with an API key, one with email and password, so that
// tokens are in play), each with networks, disks, VMs with their disks (some publishing connection details) and
// firewall rules naming a network and a VM; and one namespace per hostile endpoint with a few objects of its own
// (deletionPolicy Orphan: their clouds never answer sensibly, so deleting them must not wait for the cloud).
import type { CustomObjectsApi } from "@kubernetes/client-node";
import { GROUP, VERSION } from "../../api/common.ts";
import { type ChaosProfile, POOL_REPLICAS } from "./profiles.ts";

export const HEALTHY_NAMESPACES = ["chaosa", "chaosb"] as const;
export const HOSTILE_NAMESPACES = { dead: "hostiledead", huge: "hostilehuge", malformed: "hostilebad" } as const;
export const LOCATION = "us-east1-a";
const SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGNoYW9zdGVzdGtleWZvcnRoZW9wZXJhdG9yY2hhb3M chaos@example";

export const GROUP_VERSION = { group: GROUP, version: VERSION } as const;

export const PLURALS = {
  GpuNetwork: "gpunetworks",
  GpuDisk: "gpudisks",
  GpuVm: "gpuvms",
  GpuFirewallRule: "gpufirewallrules",
  GpuVmPool: "gpuvmpools",
} as const;
export type KindName = keyof typeof PLURALS;
/** Deleted in this order (dependents first: a pool before its replicas), created all at once. */
export const KIND_ORDER: readonly KindName[] = ["GpuVmPool", "GpuFirewallRule", "GpuVm", "GpuDisk", "GpuNetwork"];

export interface ObjectSpec {
  kind: KindName;
  namespace: string;
  name: string;
  spec: Record<string, unknown>;
}

/** Integer share of `total` for tenant `index` of `count` (the first tenants take the remainder). */
function share(total: number, index: number, count: number): number {
  return Math.floor(total / count) + (index < total % count ? 1 : 0);
}

export function vmSpecOf(type: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { type, location: LOCATION, image: "ubuntu22.04", sshPublicKey: SSH_KEY, ...extra };
}

/** Every healthy object of the profile, in creation order (which does not matter: dependents wait). */
export function healthyObjects(profile: ChaosProfile): ObjectSpec[] {
  const objects: ObjectSpec[] = [];
  HEALTHY_NAMESPACES.forEach((namespace, tenant) => {
    const count = (total: number) => share(total, tenant, HEALTHY_NAMESPACES.length);
    const networks = count(profile.networks);
    const disks = count(profile.disks);
    const vms = count(profile.vms);
    for (let i = 0; i < networks; i++) objects.push({ kind: "GpuNetwork", namespace, name: `net-${i}`, spec: {} });
    for (let i = 0; i < disks; i++) {
      const spec = { size: "100GiB", location: LOCATION, type: "persistent-ssd" };
      objects.push({ kind: "GpuDisk", namespace, name: `disk-${i}`, spec });
    }
    for (let i = 0; i < vms; i++) {
      const extra: Record<string, unknown> = {};
      if (i < disks) extra.disks = [{ diskRef: { name: `disk-${i}` }, mode: "read-write" }];
      if (i % 5 === 0) extra.connectionDetails = { secretName: `vm-${i}-connection` };
      objects.push({ kind: "GpuVm", namespace, name: `vm-${i}`, spec: vmSpecOf("a40.1x", extra) });
    }
    for (let i = 0; i < count(profile.rules); i++) {
      const spec = {
        networkRef: { name: `net-${i % Math.max(1, networks)}` },
        direction: "ingress",
        action: "allow",
        protocols: ["tcp"],
        sources: [{ cidr: "0.0.0.0/0" }],
        destinations: [{ vmRef: { name: `vm-${i % Math.max(1, vms)}` } }],
        destinationPorts: [String(2000 + i)],
      };
      objects.push({ kind: "GpuFirewallRule", namespace, name: `rule-${i}`, spec });
    }
    for (let i = 0; i < count(profile.pools); i++) {
      const { location: _location, ...template } = vmSpecOf("a40.1x");
      const spec = {
        replicas: POOL_REPLICAS,
        template: { spec: template },
        diskTemplates: [{ name: "scratch", size: "50GiB" }],
        persistentDiskPolicy: "Delete",
        placement: { locations: [LOCATION] },
      };
      objects.push({ kind: "GpuVmPool", namespace, name: `pool-${i}`, spec });
    }
  });
  return objects;
}

/** The GpuVms and GpuDisks the operator makes for the pools (one disk per replica). */
export function poolMembers(profile: ChaosProfile): number {
  return profile.pools * POOL_REPLICAS * 2;
}

export function hostileObjects(profile: ChaosProfile): ObjectSpec[] {
  return Object.values(HOSTILE_NAMESPACES).flatMap((namespace) =>
    Array.from({ length: profile.hostileObjects }, (_, i): ObjectSpec => {
      const orphan = { deletionPolicy: "Orphan" };
      return i % 2 === 0
        ? { kind: "GpuVm", namespace, name: `vm-${i}`, spec: vmSpecOf("a40.1x", orphan) }
        : { kind: "GpuNetwork", namespace, name: `net-${i}`, spec: orphan };
    }),
  );
}

export function objectBody(object: ObjectSpec): Record<string, unknown> {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: object.kind,
    metadata: { name: object.name, namespace: object.namespace },
    spec: object.spec,
  };
}

/** Run `work` over `items` with at most `limit` in flight. */
export async function inParallel<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>) {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++];
      if (item !== undefined) await work(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

export interface LiveObject {
  kind: KindName;
  metadata: {
    name: string;
    namespace: string;
    finalizers?: string[];
    deletionTimestamp?: string;
    ownerReferences?: { kind: string }[];
  };
  spec: Record<string, unknown>;
  status?: {
    id?: string;
    cloudName?: string;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
    operation?: { name?: string; state?: string };
    /** A GpuVm's last reset served (its annotation's value). */
    lastResetRequestedAt?: string;
  };
}

export function isReady(object: LiveObject): boolean {
  return object.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}

/** Every object of every kind in `namespaces`. */
export async function listObjects(custom: CustomObjectsApi, namespaces: readonly string[]): Promise<LiveObject[]> {
  const all: LiveObject[] = [];
  for (const namespace of namespaces) {
    for (const kind of KIND_ORDER) {
      const list = (await custom.listNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        plural: PLURALS[kind],
        namespace,
      })) as { items: Omit<LiveObject, "kind">[] };
      for (const item of list.items) all.push({ ...item, kind });
    }
  }
  return all;
}

/** `Kind namespace/name: <Ready reason and message>`, for the lines that name an object not where it should be. */
export function describeObject(object: LiveObject): string {
  const ready = object.status?.conditions?.find((c) => c.type === "Ready");
  const why = ready ? `${ready.reason ?? ""} ${ready.message ?? ""}`.trim().slice(0, 160) : "no status";
  return `${object.kind} ${object.metadata.namespace}/${object.metadata.name}: ${why}`;
}

/** Ready for the current generation. */
export function readyNow(object: LiveObject): boolean {
  const ready = object.status?.conditions?.find((c) => c.type === "Ready") as
    | { observedGeneration?: number }
    | undefined;
  const generation = (object.metadata as { generation?: number }).generation;
  return isReady(object) && (ready?.observedGeneration === undefined || ready.observedGeneration === generation);
}
