// The service's answers (tolerant): required fields are required, unknown fields pass through (z.looseObject),
// and the few places where a real server may differ (error codes and ports as numbers) accept both forms.
import { z } from "zod";
import { Timestamp } from "./common.ts";

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
