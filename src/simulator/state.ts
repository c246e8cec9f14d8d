// The simulator's state: plain JSON-serialisable records (the state file is this object as JSON).
import type { Capacity } from "./catalogue.ts";

export interface OrganizationRecord {
  id: string;
  name: string;
  payment_customer_id: string;
  hasValidPaymentMethod: boolean;
}

export interface ProjectRecord {
  id: string;
  name: string;
  organization_id: string;
}

export interface UserRecord {
  email: string;
  password: string;
  projectIds: string[];
}

export interface ApiKeyRecord {
  key: string;
  projectId: string;
}

export interface VmRecord {
  id: string;
  projectId: string;
  name: string;
  type: string;
  location: string;
  state: string;
  /** State before the action in flight: where UPDATE returns and where a failed action falls back. */
  previousState: string;
  image: string;
  /** The startup script the VM was created with (a cloud keeps it with the instance); absent without one. */
  startupScript?: string;
  createdAtMs: number;
  updatedAtMs: number;
  visibleAtMs: number;
  bootDisk: { id: string; name: string; size: string; serialNumber: string };
  networkId: string;
  subnetId: string;
  nicId: string;
  macAddress: string;
  privateIp: string;
  publicIp: string;
  publicIpId: string;
  /** Usage is accounted up to this instant. */
  billedUntilMs: number;
  /** Failure code the operation in flight will end with (it then holds no capacity). */
  doomed: string;
}

export interface DiskAttachmentRecord {
  vmId: string;
  mode: string;
}

export interface DiskRecord {
  id: string;
  projectId: string;
  name: string;
  type: string;
  size: string;
  location: string;
  blockSize: number;
  serialNumber: string;
  createdAtMs: number;
  updatedAtMs: number;
  visibleAtMs: number;
  attachments: DiskAttachmentRecord[];
  /** Operation in flight on this disk (resize or delete), or empty. */
  busyOperationId: string;
}

export interface NetworkRecord {
  id: string;
  projectId: string;
  name: string;
  cidr: string;
  subnets: string[];
  gateway: string;
  createdAtMs: number;
  visibleAtMs: number;
  busyOperationId: string;
}

export interface EndpointRecord {
  cidr: string;
  resource_id: string;
}

export interface FirewallRuleRecord {
  id: string;
  projectId: string;
  name: string;
  direction: string;
  action: string;
  vpcNetworkId: string;
  sources: EndpointRecord[];
  sourcePorts: string[];
  destinations: EndpointRecord[];
  destinationPorts: string[];
  protocols: string[];
  createdAtMs: number;
  visibleAtMs: number;
  busyOperationId: string;
}

export interface OperationRecord {
  id: string;
  projectId: string;
  family: string;
  name: string;
  resourceId: string;
  request: unknown;
  state: string;
  result: unknown;
  startedAtMs: number;
  completedAtMs: number;
  /** When the operation settles (kept so that a reloaded state file resumes in-flight work). */
  settleAtMs: number;
  /** Planned failure, decided when the operation starts. */
  failure: { code: string; message: string } | null;
  /** What the operation applies when it succeeds (a resource to insert, a new size, a patch). */
  pending: unknown;
}

/** Signed-in sessions, kept with the state so that a restart (the playground's) does not sign anyone out. */
export interface SessionsRecord {
  /** Access token → who and until when (ms since epoch). */
  access: Record<string, { email: string; expiresAtMs: number }>;
  /** Refresh token (single use) → who. */
  refresh: Record<string, string>;
}

export interface SimState {
  version: 1;
  /**
   * The API profile that made this state (`contract`, `seed-only`): a simulator of another profile refuses it
   * rather than serve one cloud to both by surprise. Absent in state files written before it was recorded.
   */
  profile?: string;
  organizations: OrganizationRecord[];
  projects: ProjectRecord[];
  users: UserRecord[];
  apiKeys: ApiKeyRecord[];
  vms: VmRecord[];
  disks: DiskRecord[];
  networks: NetworkRecord[];
  firewallRules: FirewallRuleRecord[];
  operations: OperationRecord[];
  capacity: Capacity;
  /** GPU-hours keyed by `date|projectId|type|location`. */
  usage: Record<string, number>;
  /** Allocates addresses, MACs and serial numbers. */
  addressCounter: number;
  /** Absent in state files written before sessions were kept. */
  sessions?: SessionsRecord;
}
