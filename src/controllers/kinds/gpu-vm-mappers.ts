// Pure mappers of GpuVm (table-tested in test/controllers/kinds/mappers.test.ts): the observed VM as status fields,
// the one next step towards the spec, and the connection details users get.
import { DEFAULT_PRICES, type PriceTable } from "../../admission/prices.ts";
import { REASONS } from "../../api/common.ts";
import { type DiskRef, normalizeVmState, vmFamily } from "../../cloud/wire.ts";
import type { VmSummary } from "../accounts/vm-summary.ts";
import type { Observation } from "../managed/external.ts";

const SETTLED_STATES = new Set(["STATE_RUNNING", "STATE_STOPPED"]);

export function isTransitional(state: string): boolean {
  return !SETTLED_STATES.has(normalizeVmState(state));
}

/** Data disks of a VM (the summary keeps no boot disk, attachment_type `os`). */
export function dataDisks(vm: VmSummary): { id: string; name: string; mode: string }[] {
  return vm.disks.map((d) => ({ id: d.id, name: d.name, mode: d.mode }));
}

/** The VM as status fields; its price per hour (the $/HOUR column) from the price table in force. */
export function vmAtProvider(vm: VmSummary, prices: PriceTable = DEFAULT_PRICES): Record<string, unknown> {
  const hourlyPriceUSD = typeof vm.type === "string" ? prices.vmHourlyUSD(vm.type) : undefined;
  const state = normalizeVmState(vm.state);
  return {
    cloudName: vm.name,
    state,
    // What the State column shows: RUNNING, as kubectl shows states, not the API's STATE_RUNNING.
    printableState: state.replace(/^STATE_/, ""),
    type: vm.type,
    location: vm.location,
    ...(vm.publicIPv4 ? { publicIP: vm.publicIPv4 } : {}),
    ...(vm.privateIPv4 ? { privateIP: vm.privateIPv4 } : {}),
    ...(vm.ssh_destination ? { sshDestination: vm.ssh_destination } : {}),
    ...(hourlyPriceUSD !== undefined ? { hourlyPriceUSD } : {}),
    attachedDisks: dataDisks(vm),
  };
}

export interface DesiredVm {
  type: string;
  powerState: "Running" | "Stopped";
  disks: DiskRef[];
  /** The reset annotation's value when it differs from status.lastResetRequestedAt. */
  resetRequestedAt?: string;
  /** disk id → the GpuDisk (of the VM's namespace) it was resolved from, to name it in messages. */
  diskNames?: Readonly<Record<string, string>>;
}

export type VmStep =
  | { action: "none" }
  | { action: "wait" }
  | { action: "START" | "STOP" | "RESET"; why: string }
  | { action: "UPDATE"; type?: string; disks?: DiskRef[]; why: string };

const diskKey = (disk: { id: string; mode?: string }): string => `${disk.id}:${disk.mode ?? "read-write"}`;

export function disksMatch(desired: readonly DiskRef[], observed: readonly { id: string; mode: string }[]): boolean {
  const want = [...new Set(desired.map(diskKey))].sort().join(",");
  const have = [...new Set(observed.map(diskKey))].sort().join(",");
  return want === have;
}

/** The parts of a VM the next step depends on (also rebuilt from status fields of an observation). */
export interface ObservedVm {
  type: string;
  state: string;
  /** Attached data disks; `gpuDisk` names the GpuDisk managing one, when known. */
  disks: readonly { id: string; mode: string; gpuDisk?: string }[];
}

/** What an UPDATE of the disks does, naming GpuDisks where it can: "attach GpuDisk datasets (read-write)". */
export function diskChange(desired: DesiredVm, observed: ObservedVm["disks"]): string {
  const label = (disk: { id: string; gpuDisk?: string }): string => {
    const name = disk.gpuDisk ?? desired.diskNames?.[disk.id];
    return name === undefined ? `disk ${disk.id}` : `GpuDisk ${name}`;
  };
  const have = new Set(observed.map(diskKey));
  const want = new Set(desired.disks.map(diskKey));
  const attach = desired.disks
    .filter((disk) => !have.has(diskKey(disk)))
    .map((disk) => `attach ${label(disk)} (${disk.mode ?? "read-write"})`);
  const detach = observed.filter((disk) => !want.has(diskKey(disk))).map((disk) => `detach ${label(disk)}`);
  return [...attach, ...detach].join(", ") || "reorder disks";
}

