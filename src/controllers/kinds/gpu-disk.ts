// GpuDisk: create, grow-only resize (a shrink is refused, nothing sent), delete once no VM has it attached. What it
// spends (budgets, docs/budgets.md): the disk price at its size, from its create on, attached or not; a growth
// reserves the price at the new size.

import { diskLedgerStep, type LedgerStep } from "../../admission/actions.ts";
import type { Need } from "../../admission/ledger.ts";
import { DEFAULT_PRICES, type PriceTable } from "../../admission/prices.ts";
import { REASONS } from "../../api/common.ts";
import { type GpuDiskSpec, gpuDiskKind, PRINTABLE_ATTACHED_LENGTH } from "../../api/gpu-disk.ts";
import { parseSize } from "../../cloud/sizes.ts";
import type { Disk } from "../../cloud/wire.ts";
import type { ManagedObject } from "../core/object-model.ts";
import type { DeleteBlocker, ExternalClient, KindDefinition, KindSpend, Observation } from "../managed/external.ts";
import { findResource, itemByName, managedByCloudId } from "./support.ts";

/** The GpuVm (of the disk's namespace) that manages a VM id, when one does. */
export type VmNameOf = (vmId: string) => string | undefined;

/**
 * What the Attached column shows: GpuVm names, or the VM id for a VM no GpuVm here manages; cut to the field's
 * bound with a count of the rest.
 */
export function printableAttachments(attachments: readonly { vmId: string; gpuVm?: string }[]): string {
  const names = attachments.map((attachment) => attachment.gpuVm ?? attachment.vmId);
  let text = names.join(",");
  for (let shown = names.length - 1; text.length > PRINTABLE_ATTACHED_LENGTH && shown > 0; shown--) {
    text = `${names.slice(0, shown).join(",")},+${names.length - shown} more`;
  }
  return text.slice(0, PRINTABLE_ATTACHED_LENGTH);
}

