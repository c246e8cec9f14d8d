// What the provider's controllers need of Kubernetes beyond their own kind's KubeAccess (core/kube-access.ts):
// Cluster API's objects and the GpuCluster (informer caches), the operator objects they own (GpuVm, GpuNetwork,
// GpuFirewallRule: cached reads, live reads where a cache's absence proves nothing, and guarded writes), the
// bootstrap data Secrets (read live: the operator caches only the Secrets labelled for it), and merge patches
// of their own objects' metadata and spec; the catalogue reads (capacity, VM specs) through an object's credentials.
// Ports: the runtime adapter is register.ts, tests use plain fakes.
import type { Reason } from "../../api/common.ts";

/** The operator kinds a GpuMachine or GpuCluster owns. */
export type OwnedKind = "GpuVm" | "GpuNetwork" | "GpuFirewallRule";

export interface OwnedAccess {
  /** From the kind's informer cache. */
  get(kind: OwnedKind, namespace: string, name: string): unknown;
  list(kind: OwnedKind, namespace: string): unknown[];
  /** Straight from the API server: undefined only when it answers 404. */
  read(kind: OwnedKind, namespace: string, name: string): Promise<unknown>;
  create(kind: OwnedKind, namespace: string, body: Record<string, unknown>): Promise<"created" | "exists">;
  /** A merge patch (guarded when it carries metadata.resourceVersion). */
  patch(
    kind: OwnedKind,
    namespace: string,
    name: string,
    patch: Record<string, unknown>,
  ): Promise<"written" | "conflict" | "gone">;
  /** Only while the object still has `uid`. */
  delete(kind: OwnedKind, namespace: string, name: string, uid: string): Promise<"deleted" | "gone" | "conflict">;
}

export interface SecretData {
  uid: string;
  data: Record<string, string>;
  ownerUids: string[];
}

export interface SecretAccess {
  /** A Secret read live (decoded data), undefined on 404. */
  read(namespace: string, name: string): Promise<SecretData | undefined>;
  create(namespace: string, body: Record<string, unknown>): Promise<"created" | "exists">;
  delete(namespace: string, name: string, uid: string): Promise<"deleted" | "gone" | "conflict">;
}

/** Cluster API's objects and the GpuClusters, from informer caches (unparsed). */
export interface ClusterApiReads {
  cluster(namespace: string, name: string): unknown;
  machine(namespace: string, name: string): unknown;
  gpuCluster(namespace: string, name: string): unknown;
}

/** A merge patch of the reconciled object itself, guarded by the resourceVersion it carries. */
export type SelfPatch = (
  namespace: string,
  name: string,
  patch: Record<string, unknown>,
) => Promise<
  // generation: the object's after the write (a spec change moves it), when the answer says it.
  { type: "written"; resourceVersion: string; generation?: number } | { type: "conflict" } | { type: "gone" }
>;

/** What the cloud says, through an object's credentials; `missing` when they cannot be used (the message says why). */
export type CloudAnswer<T> = { type: "ok"; value: T } | { type: "missing"; message: string; reason?: Reason };

/** What a VM type offers, from the cloud's specs endpoint. */
export interface TypeSpec {
  cpuCores: number;
  memoryGb: number;
  gpus: number;
  cpuType: string;
}

/** The catalogue reads of the provider's controllers (read-only calls; cached per account by the adapter). */
export interface CatalogueAccess {
  /** Which of `locations` the cloud offers any VM type in now. */
  locationsWithCapacity(
    namespace: string,
    credentialsRef: string | undefined,
    locations: readonly string[],
    signal: AbortSignal,
  ): Promise<CloudAnswer<string[]>>;
  /** The specs of `type`; undefined when the cloud does not list it. */
  typeSpec(
    namespace: string,
    credentialsRef: string | undefined,
    type: string,
    signal: AbortSignal,
  ): Promise<CloudAnswer<TypeSpec | undefined>>;
}