export function observedVmOf(vm: VmSummary): ObservedVm {
  return { type: vm.type, state: vm.state, disks: dataDisks(vm) };
}

/** The one next step towards the spec (pure: table-tested). */
export function nextVmStep(desired: DesiredVm, vm: ObservedVm): VmStep {
  const state = normalizeVmState(vm.state);
  if (isTransitional(state)) return { action: "wait" };
  const running = state === "STATE_RUNNING";
  if (desired.type !== vm.type) {
    return running
      ? { action: "STOP", why: `STOP to change type ${vm.type} → ${desired.type}` }
      : { action: "UPDATE", type: desired.type, why: `UPDATE type ${vm.type} → ${desired.type}` };
  }
  if (!disksMatch(desired.disks, vm.disks)) {
    return {
      action: "UPDATE",
      disks: desired.disks,
      why: `UPDATE disks: ${diskChange(desired, vm.disks)}`,
    };
  }
  if (desired.powerState === "Running" && !running)
    return { action: "START", why: "START to match powerState Running" };
  if (desired.powerState === "Stopped" && running) return { action: "STOP", why: "STOP to match powerState Stopped" };
  if (desired.resetRequestedAt !== undefined && running) {
    return { action: "RESET", why: `RESET requested at ${desired.resetRequestedAt}` };
  }
  return { action: "none" };
}

export function observeVm(
  desired: DesiredVm | undefined,
  vm: VmSummary,
  prices: PriceTable = DEFAULT_PRICES,
): Extract<Observation, { exists: true }> {
  const state = normalizeVmState(vm.state);
  const atProvider = vmAtProvider(vm, prices);
  if (desired !== undefined && vmFamily(desired.type) !== vmFamily(vm.type)) {
    const message = `spec.type ${desired.type} is outside the VM's family ${vmFamily(vm.type)}; recreate the object to change family`;
    return {
      exists: true,
      id: vm.id,
      name: vm.name,
      ready: false,
      upToDate: true,
      atProvider,
      ...(vm.created_at ? { createdAt: vm.created_at } : {}),
      terminal: { reason: REASONS.ImmutableFieldChanged, message },
    };
  }
  const step = desired === undefined ? { action: "none" as const } : nextVmStep(desired, observedVmOf(vm));
  const wantRunning = (desired?.powerState ?? "Running") === "Running";
  return {
    exists: true,
    id: vm.id,
    name: vm.name,
    ready: state === (wantRunning ? "STATE_RUNNING" : "STATE_STOPPED"),
    upToDate: step.action === "none" || step.action === "wait",
    busy: step.action === "wait",
    atProvider,
    ...(vm.created_at ? { createdAt: vm.created_at } : {}),
    ...(vm.updated_at ? { updatedAt: vm.updated_at } : {}),
    ...("why" in step ? { diff: step.why } : {}),
  };
}

/** What a user needs to connect, as written to the Secret/ConfigMap named in spec.connectionDetails. */
export function connectionDetails(atProvider: Record<string, unknown>): Record<string, string> {
  const destination = String(atProvider.sshDestination ?? "");
  const at = destination.indexOf("@");
  return {
    host: String(atProvider.publicIP ?? ""),
    user: at > 0 ? destination.slice(0, at) : "",
    sshDestination: destination,
    publicIP: String(atProvider.publicIP ?? ""),
    privateIP: String(atProvider.privateIP ?? ""),
    port: "22",
  };
}

/** Rebuild the step from the status fields an observation carries (the reconciler passes observations). */
export function nextVmStepFromObservation(
  desired: DesiredVm,
  observed: Extract<Observation, { exists: true }>,
): VmStep {
  const at = observed.atProvider;
  const disks = Array.isArray(at.attachedDisks)
    ? (at.attachedDisks as { id: string; mode: string; gpuDisk?: string }[])
    : [];
  return nextVmStep(desired, { type: String(at.type ?? ""), state: String(at.state ?? ""), disks });
}