/** Observed disk → status fields. */
export function diskAtProvider(disk: Disk, vmNameOf: VmNameOf = () => undefined): Record<string, unknown> {
  const attachedTo = disk.attached_to.map((attachment) => {
    const gpuVm = vmNameOf(attachment.vm_id);
    return { vmId: attachment.vm_id, mode: attachment.mode, ...(gpuVm !== undefined ? { gpuVm } : {}) };
  });
  return {
    cloudName: disk.name,
    size: disk.size,
    sizeBytes: safeBytes(disk.size),
    attachedTo,
    printableAttachedTo: printableAttachments(attachedTo),
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

export function observeDisk(
  spec: GpuDiskSpec,
  disk: Disk,
  vmNameOf: VmNameOf = () => undefined,
): Extract<Observation, { exists: true }> {
  const size = compareDiskSize(spec.size, disk.size);
  return {
    exists: true,
    id: disk.id,
    name: disk.name,
    ready: true,
    upToDate: size === "equal" || size === "unknown",
    atProvider: diskAtProvider(disk, vmNameOf),
    ...(disk.created_at ? { createdAt: disk.created_at } : {}),
    ...(disk.updated_at ? { updatedAt: disk.updated_at } : {}),
    ...(size === "equal" ? {} : { diff: `size ${disk.size} → ${spec.size}` }),
  };
}

/**
 * Why a disk being deleted must wait for the VMs it is attached to. A GpuVm that still lists it in spec.disks, or
 * a VM no GpuVm here manages, keeps it forever: the user's to change (needsAction). A GpuVm being deleted, or one
 * that no longer lists it, detaches it by itself.
 */
export function diskInUse(
  disk: ManagedObject<GpuDiskSpec>,
  diskId: string,
  attachments: readonly { vmId: string }[],
  gpuVmOf: (vmId: string) => ManagedObject | undefined,
): DeleteBlocker {
  const holding: string[] = [];
  const leaving: string[] = [];
  for (const { vmId } of attachments) {
    const vm = gpuVmOf(vmId);
    if (vm === undefined) {
      holding.push(
        `VM ${vmId}, which no GpuVm in namespace ${disk.metadata.namespace} manages: detach it in the cloud`,
      );
      continue;
    }
    const name = `GpuVm ${vm.metadata.namespace}/${vm.metadata.name}`;
    const disks = (vm.spec as { disks?: { diskRef?: { name: string }; id?: string }[] }).disks ?? [];
    const listed = disks.some((entry) => entry.diskRef?.name === disk.metadata.name || entry.id === diskId);
    if (vm.metadata.deletionTimestamp !== undefined) leaving.push(`${name} (being deleted)`);
    else if (listed) holding.push(`${name}: remove the disk from its spec.disks, or delete the GpuVm`);
    else leaving.push(`${name} (detaching it)`);
  }
  if (holding.length > 0) {
    return {
      message: `still attached to ${holding.join("; ")}. The disk is deleted once it is detached`,
      needsAction: true,
    };
  }
  return { message: `waiting to be detached from ${leaving.join(", ")}`, needsAction: false };
}

/** The amount of a disk step at `size` (a size that does not parse asks for more than any budget holds). */
function diskNeed(action: "create" | "grow", size: string, prices: PriceTable): Need {
  const step: LedgerStep = diskLedgerStep({ action, sizeBytes: safeBytes(size) ?? Number.MAX_SAFE_INTEGER }, prices);
  if (step.step !== "reserve") throw new Error(`a disk ${action} reserves its price`);
  return step.need;
}

/** A disk bills its size's price, attached or not. */
export const gpuDiskSpend: KindSpend<GpuDiskSpec> = {
  create: (spec, prices) => diskNeed("create", spec.size, prices),
  billing(observed, prices) {
    const bytes = observed.atProvider.sizeBytes;
    return typeof bytes === "number" ? { ...prices.disk(bytes), purpose: "Running" } : undefined;
  },
};

export const gpuDisk: KindDefinition<GpuDiskSpec, undefined> = {
  info: gpuDiskKind,
  family: "disk",
  locations: (spec) => [spec.location],
  references: () => [],
  spend: gpuDiskSpend,
  external(account, deps): ExternalClient<GpuDiskSpec, undefined> {
    const { client, projectId } = account;
    const prices = () => deps.prices?.() ?? DEFAULT_PRICES;
    return {
      resolve: async () => ({ type: "ready", resolved: undefined }),
      async observe(mr, options, signal) {
        const disk = await findResource(account.disks, mr, options, (id) =>
          client.disks.get(projectId, id, { signal }),
        );
        if (disk === undefined) return { exists: false };
        const vmNameOf: VmNameOf = (vmId) =>
          managedByCloudId(deps, "GpuVm", mr.metadata.namespace, account, vmId)?.metadata.name;
        return observeDisk(mr.spec, disk, vmNameOf);
      },
      async findByName(cloudName) {
        const disk = await itemByName(account.disks, cloudName);
        return disk === undefined
          ? undefined
          : { id: disk.id, ...(disk.created_at ? { createdAt: disk.created_at } : {}) };
      },
      async create(mr, _resolved, target, signal) {
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
        return { type: "started", operation, statusFields: { cloudName: target.cloudName } };
      },
      async update(mr, _resolved, observed, signal) {
        const current = String(observed.atProvider.size ?? "");
        const comparison = compareDiskSize(mr.spec.size, current);
        if (comparison === "shrink") {
          return {
            type: "refused",
            reason: REASONS.InvalidSpec,
            message: `disks can only grow: spec.size ${mr.spec.size} is smaller than ${current}`,
          };
        }
        if (comparison !== "grow") return { type: "unchanged" };
        const size = mr.spec.size;
        return {
          type: "action",
          action: "RESIZE",
          send: () => client.disks.resize(projectId, observed.id, size, { signal }),
          note: `RESIZE ${current} → ${size}`,
          reserve: diskNeed("grow", size, prices()),
        };
      },
      async delete(_mr, id, signal) {
        return { type: "action", action: "DELETE", send: () => client.disks.delete(projectId, id, { signal }) };
      },
      deleteBlocker(mr, observed) {
        const attached = Array.isArray(observed.atProvider.attachedTo)
          ? (observed.atProvider.attachedTo as { vmId: string }[])
          : [];
        if (attached.length === 0) return undefined;
        return diskInUse(mr, observed.id, attached, (vmId) =>
          managedByCloudId(deps, "GpuVm", mr.metadata.namespace, account, vmId),
        );
      },
    };
  },
};
