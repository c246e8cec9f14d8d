// Wire schemas of the GPU VM service API v0.1 (../shared/spec/gpu-vm-service-api-v0.1.md) with the gaps
// filled by ../shared/spec/contract-decisions.md and docs/api-contract.md.
//
// This file is the single contract shared by the client (src/cloud) and the simulator (src/simulator).
// Response schemas are tolerant: required fields are required, unknown fields pass through (z.looseObject),
// and the few places where a real server may differ (state spellings, numeric codes) accept both forms.
// Request schemas are strict: the simulator validates bodies with them, the client builds them.
import { z } from "zod";

// ---------------------------------------------------------------------------------------------------------
// Catalogue constants (from the spec's tables)
// ---------------------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------------------
// Shared pieces
// ---------------------------------------------------------------------------------------------------------

/** `YYYY-MM-DDThh:mm:ssZ`, or the empty string where there is no value. Tolerant on read. */
export const Timestamp = z.string();
/** Format a Date the way the service does: seconds precision, `Z`. */
export function formatTimestamp(d: Date): string {
  return `${d.toISOString().slice(0, 19)}Z`;
}

export const SIZE_PATTERN = /^([1-9][0-9]*)(GiB|TiB)$/;

export const DISK_TYPES = ["persistent-ssd", "shared-volume"] as const;
export const DiskTypeSchema = z.enum(DISK_TYPES);
export const BLOCK_SIZES = [512, 4096] as const;

export const DISK_MODES = ["read-write", "read-only"] as const;
export const DiskModeSchema = z.enum(DISK_MODES);

export const FIREWALL_DIRECTIONS = ["ingress", "egress"] as const;
export const FIREWALL_ACTIONS = ["allow", "deny"] as const;
export const FIREWALL_PROTOCOLS = ["tcp", "udp", "icmp"] as const;

/** `22`, `8000-9000`; `*` and `1-65535` are tolerated on read and mean all ports. */
export const PORT_PATTERN = /^([0-9]{1,5})(-([0-9]{1,5}))?$/;

export const VM_STATES = [
  "STATE_PROVISIONING",
  "STATE_RUNNING",
  "STATE_STOPPING",
  "STATE_STOPPED",
  "STATE_STARTING",
  "STATE_RESETTING",
  "STATE_UPDATING",
  "STATE_DELETING",
] as const;
export type VmState = (typeof VM_STATES)[number];

/**
 * Normalise a VM state as read from a server: the unprefixed spelling (`RUNNING`) gets its prefix; an unknown
 * value is kept as is (callers treat unknown states as in transition).
 */
export function normalizeVmState(state: string): string {
  const upper = state.trim().toUpperCase();
  return upper.startsWith("STATE_") ? upper : `STATE_${upper}`;
}

export const OPERATION_STATES = ["IN_PROGRESS", "SUCCEEDED", "FAILED"] as const;
export type OperationState = (typeof OPERATION_STATES)[number];
export const OPERATION_NAMES = ["CREATE", "UPDATE", "DELETE", "START", "STOP", "RESET", "RESIZE"] as const;
export type OperationName = (typeof OPERATION_NAMES)[number];
export const OPERATION_FAILURE_CODES = [
  "out_of_stock",
  "already_exists",
  "quota_exceeded",
  "invalid_state",
  "internal_error",
] as const;
/** Operation families: each has its own operation read endpoints. Also `metadata.type`. */
export const OPERATION_FAMILIES = ["vm", "disk", "network", "firewall-rule"] as const;
export type OperationFamily = (typeof OPERATION_FAMILIES)[number];

// ---------------------------------------------------------------------------------------------------------
// Resources (responses: tolerant)
// ---------------------------------------------------------------------------------------------------------

export const Organization = z.looseObject({
  id: z.string(),
  name: z.string(),
  payment_customer_id: z.string().default(""),
  hasValidPaymentMethod: z.boolean().optional(),
});
export type Organization = z.infer<typeof Organization>;

export const ProjectListItem = z.looseObject({
  id: z.string(),
  name: z.string(),
  version: z.string().default("v0.1"),
  organization_id: z.string(),
});
export type ProjectListItem = z.infer<typeof ProjectListItem>;

export const Project = z.looseObject({
  id: z.string(),
  name: z.string(),
  version: z.string().default("v0.1"),
  organization: Organization,
});
export type Project = z.infer<typeof Project>;

