// The catalogue of the spec's tables: the VM types (vCPUs, GPUs, memory, local disk, network) and the prices (per
// GPU-hour by family, per GB-hour of disk). Facts of the service, not of any answer: the simulator serves them, the
// operator and gpuvmctl price and describe what they make with them.
import { z } from "zod";

export const VM_TYPES = [
  "a40.1x",
  "a40.2x",
  "a40.4x",
  "a40.8x",
  "a100.1x",
  "a100.2x",
  "a100.4x",
  "a100.8x",
  "a100-80gb.1x",
  "a100-80gb.2x",
  "a100-80gb.4x",
  "a100-80gb.8x",
  "l40s-48gb.1x",
  "l40s-48gb.2x",
  "l40s-48gb.4x",
  "l40s-48gb.8x",
  "l40s-48gb.10x",
] as const;
export type VmType = (typeof VM_TYPES)[number];
export const VmTypeSchema = z.enum(VM_TYPES);

export interface VmTypeInfo {
  type: VmType;
  family: string;
  vcpu: number;
  gpus: number;
  gpuMemoryGb: number;
  memoryGb: number;
  localDisk: string;
  localDiskGb: number;
  networkGbps: number;
  /** Dollars per hour for the whole VM: the family's per-GPU price × GPUs. */
  hourlyPriceUsd: number;
}

/** Per-GPU hourly price of each family, from the spec's price table. */
export const FAMILY_PRICE_PER_GPU_HOUR: Readonly<Record<string, number>> = {
  a40: 1.1,
  "l40s-48gb": 1.25,
  a100: 1.6,
  "a100-80gb": 1.81,
};

/** Attachable persistent disks: dollars per GB per hour. */
export const DISK_PRICE_PER_GB_HOUR = 0.00013;

type Row = [VmType, number, number, number, number, string, number, number];
const TABLE: Row[] = [
  ["a40.1x", 6, 1, 48, 60, "1x 960GB NVMe", 960, 25],
  ["a40.2x", 12, 2, 48, 120, "2x 960GB NVMe", 1920, 50],
  ["a40.4x", 24, 4, 48, 240, "4x 960GB NVMe", 3840, 100],
  ["a40.8x", 48, 8, 48, 480, "8x 960GB NVMe", 7680, 200],
  ["a100.1x", 12, 1, 40, 120, "1x 960GB NVMe", 960, 25],
  ["a100.2x", 24, 2, 40, 240, "2x 960GB NVMe", 1920, 50],
  ["a100.4x", 48, 4, 40, 480, "4x 960GB NVMe", 3840, 100],
  ["a100.8x", 96, 8, 40, 960, "8x 960GB NVMe", 7680, 200],
  ["a100-80gb.1x", 12, 1, 80, 120, "1x 960GB NVMe", 960, 25],
  ["a100-80gb.2x", 24, 2, 80, 240, "2x 960GB NVMe", 1920, 50],
  ["a100-80gb.4x", 48, 4, 80, 480, "4x 960GB NVMe", 3840, 100],
  ["a100-80gb.8x", 96, 8, 80, 960, "8x 960GB NVMe", 7680, 200],
  ["l40s-48gb.1x", 8, 1, 48, 147, "none", 0, 20],
  ["l40s-48gb.2x", 16, 2, 48, 294, "none", 0, 40],
  ["l40s-48gb.4x", 32, 4, 48, 588, "none", 0, 80],
  ["l40s-48gb.8x", 64, 8, 48, 1176, "none", 0, 160],
  ["l40s-48gb.10x", 80, 10, 48, 1470, "none", 0, 200],
];

/** The family of a VM type: the part before the dot (`a100-80gb.8x` → `a100-80gb`). */
export function vmFamily(type: string): string {
  const dot = type.lastIndexOf(".");
  return dot < 0 ? type : type.slice(0, dot);
}

export const VM_TYPE_INFO: Readonly<Record<VmType, VmTypeInfo>> = Object.fromEntries(
  TABLE.map(([type, vcpu, gpus, gpuMemoryGb, memoryGb, localDisk, localDiskGb, networkGbps]) => {
    const family = vmFamily(type);
    const perGpu = FAMILY_PRICE_PER_GPU_HOUR[family] ?? 0;
    const info: VmTypeInfo = {
      type,
      family,
      vcpu,
      gpus,
      gpuMemoryGb,
      memoryGb,
      localDisk,
      localDiskGb,
      networkGbps,
      hourlyPriceUsd: Math.round(perGpu * gpus * 100) / 100,
    };
    return [type, info];
  }),
) as Record<VmType, VmTypeInfo>;

/** The catalogue entry of a type a server names, or undefined for a type this table does not know. */
export function vmTypeInfoOf(type: string): VmTypeInfo | undefined {
  return (VM_TYPE_INFO as Readonly<Record<string, VmTypeInfo | undefined>>)[type];
}
