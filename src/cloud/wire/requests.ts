// The requests (strict: an unknown field is a 400 in the simulator, which validates bodies with these; the client
// builds them) and the queries of the list endpoints.
import { z } from "zod";
import {
  DiskModeSchema,
  DiskTypeSchema,
  FIREWALL_ACTIONS,
  FIREWALL_DIRECTIONS,
  FIREWALL_PROTOCOLS,
  type OperationState,
  PORT_PATTERN,
  SIZE_PATTERN,
} from "./common.ts";

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
