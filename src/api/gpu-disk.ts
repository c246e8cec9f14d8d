// GpuDisk: an attachable data disk (persistent SSD or shared volume).
import { z } from "zod";
import { BLOCK_SIZES, DISK_TYPES, SIZE_PATTERN } from "../cloud/wire.ts";
import { managedSpecRules, managedSpecShape, managedStatusShape } from "./common.ts";
import {
  type CelRule,
  immutable,
  LOCATION_EXPECTED,
  LOCATION_PATTERN,
  matching,
  text,
  whenMatching,
} from "./fields.ts";
import { defineKind, MANAGED_COLUMNS } from "./kind-info.ts";

const GIB_PER_TIB = 1024;
/** Limits from the cloud's contract: persistent-ssd 1 GiB–10 TiB; shared-volume 1–1000 TiB in whole TiB. */
export const PERSISTENT_SSD_MAX_GIB = 10 * GIB_PER_TIB;
export const SHARED_VOLUME_MIN_GIB = GIB_PER_TIB;
export const SHARED_VOLUME_MAX_GIB = 1000 * GIB_PER_TIB;
/** status.printableAttachedTo holds at most this much (a long list ends with "+N more"). */
export const PRINTABLE_ATTACHED_LENGTH = 256;

/** `512GiB` → 512, `2TiB` → 2048; undefined when the text is not a size. */
export function sizeInGiB(size: string): number | undefined {
  const match = SIZE_PATTERN.exec(size);
  if (match === null) return undefined;
  const amount = Number(match[1]);
  return match[2] === "TiB" ? amount * GIB_PER_TIB : amount;
}

/** The same conversion in CEL, for the rules below (only ever evaluated on a size that matches SIZE_PATTERN). */
function celGiB(expr: string): string {
  return `(int(${expr}.substring(0, ${expr}.size() - 3)) * (${expr}.endsWith('TiB') ? ${GIB_PER_TIB} : 1))`;
}

export const SIZE_EXPECTED = "must be a whole number followed by GiB or TiB, such as 512GiB or 1TiB";

/** A rule about the size, checked only on a well-formed size: a malformed one gets the format error alone. */
function sizeRule(rule: string, message: string, ...sizes: string[]): CelRule {
  const guarded = sizes.reduceRight((inner, size) => whenMatching(size, SIZE_PATTERN, inner), rule);
  return { rule: guarded, message, fieldPath: ".size" };
}

export const DiskLocation = matching(z.string().min(1).max(63), LOCATION_PATTERN, LOCATION_EXPECTED).meta({
  description: "Location of the disk, such as us-east1-a. Immutable; a VM can only attach disks of its location.",
});

const specRules: readonly CelRule[] = [
  ...managedSpecRules,
  immutable("location"),
  immutable("type"),
  immutable("blockSize"),
  sizeRule(`${celGiB("self.size")} >= ${celGiB("oldSelf.size")}`, "size can only grow", "self.size", "oldSelf.size"),
  sizeRule(
    `self.type != 'persistent-ssd' || ${celGiB("self.size")} <= ${PERSISTENT_SSD_MAX_GIB}`,
    "a persistent-ssd disk is at most 10TiB",
    "self.size",
  ),
  sizeRule(
    `self.type != 'shared-volume' || (${celGiB("self.size")} % ${GIB_PER_TIB} == 0 && ${celGiB("self.size")} >= ${SHARED_VOLUME_MIN_GIB} && ${celGiB("self.size")} <= ${SHARED_VOLUME_MAX_GIB})`,
    "a shared-volume disk is 1TiB to 1000TiB in whole TiB",
    "self.size",
  ),
];

export const GpuDiskSpec = z
  .object({
    ...managedSpecShape,
    size: matching(z.string().max(16), SIZE_PATTERN, SIZE_EXPECTED).meta({
      description:
        "Size: a whole number followed by GiB or TiB (512GiB, 1TiB). persistent-ssd: 1GiB to 10TiB; " +
        "shared-volume: 1TiB to 1000TiB in whole TiB. Can grow, never shrink.",
    }),
    location: DiskLocation,
    type: z
      .enum(DISK_TYPES)
      .default("persistent-ssd")
      .meta({ description: "persistent-ssd (attach to one VM read-write) or shared-volume. Immutable." }),
    blockSize: z
      .literal(BLOCK_SIZES)
      .default(4096)
      .meta({ description: "Block size in bytes: 512 or 4096. Immutable." }),
  })
  .superRefine((spec, ctx) => {
    const gib = sizeInGiB(spec.size);
    if (gib === undefined) return; // the regex above already reported it
    if (spec.type === "persistent-ssd" && gib > PERSISTENT_SSD_MAX_GIB) {
      ctx.addIssue({ code: "custom", path: ["size"], message: "a persistent-ssd disk is at most 10TiB" });
    }
    if (
      spec.type === "shared-volume" &&
      (gib % GIB_PER_TIB !== 0 || gib < SHARED_VOLUME_MIN_GIB || gib > SHARED_VOLUME_MAX_GIB)
    ) {
      ctx.addIssue({ code: "custom", path: ["size"], message: "a shared-volume disk is 1TiB to 1000TiB in whole TiB" });
    }
  })
  .meta({ description: "Desired state of the disk.", "x-kubernetes-validations": specRules });
export type GpuDiskSpec = z.infer<typeof GpuDiskSpec>;

export const DiskAttachmentStatus = z
  .object({
    vmId: text("Id of the VM the disk is attached to.", 128),
    mode: text("read-write or read-only.", 16),
    gpuVm: text("Name of the GpuVm of this namespace that manages the VM; empty for other VMs.").optional(),
  })
  .meta({ description: "A VM the disk is attached to." });

export const GpuDiskStatus = z
  .object({
    ...managedStatusShape,
    size: text("Size as the cloud reports it.", 16).optional(),
    sizeBytes: z.int().min(0).optional().meta({ description: "Size in bytes." }),
    attachedTo: z.array(DiskAttachmentStatus).max(64).optional().meta({ description: "VMs the disk is attached to." }),
    printableAttachedTo: text(
      "The VMs the disk is attached to as the Attached column shows them: GpuVm names, or the cloud id of a VM no " +
        "GpuVm of this namespace manages, comma-separated.",
      PRINTABLE_ATTACHED_LENGTH,
    ).optional(),
  })
  .meta({ description: "Observed state of the disk." });
export type GpuDiskStatus = z.infer<typeof GpuDiskStatus>;

export const gpuDiskKind = defineKind({
  kind: "GpuDisk",
  shortNames: ["gdisk"],
  description: "GpuDisk is a data disk in the GPU cloud that GpuVms attach through spec.disks.",
  spec: GpuDiskSpec,
  status: GpuDiskStatus,
  printerColumns: [
    { name: "Size", type: "string", jsonPath: ".spec.size", description: "Requested size." },
    { name: "Type", type: "string", jsonPath: ".spec.type", description: "Disk type." },
    { name: "Location", type: "string", jsonPath: ".spec.location", description: "Location of the disk." },
    {
      name: "Attached",
      type: "string",
      jsonPath: ".status.printableAttachedTo",
      description: "GpuVms (or, for VMs not managed here, cloud VM ids) the disk is attached to.",
    },
    ...MANAGED_COLUMNS,
  ],
});
export const GpuDisk = gpuDiskKind.schema;
export type GpuDisk = z.infer<typeof GpuDisk>;