export const BillingLink = z.looseObject({ url: z.string() });
export type BillingLink = z.infer<typeof BillingLink>;

export const VmDisk = z.looseObject({
  id: z.string(),
  name: z.string(),
  type: z.string(),
  size: z.string(),
  location: z.string(),
  block_size: z.number().int(),
  created_at: Timestamp,
  updated_at: Timestamp,
  serial_number: z.string(),
  attachment_type: z.string(),
  mode: z.string(),
});
export type VmDisk = z.infer<typeof VmDisk>;

export const IpEntry = z.looseObject({
  private_ipv4: z.looseObject({ address: z.string() }),
  public_ipv4: z.looseObject({ address: z.string(), id: z.string(), type: z.string() }),
});
export type IpEntry = z.infer<typeof IpEntry>;

export const NetworkInterface = z.looseObject({
  id: z.string(),
  name: z.string(),
  network: z.string(),
  subnet: z.string(),
  interface_type: z.string(),
  mac_address: z.string(),
  ips: z.array(IpEntry),
});
export type NetworkInterface = z.infer<typeof NetworkInterface>;

export const Vm = z.looseObject({
  id: z.string(),
  project_id: z.string(),
  type: z.string(),
  state: z.string(),
  ssh_destination: z.string(),
  created_at: Timestamp,
  updated_at: Timestamp,
  name: z.string(),
  location: z.string(),
  commitment_period: z.number().int(),
  commitment_end: z.string(),
  disks: z.array(VmDisk),
  network_interfaces: z.array(NetworkInterface),
  host_channel_adapters: z.array(z.string()),
  virtualization_features: z.looseObject({ nested_virtualization: z.boolean() }),
  instance_template_id: z.string(),
  instance_group_id: z.string(),
  reservation_id: z.string(),
});
export type Vm = z.infer<typeof Vm>;

export const DiskAttachment = z.looseObject({
  vm_id: z.string(),
  attachment_type: z.string(),
  mode: z.string(),
});
export type DiskAttachment = z.infer<typeof DiskAttachment>;

export const Disk = z.looseObject({
  id: z.string(),
  name: z.string(),
  type: z.string(),
  size: z.string(),
  location: z.string(),
  block_size: z.number().int(),
  serial_number: z.string(),
  created_at: Timestamp,
  updated_at: Timestamp,
  attached_to: z.array(DiskAttachment),
});
export type Disk = z.infer<typeof Disk>;

export const VpcNetwork = z.looseObject({
  id: z.string(),
  name: z.string(),
  subnets: z.array(z.string()),
  gateway: z.string(),
  cidr: z.string(),
});
export type VpcNetwork = z.infer<typeof VpcNetwork>;

export const Endpoint = z.looseObject({
  cidr: z.string().default(""),
  resource_id: z.string().default(""),
});
export type Endpoint = z.infer<typeof Endpoint>;

export const FirewallRule = z.looseObject({
  id: z.string(),
  name: z.string(),
  direction: z.string(),
  action: z.string(),
  vpc_network_id: z.string(),
  state: z.string(),
  sources: z.array(Endpoint),
  source_ports: z.array(z.union([z.string(), z.number()]).transform(String)),
  destinations: z.array(Endpoint),
  destination_ports: z.array(z.union([z.string(), z.number()]).transform(String)),
  protocols: z.array(z.string()),
});
export type FirewallRule = z.infer<typeof FirewallRule>;

export const OperationResultError = z.looseObject({ code: z.string(), message: z.string().default("") });
export type OperationResultError = z.infer<typeof OperationResultError>;

export const Operation = z.looseObject({
  operation_id: z.string(),
  state: z.string(),
  metadata: z.looseObject({
    operation_name: z.string(),
    id: z.string(),
    type: z.string().default(""),
    request: z.unknown().optional(),
  }),
  result: z.unknown().nullable().default(null),
  started_at: Timestamp,
  completed_at: Timestamp.default(""),
});
export type Operation = z.infer<typeof Operation>;

export const OperationEnvelope = z.looseObject({ operation: Operation });
export type OperationEnvelope = z.infer<typeof OperationEnvelope>;

export const Image = z.looseObject({
  id: z.string(),
  name: z.string(),
  description: z.string().default(""),
  tags: z.array(z.string()),
  created_at: Timestamp,
  locations: z.array(z.string()),
});
export type Image = z.infer<typeof Image>;

