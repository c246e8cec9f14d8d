// The GpuMachineTemplate controller: status.capacity (cpu, memory, nvidia.com/gpu) from the cloud's specs of the
// template's VM type and status.nodeInfo, which the cluster-autoscaler's Cluster API provider reads to scale a
// MachineDeployment up from zero. No finalizer, no cloud resource: one read of the (cached) specs through the
// credentials of the template's cluster (its GpuCluster's), else those of its namespace. Nothing while paused.

import type { z } from "zod";
import { CLUSTER_API_LABELS } from "../../api/cluster-api.ts";
import { GpuMachineTemplateSpec, GpuMachineTemplateStatus } from "../../api/gpu-machine-template.ts";
import type { Outcome, ReconcileContext, ReconcileRequest } from "../../runtime/index.ts";
import { sameJson } from "../../util/json-values.ts";
import { classify } from "../core/classify.ts";
import type { KubeAccess } from "../core/kube-access.ts";
import { type ManagedObject, type ManagedSpecBase, parseManaged } from "../core/object-model.ts";
import { GuardedWrites } from "../core/own-writes.ts";
import { after, DONE } from "../core/verdict.ts";
import type { CatalogueAccess, ClusterApiReads, TypeSpec } from "./access.ts";
import { ClusterView, clusterApiOwner, GpuClusterView, MetadataView, pauseOf, viewOf } from "./objects.ts";
import { readCached } from "./status.ts";

type TemplateSpec = GpuMachineTemplateSpec & ManagedSpecBase;
/** The template's schema, typed for the object model (it has none of the managed kinds' spec fields). */
const TemplateSchema = GpuMachineTemplateSpec as unknown as z.ZodType<TemplateSpec>;

/** The resource name Kubernetes (and the NVIDIA device plugin) gives GPUs. */
export const GPU_RESOURCE = "nvidia.com/gpu";

export interface TemplateReconcilerOptions {
  kube: KubeAccess;
  reads: ClusterApiReads;
  catalogue: CatalogueAccess;
  /** When a failed read is tried again (default 30 s). */
  retryMs?: number;
}

/** What a node of a VM type offers, as Kubernetes quantities (memory in GiB, as the node's kubelet reports it). */
export function capacityOf(spec: TypeSpec): Record<string, string> {
  return { cpu: String(spec.cpuCores), memory: `${spec.memoryGb}Gi`, [GPU_RESOURCE]: String(spec.gpus) };
}

/** The node's architecture from the cloud's CPU description (every type of this cloud today: AMD EPYC, amd64). */
export function architectureOf(cpuType: string): "amd64" | "arm64" {
  return /\b(arm|grace|graviton|neoverse|ampere)\b/i.test(cpuType) ? "arm64" : "amd64";
}

export class GpuMachineTemplateReconciler {
  readonly #options: TemplateReconcilerOptions;
  readonly #writes: GuardedWrites;
  readonly #retryMs: number;

  constructor(options: TemplateReconcilerOptions) {
    this.#options = options;
    this.#writes = new GuardedWrites(options.kube);
    this.#retryMs = options.retryMs ?? 30_000;
  }

  isEcho(key: string, resourceVersion: string): boolean | Promise<boolean> {
    return this.#writes.isEcho(key, resourceVersion);
  }

  async reconcile(request: ReconcileRequest, ctx: ReconcileContext): Promise<Outcome> {
    const read = readCached(this.#options.kube, this.#writes, request, (raw) =>
      parseManaged(raw, TemplateSchema, GpuMachineTemplateStatus),
    );
    if (read.type === "gone") return DONE;
    if (read.type === "behind") return after(2_000);
    // The CRD refuses an invalid template; a template has no conditions to say it with anyway.
    if (!read.parsed.ok) return DONE;
    const mr = read.parsed.object;
    const raw = read.raw;
    const { namespace } = mr.metadata;
    const meta = viewOf(MetadataView, raw)?.metadata;
    const clusterName =
      meta?.labels[CLUSTER_API_LABELS.clusterName] ?? clusterApiOwner(meta?.ownerReferences ?? [], "Cluster")?.name;
    const cluster =
      clusterName === undefined ? undefined : viewOf(ClusterView, this.#options.reads.cluster(namespace, clusterName));
    if (pauseOf(mr.metadata.annotations, cluster) !== undefined) return DONE;
    const infrastructure = cluster?.spec.infrastructureRef;
    const gpuCluster =
      infrastructure?.kind === "GpuCluster"
        ? viewOf(GpuClusterView, this.#options.reads.gpuCluster(namespace, infrastructure.name))
        : undefined;
    const type = mr.spec.template.spec.type;
    try {
      const answer = await this.#options.catalogue.typeSpec(
        namespace,
        gpuCluster?.spec.credentialsRef?.name,
        type,
        ctx.signal,
      );
      if (answer.type === "missing") {
        ctx.logger.debug({ detail: answer.message }, "no credentials to read the VM type's specs with");
        return after(this.#retryMs);
      }
      if (answer.value === undefined) {
        this.#options.kube.event(
          mr,
          "Warning",
          "InvalidSpec",
          `the cloud lists no VM type ${type}: no capacity to show`,
        );
        return DONE;
      }
      return await this.#write(mr, answer.value, ctx);
    } catch (error) {
      ctx.logger.debug({ err: error, reason: classify(error).reason }, "VM type specs not read");
      return after(this.#retryMs);
    }
  }

  async #write(mr: ManagedObject<TemplateSpec>, spec: TypeSpec, ctx: ReconcileContext): Promise<Outcome> {
    const status = {
      ...mr.status,
      capacity: capacityOf(spec),
      nodeInfo: { architecture: architectureOf(spec.cpuType), operatingSystem: "linux" },
    };
    if (sameJson(mr.status, status)) return DONE;
    const written = await this.#writes.writeStatus(mr, status);
    if (written.type === "conflict") return after(0);
    ctx.logger.debug({ capacity: status.capacity }, "template capacity written");
    return DONE;
  }
}
