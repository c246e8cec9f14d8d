// The simulated catalogue: locations, images, spec items and the default capacity per location and type.
import type { SpecItem, VmType } from "../cloud/wire.ts";
import { VM_TYPE_INFO, VM_TYPES } from "../cloud/wire.ts";

export const LOCATIONS = ["us-east1-a", "us-southcentral1-a", "eu-iceland1-a", "us-northcentral1-a"] as const;

export interface ImageRecord {
  id: string;
  name: string;
  description: string;
  tags: string[];
  created_at: string;
  locations: string[];
}

const ALL_LOCATIONS = [...LOCATIONS];

export const IMAGES: readonly ImageRecord[] = [
  {
    id: "2b6f0c44-1a5e-4b0e-9c1e-000000000001",
    name: "ubuntu22.04",
    description: "Ubuntu 22.04 LTS",
    tags: ["2026-09-01"],
    created_at: "2026-09-01T00:00:00Z",
    locations: ALL_LOCATIONS,
  },
  {
    id: "2b6f0c44-1a5e-4b0e-9c1e-000000000002",
    name: "ubuntu22.04-nvidia-550",
    description: "Ubuntu 22.04 LTS with NVIDIA driver 550 and CUDA 12.4",
    tags: ["2026-09-01", "latest"],
    created_at: "2026-09-01T00:00:00Z",
    locations: ALL_LOCATIONS,
  },
  {
    id: "2b6f0c44-1a5e-4b0e-9c1e-000000000003",
    name: "ubuntu24.04-nvidia-565",
    description: "Ubuntu 24.04 LTS with NVIDIA driver 565 and CUDA 12.7",
    tags: ["2026-10-15", "latest"],
    created_at: "2026-10-15T00:00:00Z",
    locations: ["us-east1-a", "us-southcentral1-a", "eu-iceland1-a"],
  },
  {
    id: "2b6f0c44-1a5e-4b0e-9c1e-000000000004",
    name: "ubuntu22.04-nvidia-sxm-docker",
    description: "Ubuntu 22.04 LTS with NVIDIA driver 550, Docker and the NVIDIA container toolkit",
    tags: ["2026-08-20"],
    created_at: "2026-08-20T00:00:00Z",
    locations: ["us-east1-a", "us-southcentral1-a"],
  },
];

export const DEFAULT_IMAGE = "ubuntu22.04-nvidia-550";

const GPU_NAMES: Record<string, string> = {
  a40: "NVIDIA A40 48GB PCIe",
  a100: "NVIDIA A100 40GB PCIe",
  "a100-80gb": "NVIDIA A100 80GB PCIe",
  "l40s-48gb": "NVIDIA L40S 48GB PCIe",
};

export function specItems(): SpecItem[] {
  return VM_TYPES.map((type) => {
    const info = VM_TYPE_INFO[type];
    return {
      product_name: type,
      description: `${info.gpus}x ${GPU_NAMES[info.family] ?? info.family}, ${info.vcpu} vCPU, ${info.memoryGb} GB memory`,
      cpu_cores: info.vcpu,
      cpu_type: "AMD EPYC",
      memory_gb: info.memoryGb,
      memory_type: "DDR4",
      disk_gb: info.localDiskGb,
      disk_type: info.localDiskGb > 0 ? "NVMe" : "none",
      num_gpu: info.gpus,
      gpu_type: GPU_NAMES[info.family] ?? info.family,
    };
  });
}

/** Capacity: how many VMs of each type a location can hold at once. */
export type Capacity = Record<string, Partial<Record<VmType, number>>>;

/** Every type everywhere, with room for a few VMs of the big sizes and more of the small ones. */
export function defaultCapacity(): Capacity {
  const capacity: Capacity = {};
  for (const location of LOCATIONS) {
    const perType: Partial<Record<VmType, number>> = {};
    for (const type of VM_TYPES) {
      perType[type] = VM_TYPE_INFO[type].gpus >= 8 ? 4 : 16;
    }
    capacity[location] = perType;
  }
  return capacity;
}

/** `us-east1-a` → `us-east1`: the region a location belongs to (usage reports regions). */
export function regionOf(location: string): string {
  return location.replace(/-[a-z]$/, "");
}