export const AvailabilityItem = z.looseObject({
  type: z.string(),
  location: z.string(),
  available: z.boolean(),
  /**
   * How many more VMs of the type the location takes now: an extension beyond the spec (docs/api-contract.md)
   * that the simulator serves. Read when it is a whole number ≥ 0; anything else is ignored, never an error.
   */
  available_count: z.int().min(0).optional().catch(undefined),
});
export type AvailabilityItem = z.infer<typeof AvailabilityItem>;

export const SpecItem = z.looseObject({
  product_name: z.string(),
  description: z.string(),
  cpu_cores: z.number().int(),
  cpu_type: z.string(),
  memory_gb: z.number().int(),
  memory_type: z.string(),
  disk_gb: z.number().int(),
  disk_type: z.string(),
  num_gpu: z.number().int(),
  gpu_type: z.string(),
});
export type SpecItem = z.infer<typeof SpecItem>;

export const UsageItem = z.looseObject({
  billable_metric: z.string(),
  date: z.string(),
  project_id: z.string(),
  quantity: z.number(),
  region: z.string(),
  reservation_id: z.string(),
  resource_type: z.string(),
});
export type UsageItem = z.infer<typeof UsageItem>;

export const TokenResponse = z.looseObject({
  access_token: z.string(),
  refresh_token: z.string(),
  expires_in: z.number().int(),
  token_type: z.string(),
});
export type TokenResponse = z.infer<typeof TokenResponse>;

export const MessageResponse = z.looseObject({ message: z.string() });

/** `{ items: T[] }` */
export function itemsOf<T extends z.ZodType>(item: T) {
  return z.looseObject({ items: z.array(item) });
}
export const StringItems = itemsOf(z.string());

export const VmListPage = z.looseObject({
  items: z.array(Vm),
  next_page_token: z.string(),
  prev_page_token: z.string(),
});
export type VmListPage = z.infer<typeof VmListPage>;

/** Error body of every non-2xx answer. `code` may come as a number or a numeric string. */
export const ErrorBody = z.looseObject({
  code: z.union([z.string(), z.number()]).transform(String),
  message: z.string().default(""),
  error_id: z.string().optional(),
  reason: z.string().optional(),
});
export type ErrorBody = z.infer<typeof ErrorBody>;

export const ERROR_CODES = {
  400: "bad_request",
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed",
  409: "conflict",
  429: "too_many_requests",
  500: "internal_error",
  503: "unavailable",
} as const;

// ---------------------------------------------------------------------------------------------------------
// Requests (strict: unknown fields are a 400 in the simulator; the client builds them)
// ---------------------------------------------------------------------------------------------------------

export const TokenRequest = z.discriminatedUnion("grant_type", [
  z.strictObject({ grant_type: z.literal("password"), email: z.string().min(1), password: z.string().min(1) }),
  z.strictObject({ grant_type: z.literal("refresh_token"), refresh_token: z.string().min(1) }),
]);
export type TokenRequest = z.infer<typeof TokenRequest>;

export const ChangePasswordRequest = z.strictObject({
  current_password: z.string().min(1),
  new_password: z.string().min(8),
});
export type ChangePasswordRequest = z.infer<typeof ChangePasswordRequest>;

export const DiskRef = z.strictObject({ id: z.string().min(1), mode: DiskModeSchema.default("read-write") });
export type DiskRef = z.infer<typeof DiskRef>;

export const CreateVmRequest = z.strictObject({
  name: z.string().min(1).max(63),
  type: z.string().min(1),
  location: z.string().min(1),
  ssh_public_key: z.string().min(1),
  image: z.string().optional(),
  disks: z.array(DiskRef).optional(),
  startup_script: z.string().optional(),
  shutdown_script: z.string().optional(),
});
export type CreateVmRequest = z.input<typeof CreateVmRequest>;

export const VM_ACTIONS = ["START", "STOP", "RESET", "UPDATE"] as const;
export type VmAction = (typeof VM_ACTIONS)[number];
export const VmActionRequest = z.discriminatedUnion("action", [
  z.strictObject({ action: z.literal("START") }),
  z.strictObject({ action: z.literal("STOP") }),
  z.strictObject({ action: z.literal("RESET") }),
  z.strictObject({
    action: z.literal("UPDATE"),
    type: z.string().min(1).optional(),
    disks: z.array(DiskRef).optional(),
  }),
]);
export type VmActionRequest = z.input<typeof VmActionRequest>;

