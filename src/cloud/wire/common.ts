// What the wire schemas share: timestamps, sizes and ports as the service writes them, the enumerations (disk
// types and modes, firewall directions, actions and protocols, VM and operation states, operation names and
// families) and each operation family's path.
import { z } from "zod";

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

/** Base path of each operation family, relative to `/projects/<p>` (route templates for metrics and the simulator). */
export const OPERATION_FAMILY_PATH: Readonly<Record<OperationFamily, string>> = {
  vm: "vms",
  disk: "disks",
  network: "vpc/networks",
  "firewall-rule": "vpc/firewall-rules",
};
