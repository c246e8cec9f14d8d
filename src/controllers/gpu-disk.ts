// GpuDisk: create, grow-only resize (a shrink is refused, nothing sent), delete once no VM has it attached.
import { type GpuDiskSpec, GpuDiskSpec as GpuDiskSpecSchema, GpuDiskStatus } from "../api/gpu-disk.ts";
import { parseSize } from "../cloud/sizes.ts";
import type { Disk } from "../cloud/wire.ts";
import { REASON } from "./classify.ts";
import type { ExternalClient, Observation } from "./external.ts";
import { findResource, itemByName, type KindDefinition } from "./kind-support.ts";

/** Observed disk → status fields. */
export function diskAtProvider(disk: Disk): Record<string, unknown> {
  return {
    cloudName: disk.name,
    size: disk.size,
    sizeBytes: safeBytes(disk.size),
    attachedTo: disk.attached_to.map((attachment) => ({ vmId: attachment.vm_id, mode: attachment.mode })),
  };
}

function safeBytes(size: string): number | undefined {
  try {
    return parseSize(size);
  } catch {
    return undefined; // a size the server spells oddly: shown as text, compared as "unknown"
  }
}

export type SizeComparison = "equal" | "grow" | "shrink" | "unknown";

/** Compare as bytes (`1024GiB` equals `1TiB`). */
export function compareDiskSize(desired: string, observed: string): SizeComparison {
  const want = safeBytes(desired);
  const have = safeBytes(observed);
  if (want === undefined || have === undefined) return "unknown";
  if (want === have) return "equal";
  return want > have ? "grow" : "shrink";
}

export function observeDisk(spec: GpuDiskSpec, disk: Disk): Extract<Observation, { exists: true }> {
  const size = compareDiskSize(spec.size, disk.size);
  return {
    exists: true,
    id: disk.id,
    ready: true,
    upToDate: size === "equal" || size === "unknown",
    atProvider: diskAtProvider(disk),
    ...(disk.created_at ? { createdAt: disk.created_at } : {}),
    ...(size === "equal" ? {} : { diff: `size ${disk.size} → ${spec.size}` }),
  };
}

export const gpuDisk: KindDefinition<GpuDiskSpec> = {
  kind: "GpuDisk",
  plural: "gpudisks",
  family: "disk",
  specSchema: GpuDiskSpecSchema,
  statusSchema: GpuDiskStatus,
  locations: (spec) => [spec.location],
  references: () => [],
  external(account, _deps): ExternalClient<GpuDiskSpec> {
    const { client, projectId } = account;
    return {
      resolve: async () => ({ type: "ready" }),
      async observe(mr, options, signal) {
        const disk = await findResource(account.disks, mr, options, (id) =>
          client.disks.get(projectId, id, { signal }),
        );
        return disk === undefined ? { exists: false } : observeDisk(mr.spec, disk);
      },
      async findByName(cloudName) {
        const disk = await itemByName(account.disks, cloudName);
        return disk === undefined
          ? undefined
          : { id: disk.id, ...(disk.created_at ? { createdAt: disk.created_at } : {}) };
      },
      async create(mr, target, signal) {
        const operation = await client.disks.create(
          projectId,
          {
            name: target.cloudName,
            size: mr.spec.size,
            location: target.location ?? mr.spec.location,
            type: mr.spec.type,
            block_size: mr.spec.blockSize,
          },
          { signal },
        );
        return { operation, statusFields: { cloudName: target.cloudName } };
      },
      async update(mr, observed, signal) {
        const current = String(observed.atProvider.size ?? "");
        const comparison = compareDiskSize(mr.spec.size, current);
        if (comparison === "shrink") {
          return {
            refused: {
              reason: REASON.InvalidSpec,
              message: `disks can only grow: spec.size ${mr.spec.size} is smaller than ${current}`,
            },
          };
        }
        if (comparison !== "grow") return {};
        const size = mr.spec.size;
        return {
          action: "RESIZE",
          send: () => client.disks.resize(projectId, observed.id, size, { signal }),
          note: `RESIZE ${current} → ${size}`,
        };
      },
      async delete(_mr, id, signal) {
        return { action: "DELETE", send: () => client.disks.delete(projectId, id, { signal }) };
      },
      deleteBlocker(_mr, observed) {
        const attached = observed.atProvider.attachedTo;
        if (!Array.isArray(attached) || attached.length === 0) return undefined;
        const vms = attached.map((a) => (a as { vmId?: string }).vmId).join(", ");
        return `disk is still attached to VM ${vms}; waiting for it to be detached`;
      },
    };
  },
};