export const CreateDiskRequest = z.strictObject({
  name: z.string().min(1).max(63),
  size: z.string().regex(SIZE_PATTERN, "size must be a whole number followed by GiB or TiB"),
  location: z.string().min(1),
  block_size: z.union([z.literal(512), z.literal(4096)]).optional(),
  type: DiskTypeSchema.optional(),
});
export type CreateDiskRequest = z.input<typeof CreateDiskRequest>;

export const ResizeDiskRequest = z.strictObject({
  size: z.string().regex(SIZE_PATTERN, "size must be a whole number followed by GiB or TiB"),
});
export type ResizeDiskRequest = z.infer<typeof ResizeDiskRequest>;

export const CIDR_PATTERN =
  /^((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\/(3[0-2]|[12]?[0-9])$/;

export const CreateNetworkRequest = z.strictObject({
  name: z.string().min(1).max(63),
  cidr: z.string().regex(CIDR_PATTERN, "cidr must be an IPv4 CIDR such as 10.0.0.0/16").optional(),
});
export type CreateNetworkRequest = z.input<typeof CreateNetworkRequest>;

export const EndpointRequest = z.strictObject({
  cidr: z.union([z.literal(""), z.string().regex(CIDR_PATTERN, "cidr must be an IPv4 CIDR")]).default(""),
  resource_id: z.string().default(""),
});
export type EndpointRequest = z.input<typeof EndpointRequest>;

const PortString = z.string().regex(PORT_PATTERN, 'ports are strings such as "22" or "8000-9000"');

export const CreateFirewallRuleRequest = z.strictObject({
  name: z.string().min(1).max(63),
  vpc_network_id: z.string().min(1),
  direction: z.enum(FIREWALL_DIRECTIONS),
  action: z.enum(FIREWALL_ACTIONS),
  protocols: z.array(z.enum(FIREWALL_PROTOCOLS)).min(1),
  sources: z.array(EndpointRequest).default([]),
  destinations: z.array(EndpointRequest).default([]),
  source_ports: z.array(PortString).default([]),
  destination_ports: z.array(PortString).default([]),
});
export type CreateFirewallRuleRequest = z.input<typeof CreateFirewallRuleRequest>;

export const PatchFirewallRuleRequest = z.strictObject({
  name: z.string().min(1).max(63).optional(),
  protocols: z.array(z.enum(FIREWALL_PROTOCOLS)).min(1).optional(),
  sources: z.array(EndpointRequest).optional(),
  destinations: z.array(EndpointRequest).optional(),
  source_ports: z.array(PortString).optional(),
  destination_ports: z.array(PortString).optional(),
});
export type PatchFirewallRuleRequest = z.input<typeof PatchFirewallRuleRequest>;

/** Query of GET /projects/<p>/vms. Array filters go comma-separated on the wire. */
export interface ListVmsQuery {
  ids?: string[];
  names?: string[];
  types?: string[];
  locations?: string[];
  states?: string[];
  limit?: number;
  sort?: VmSort;
  next_token?: string;
  prev_token?: string;
}
export const VM_SORTS = ["name", "-name", "created_at", "-created_at", "updated_at", "-updated_at"] as const;
export type VmSort = (typeof VM_SORTS)[number];
export const VM_LIST_DEFAULT_LIMIT = 50;
export const VM_LIST_MAX_LIMIT = 500;

/** Query of GET .../operations (every family). */
export interface ListOperationsQuery {
  resource_id?: string;
  state?: OperationState;
  lower_time_bound?: string;
}

export interface UsageQuery {
  resource_types?: string[];
  regions?: string[];
  start_date?: string;
  end_date?: string;
}

// ---------------------------------------------------------------------------------------------------------
// Routes (templates, for metrics and for the simulator)
// ---------------------------------------------------------------------------------------------------------

/** Base path of each operation family, relative to `/projects/<p>`. */
export const OPERATION_FAMILY_PATH: Readonly<Record<OperationFamily, string>> = {
  vm: "vms",
  disk: "disks",
  network: "vpc/networks",
  "firewall-rule": "vpc/firewall-rules",
};
