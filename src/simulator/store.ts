// The simulated cloud: tenancy, resources, the asynchronous operation engine, capacity and usage.
// Handlers call these methods with already-validated bodies; every rule of the contract lives here.
import { randomUUID } from "node:crypto";
import type {
  CreateDiskRequest,
  CreateFirewallRuleRequest,
  CreateNetworkRequest,
  CreateVmRequest,
  DiskRef,
  PatchFirewallRuleRequest,
  VmType,
} from "../cloud/wire.ts";
import { formatTimestamp, VM_TYPE_INFO, VM_TYPES, vmFamily } from "../cloud/wire.ts";
import type { Capacity } from "./catalogue.ts";
import { DEFAULT_IMAGE, IMAGES, LOCATIONS, regionOf } from "./catalogue.ts";
import type { Clock, TimerHandle } from "./clock.ts";
import { badRequest, conflict, forbidden, notFound, SimError } from "./errors.ts";
import type { FaultInjector } from "./faults.ts";
import type {
  DiskRecord,
  EndpointRecord,
  FirewallRuleRecord,
  NetworkRecord,
  OperationRecord,
  SimState,
  VmRecord,
} from "./state.ts";

export type Family = "vm" | "disk" | "network" | "firewall-rule";
export type DuplicateNameMode = "conflict" | "operation";

const GIB = 1;
const TIB = 1024;

/** Size string → GiB. Assumes SIZE_PATTERN already matched. */
export function sizeInGib(size: string): number {
  const match = /^([1-9][0-9]*)(GiB|TiB)$/.exec(size);
  if (match === null) throw badRequest(`size: '${size}' is not a whole number followed by GiB or TiB`);
  return Number(match[1]) * (match[2] === "TiB" ? TIB : GIB);
}

/** States in which a VM holds capacity and (after provisioning) accrues usage. */
const HOLDING_STATES = new Set([
  "STATE_PROVISIONING",
  "STATE_RUNNING",
  "STATE_STOPPING",
  "STATE_STARTING",
  "STATE_RESETTING",
]);
const BILLABLE_STATES = new Set(["STATE_RUNNING", "STATE_STOPPING", "STATE_RESETTING"]);
const PASS_THROUGH_STATES = new Set(["STATE_UPDATING", "STATE_DELETING"]);

function effectiveState(vm: VmRecord): string {
  return PASS_THROUGH_STATES.has(vm.state) ? vm.previousState : vm.state;
}

export function holdsCapacity(vm: VmRecord): boolean {
  return vm.doomed === "" && HOLDING_STATES.has(effectiveState(vm));
}

function isBillable(vm: VmRecord): boolean {
  return BILLABLE_STATES.has(effectiveState(vm));
}

const DAY_MS = 86_400_000;
const OPERATION_HISTORY_LIMIT = 50_000;

export interface StoreOptions {
  clock: Clock;
  faults: FaultInjector;
  latencyMs: number;
  duplicateNames: DuplicateNameMode;
  onChange: () => void;
}

export class Store {
  state: SimState;
  readonly #clock: Clock;
  readonly #faults: FaultInjector;
  readonly #onChange: () => void;
  latencyMs: number;
  duplicateNames: DuplicateNameMode;
  /** 404, or 403 as the real cloud answers for an unknown or expired operation id. */
  unknownOperationStatus: 403 | 404 = 404;
  readonly #timers = new Map<string, TimerHandle>();
  #vms = new Map<string, VmRecord>();
  #disks = new Map<string, DiskRecord>();
  #networks = new Map<string, NetworkRecord>();
  #rules = new Map<string, FirewallRuleRecord>();
  #operations = new Map<string, OperationRecord>();
  /** Operations in flight: name reservations and `state=IN_PROGRESS` without scanning the history. */
  readonly #inFlight = new Set<OperationRecord>();
  #startedSincePrune = 0;

  constructor(state: SimState, options: StoreOptions) {
    this.#clock = options.clock;
    this.#faults = options.faults;
    this.#onChange = options.onChange;
    this.latencyMs = options.latencyMs;
    this.duplicateNames = options.duplicateNames;
    this.state = state;
    this.load(state);
  }

  /** Replace the whole state (start-up, reset) and resume the operations still in flight. */
  load(state: SimState): void {
    for (const timer of this.#timers.values()) timer.cancel();
    this.#timers.clear();
    this.state = state;
    this.#vms = new Map(state.vms.map((r) => [r.id, r]));
    this.#disks = new Map(state.disks.map((r) => [r.id, r]));
    this.#networks = new Map(state.networks.map((r) => [r.id, r]));
    this.#rules = new Map(state.firewallRules.map((r) => [r.id, r]));
    this.#operations = new Map(state.operations.map((r) => [r.id, r]));
    this.#inFlight.clear();
    for (const op of this.#operations.values()) {
      if (op.state !== "IN_PROGRESS") continue;
      this.#inFlight.add(op);
      this.#schedule(op, Math.max(0, op.settleAtMs - this.now()));
    }
  }

  /** The state as plain JSON (arrays rebuilt from the maps). */
  snapshot(): SimState {
    return {
      ...this.state,
      vms: [...this.#vms.values()],
      disks: [...this.#disks.values()],
      networks: [...this.#networks.values()],
      firewallRules: [...this.#rules.values()],
      operations: [...this.#operations.values()],
    };
  }

  close(): void {
    for (const timer of this.#timers.values()) timer.cancel();
    this.#timers.clear();
  }

  now(): number {
    return this.#clock.now();
  }

  #changed(): void {
    this.#onChange();
  }

  // -------------------------------------------------------------------------------------------------------
  // Tenancy
  // -------------------------------------------------------------------------------------------------------

  project(projectId: string) {
    const project = this.state.projects.find((p) => p.id === projectId);
    if (project === undefined) throw notFound(`project ${projectId} not found`);
    return project;
  }

  organization(organizationId: string) {
    const org = this.state.organizations.find((o) => o.id === organizationId);
    if (org === undefined) throw notFound(`organization ${organizationId} not found`);
    return org;
  }

  #requirePaymentMethod(projectId: string): void {
    const org = this.organization(this.project(projectId).organization_id);
    if (!org.hasValidPaymentMethod) {
      throw forbidden(
        `organization ${org.name} has no valid payment method; add one through the billing link`,
        "payment_method_required",
      );
    }
  }

  // -------------------------------------------------------------------------------------------------------
  // Operations engine
  // -------------------------------------------------------------------------------------------------------

  #startOperation(
    projectId: string,
    family: Family,
    name: string,
    resourceId: string,
    request: unknown,
    pending: unknown = null,
    plannedFailure: { code: string; message: string } | null = null,
  ): OperationRecord {
    const now = this.now();
    const failure = plannedFailure ?? this.#faults.operationFailure(family, name) ?? null;
    const op: OperationRecord = {
      id: randomUUID(),
      projectId,
      family,
      name,
      resourceId,
      request,
      state: "IN_PROGRESS",
      result: null,
      startedAtMs: now,
      completedAtMs: 0,
      settleAtMs: now + this.latencyMs,
      failure,
      pending,
    };
    this.#operations.set(op.id, op);
    this.#inFlight.add(op);
    this.#schedule(op, this.latencyMs);
    if (++this.#startedSincePrune >= 1000) this.#pruneOperations();
    this.#changed();
    return op;
  }

  #schedule(op: OperationRecord, delayMs: number): void {
    this.#timers.set(
      op.id,
      this.#clock.setTimer(delayMs, () => {
        this.#timers.delete(op.id);
        this.#settle(op);
      }),
    );
  }

  #settle(op: OperationRecord): void {
    if (op.state !== "IN_PROGRESS") return;
    this.#inFlight.delete(op);
    let failure = op.failure;
    let result: unknown = null;
    try {
      if (failure === null) result = this.#apply(op);
      else this.#revert(op);
    } catch (error) {
      // A rule broken between start and settle (e.g. a disk attached elsewhere meanwhile) fails the operation.
      failure = {
        code: error instanceof SimError ? "invalid_state" : "internal_error",
        message: error instanceof Error ? error.message : String(error),
      };
      this.#revert(op);
    }
    op.state = failure === null ? "SUCCEEDED" : "FAILED";
    op.result = failure ?? result;
    op.completedAtMs = this.now();
    op.pending = null;
    this.#changed();
  }

  /** Apply a succeeded operation; returns its `result`. */
  #apply(op: OperationRecord): unknown {
    switch (op.family) {
      case "vm":
        return this.#applyVm(op);
      case "disk":
        return this.#applyDisk(op);
      case "network":
        return this.#applyNetwork(op);
      default:
        return this.#applyRule(op);
    }
  }

  #revert(op: OperationRecord): void {
    if (op.family === "vm") {
      const vm = this.#vms.get(op.resourceId);
      if (vm === undefined) return;
      if (op.name === "CREATE") {
        this.#removeVm(vm);
      } else {
        this.#setVmState(vm, op.name === "START" ? "STATE_STOPPED" : vm.previousState);
      }
      vm.doomed = "";
      return;
    }
    const record = this.#resourceOf(op.family, op.resourceId);
    if (record !== undefined) record.busyOperationId = "";
  }

  #resourceOf(family: string, id: string): DiskRecord | NetworkRecord | FirewallRuleRecord | undefined {
    if (family === "disk") return this.#disks.get(id);
    if (family === "network") return this.#networks.get(id);
    return this.#rules.get(id);
  }

  operationJson(op: OperationRecord) {
    return {
      operation_id: op.id,
      state: op.state,
      metadata: { operation_name: op.name, id: op.resourceId, type: op.family, request: op.request },
      result: op.result,
      started_at: formatTimestamp(new Date(op.startedAtMs)),
      completed_at: op.completedAtMs === 0 ? "" : formatTimestamp(new Date(op.completedAtMs)),
    };
  }

  getOperation(projectId: string, family: Family, operationId: string): OperationRecord {
    const op = this.#operations.get(operationId);
    if (op === undefined || op.projectId !== projectId || op.family !== family) {
      throw new SimError(this.unknownOperationStatus, `operation ${operationId} not found`);
    }
    return op;
  }

  /**
   * Forget finished operations older than a day, and the oldest finished ones beyond 50,000, so a long
   * playground session does not grow without bound (clients tolerate a vanished finished operation).
   */
  #pruneOperations(): void {
    this.#startedSincePrune = 0;
    const cutoff = this.now() - DAY_MS;
    const finished = [...this.#operations.values()].filter((op) => op.state !== "IN_PROGRESS");
    const excess = this.#operations.size - OPERATION_HISTORY_LIMIT;
    finished.forEach((op, index) => {
      if (op.completedAtMs < cutoff || index < excess) this.#operations.delete(op.id);
    });
  }

  listOperations(
    projectId: string,
    family: Family,
    filter: { resourceId?: string | undefined; state?: string | undefined; lowerTimeBoundMs?: number | undefined },
  ): OperationRecord[] {
    const out: OperationRecord[] = [];
    const candidates = filter.state === "IN_PROGRESS" ? this.#inFlight : this.#operations.values();
    for (const op of candidates) {
      if (op.projectId !== projectId || op.family !== family) continue;
      if (filter.resourceId !== undefined && op.resourceId !== filter.resourceId) continue;
      if (filter.state !== undefined && op.state !== filter.state) continue;
      // Seconds precision, like the timestamps the client sees.
      if (filter.lowerTimeBoundMs !== undefined && Math.floor(op.startedAtMs / 1000) * 1000 < filter.lowerTimeBoundMs)
        continue;
      out.push(op);
    }
    return out;
  }

  // -------------------------------------------------------------------------------------------------------
  // Capacity and usage
  // -------------------------------------------------------------------------------------------------------

  capacityOf(location: string, type: string): number {
    return this.state.capacity[location]?.[type as VmType] ?? 0;
  }

  usedCapacity(location: string, type: string): number {
    let used = 0;
    for (const vm of this.#vms.values()) {
      if (vm.location === location && vm.type === type && holdsCapacity(vm)) used++;
    }
    return used;
  }

  hasCapacity(location: string, type: string): boolean {
    return this.usedCapacity(location, type) < this.capacityOf(location, type);
  }

  setCapacity(update: Capacity): void {
    for (const [location, perType] of Object.entries(update)) {
      this.state.capacity[location] = { ...this.state.capacity[location], ...perType };
    }
    this.#changed();
  }

  availabilities(productName: string | undefined, location: string | undefined) {
    const items: { type: string; location: string; available: boolean }[] = [];
    for (const loc of LOCATIONS) {
      if (location !== undefined && location !== loc) continue;
      for (const type of VM_TYPES) {
        if (productName !== undefined && productName !== type) continue;
        items.push({ type, location: loc, available: this.hasCapacity(loc, type) });
      }
    }
    return items;
  }

  /** Add the running time since the last accrual to the per-day usage. */
  #accrue(vm: VmRecord): void {
    const now = this.now();
    if (isBillable(vm) && vm.doomed === "") {
      const gpus = VM_TYPE_INFO[vm.type as VmType]?.gpus ?? 0;
      let from = vm.billedUntilMs;
      while (from < now) {
        const dayEnd = (Math.floor(from / DAY_MS) + 1) * DAY_MS;
        const until = Math.min(dayEnd, now);
        const date = new Date(from).toISOString().slice(0, 10);
        const key = `${date}|${vm.projectId}|${vm.type}|${vm.location}`;
        this.state.usage[key] = (this.state.usage[key] ?? 0) + ((until - from) / 3_600_000) * gpus;
        from = until;
      }
    }
    vm.billedUntilMs = now;
  }

  usage(
    projectId: string,
    filter: {
      resourceTypes?: string[] | undefined;
      regions?: string[] | undefined;
      startDate?: string | undefined;
      endDate?: string | undefined;
    },
  ) {
    for (const vm of this.#vms.values()) if (vm.projectId === projectId) this.#accrue(vm);
    const items = [];
    for (const [key, quantity] of Object.entries(this.state.usage)) {
      const [date = "", project = "", type = "", location = ""] = key.split("|");
      if (project !== projectId) continue;
      const region = regionOf(location);
      if (filter.resourceTypes !== undefined && !filter.resourceTypes.includes(type)) continue;
      if (filter.regions !== undefined && !filter.regions.includes(region) && !filter.regions.includes(location))
        continue;
      if (filter.startDate !== undefined && date < filter.startDate) continue;
      if (filter.endDate !== undefined && date > filter.endDate) continue;
      items.push({
        billable_metric: "gpu-hours",
        date,
        project_id: project,
        quantity: Math.round(quantity * 1e6) / 1e6,
        region,
        reservation_id: "",
        resource_type: type,
      });
    }
    items.sort((a, b) => (a.date + a.resource_type + a.region).localeCompare(b.date + b.resource_type + b.region));
    return items;
  }

  // -------------------------------------------------------------------------------------------------------
  // VMs
  // -------------------------------------------------------------------------------------------------------

  #visible(record: { visibleAtMs: number }): boolean {
    return record.visibleAtMs <= this.now();
  }

  #nameTaken(projectId: string, family: Family, name: string, exceptId = ""): boolean {
    const records: Iterable<{ projectId: string; name: string; id: string }> =
      family === "vm"
        ? this.#vms.values()
        : family === "disk"
          ? this.#disks.values()
          : family === "network"
            ? this.#networks.values()
            : this.#rules.values();
    for (const r of records) if (r.projectId === projectId && r.name === name && r.id !== exceptId) return true;
    // Creates still in flight hold their name too.
    for (const op of this.#inFlight) {
      if (op.projectId !== projectId || op.family !== family) continue;
      const pending = op.pending as { name?: unknown } | null;
      if (op.name === "CREATE" && pending?.name === name) return true;
    }
    return false;
  }

  /** 409 `conflict`, or (the other form a real server may use) an operation that fails `already_exists`. */
  #duplicate(projectId: string, family: Family, name: string, request: unknown): OperationRecord {
    const message = `a ${family} named '${name}' already exists in this project`;
    if (this.duplicateNames === "conflict") throw conflict(message);
    return this.#startOperation(projectId, family, "CREATE", randomUUID(), request, null, {
      code: "already_exists",
      message,
    });
  }

  #nextAddress(): number {
    this.state.addressCounter += 1;
    return this.state.addressCounter;
  }

  #defaultNetwork(projectId: string): NetworkRecord {
    for (const n of this.#networks.values()) if (n.projectId === projectId && n.name === "default") return n;
    const network = this.#newNetwork(projectId, "default", "10.0.0.0/16");
    network.visibleAtMs = 0;
    this.#networks.set(network.id, network);
    return network;
  }

  /** Bodies are validated by the caller; this checks the references and the catalogue. */
  createVm(projectId: string, body: CreateVmRequest): OperationRecord {
    this.#requirePaymentMethod(projectId);
    const type = body.type;
    if (!(VM_TYPES as readonly string[]).includes(type)) throw badRequest(`type: unknown VM type '${type}'`);
    if (!(LOCATIONS as readonly string[]).includes(body.location)) {
      throw badRequest(`location: unknown location '${body.location}'`);
    }
    const imageName = body.image ?? DEFAULT_IMAGE;
    const image = IMAGES.find((i) => i.name === imageName || i.id === imageName);
    if (image === undefined) throw badRequest(`image: unknown image '${imageName}'`);
    if (!image.locations.includes(body.location)) {
      throw badRequest(`image: image '${imageName}' is not offered in ${body.location}`);
    }
    if (this.#nameTaken(projectId, "vm", body.name)) return this.#duplicate(projectId, "vm", body.name, body);
    const refs = (body.disks ?? []).map((d) => ({ id: d.id, mode: d.mode ?? "read-write" }));
    this.#checkDiskRefs(projectId, body.location, refs, "");
    const vm = this.#newVm(projectId, body.name, type, body.location, imageName, "STATE_PROVISIONING");
    vm.doomed = this.hasCapacity(body.location, type) ? "" : "out_of_stock";
    this.#vms.set(vm.id, vm);
    this.#attach(vm, refs);
    const failure =
      vm.doomed === "" ? null : { code: "out_of_stock", message: `no capacity for ${type} in ${body.location}` };
    const op = this.#startOperation(projectId, "vm", "CREATE", vm.id, body, null, failure);
    if (op.failure !== null) vm.doomed = op.failure.code;
    return op;
  }

  #newVm(projectId: string, name: string, type: string, location: string, image: string, state: string): VmRecord {
    const now = this.now();
    const network = this.#defaultNetwork(projectId);
    const n = this.#nextAddress();
    const octets = `${Math.floor(n / 250) % 256}.${(n % 250) + 2}`;
    return {
      id: randomUUID(),
      projectId,
      name,
      type,
      location,
      state,
      previousState: state,
      image,
      createdAtMs: now,
      updatedAtMs: now,
      visibleAtMs: now + this.#faults.notFoundAfterCreateMs(),
      bootDisk: {
        id: randomUUID(),
        name: `${name}-boot`,
        size: "128GiB",
        serialNumber: `SIMBOOT${n.toString(16).padStart(8, "0").toUpperCase()}`,
      },
      networkId: network.id,
      subnetId: network.subnets[0] ?? "",
      nicId: randomUUID(),
      macAddress: `02:00:00:${[(n >> 16) & 255, (n >> 8) & 255, n & 255].map((b) => b.toString(16).padStart(2, "0")).join(":")}`,
      privateIp: `10.0.${octets}`,
      publicIp: `198.18.${octets}`,
      publicIpId: randomUUID(),
      billedUntilMs: now,
      doomed: "",
    };
  }

  /** Admin fast path: VMs straight into a state, no operation, no capacity check. */
  insertVms(
    projectId: string,
    specs: { name: string; type: string; location: string; state?: string | undefined }[],
  ): VmRecord[] {
    this.project(projectId);
    const created: VmRecord[] = [];
    for (const spec of specs) {
      if (this.#nameTaken(projectId, "vm", spec.name)) throw conflict(`a vm named '${spec.name}' already exists`);
      const vm = this.#newVm(
        projectId,
        spec.name,
        spec.type,
        spec.location,
        DEFAULT_IMAGE,
        spec.state ?? "STATE_RUNNING",
      );
      vm.visibleAtMs = 0;
      this.#vms.set(vm.id, vm);
      created.push(vm);
    }
    this.#changed();
    return created;
  }

  #setVmState(vm: VmRecord, state: string): void {
    this.#accrue(vm);
    vm.state = state;
    vm.updatedAtMs = this.now();
  }

  #removeVm(vm: VmRecord): void {
    this.#accrue(vm);
    // The boot disk lives inside the VM record and goes with it; data disks are detached, never deleted.
    for (const disk of this.#disks.values()) {
      if (disk.attachments.some((a) => a.vmId === vm.id)) {
        disk.attachments = disk.attachments.filter((a) => a.vmId !== vm.id);
        disk.updatedAtMs = this.now();
      }
    }
    this.#vms.delete(vm.id);
  }

  getVm(projectId: string, vmId: string): VmRecord {
    const vm = this.#vms.get(vmId);
    if (vm === undefined || vm.projectId !== projectId || !this.#visible(vm)) throw notFound(`vm ${vmId} not found`);
    return vm;
  }

  listVms(projectId: string): VmRecord[] {
    const out: VmRecord[] = [];
    for (const vm of this.#vms.values()) if (vm.projectId === projectId && this.#visible(vm)) out.push(vm);
    return out;
  }

  vmJson(vm: VmRecord) {
    const created = formatTimestamp(new Date(vm.createdAtMs));
    const dataDisks = [];
    for (const disk of this.#disks.values()) {
      const attachment = disk.attachments.find((a) => a.vmId === vm.id);
      if (attachment === undefined) continue;
      dataDisks.push({ ...this.#diskBase(disk), attachment_type: "data", mode: attachment.mode });
    }
    return {
      id: vm.id,
      project_id: vm.projectId,
      type: vm.type,
      state: vm.state,
      ssh_destination: `ubuntu@${vm.publicIp}`,
      created_at: created,
      updated_at: formatTimestamp(new Date(vm.updatedAtMs)),
      name: vm.name,
      location: vm.location,
      commitment_period: 0,
      commitment_end: "",
      disks: [
        {
          id: vm.bootDisk.id,
          name: vm.bootDisk.name,
          type: "persistent-ssd",
          size: vm.bootDisk.size,
          location: vm.location,
          block_size: 4096,
          created_at: created,
          updated_at: created,
          serial_number: vm.bootDisk.serialNumber,
          attachment_type: "os",
          mode: "read-write",
        },
        ...dataDisks,
      ],
      network_interfaces: [
        {
          id: vm.nicId,
          name: "eth0",
          network: vm.networkId,
          subnet: vm.subnetId,
          interface_type: "Ethernet",
          mac_address: vm.macAddress,
          ips: [
            {
              private_ipv4: { address: vm.privateIp },
              public_ipv4: { address: vm.publicIp, id: vm.publicIpId, type: "dynamic" },
            },
          ],
        },
      ],
      host_channel_adapters: [],
      virtualization_features: { nested_virtualization: false },
      instance_template_id: "",
      instance_group_id: "",
      reservation_id: "",
    };
  }

  /** The data disks a VM may have: same project and location, not attached read-write to another VM. */
  #checkDiskRefs(projectId: string, location: string, refs: { id: string; mode: string }[], vmId: string): void {
    const seen = new Set<string>();
    refs.forEach((ref, index) => {
      if (seen.has(ref.id)) throw badRequest(`disks[${index}].id: disk ${ref.id} is listed twice`);
      seen.add(ref.id);
      const disk = this.#disks.get(ref.id);
      if (disk === undefined || disk.projectId !== projectId) {
        throw badRequest(`disks[${index}].id: disk ${ref.id} not found in this project`);
      }
      if (disk.location !== location) {
        throw badRequest(`disks[${index}].id: disk ${ref.id} is in ${disk.location}, the VM in ${location}`);
      }
      const elsewhere = disk.attachments.filter((a) => a.vmId !== vmId);
      if (elsewhere.some((a) => a.mode === "read-write") || (ref.mode === "read-write" && elsewhere.length > 0)) {
        throw conflict(`disks[${index}].id: disk ${ref.id} is attached to another VM`);
      }
    });
  }

  #attach(vm: VmRecord, refs: { id: string; mode: string }[]): void {
    const wanted = new Map(refs.map((r) => [r.id, r.mode]));
    for (const disk of this.#disks.values()) {
      const mode = wanted.get(disk.id);
      const current = disk.attachments.find((a) => a.vmId === vm.id);
      if (mode === undefined && current !== undefined) {
        disk.attachments = disk.attachments.filter((a) => a.vmId !== vm.id);
      } else if (mode !== undefined && current === undefined) {
        disk.attachments.push({ vmId: vm.id, mode });
      } else if (mode !== undefined && current !== undefined && current.mode !== mode) {
        current.mode = mode;
      } else {
        continue;
      }
      disk.updatedAtMs = this.now();
    }
  }

  vmAction(
    projectId: string,
    vmId: string,
    body: { action: string; type?: string | undefined; disks?: DiskRef[] | undefined },
  ): OperationRecord {
    const vm = this.getVm(projectId, vmId);
    const wrongState = () => conflict(`action ${body.action} is not allowed while the VM is ${vm.state}`);
    switch (body.action) {
      case "START": {
        if (vm.state !== "STATE_STOPPED") throw wrongState();
        const outOfStock = !this.hasCapacity(vm.location, vm.type);
        vm.previousState = vm.state;
        this.#setVmState(vm, "STATE_STARTING");
        const failure = outOfStock
          ? { code: "out_of_stock", message: `no capacity for ${vm.type} in ${vm.location}` }
          : null;
        const op = this.#startOperation(projectId, "vm", "START", vm.id, body, null, failure);
        vm.doomed = op.failure?.code ?? "";
        return op;
      }
      case "STOP":
      case "RESET": {
        if (vm.state !== "STATE_RUNNING") throw wrongState();
        vm.previousState = vm.state;
        this.#setVmState(vm, body.action === "STOP" ? "STATE_STOPPING" : "STATE_RESETTING");
        return this.#startOperation(projectId, "vm", body.action, vm.id, body);
      }
      case "UPDATE":
        return this.#updateVm(vm, body);
      default:
        throw badRequest(`action: must be START, STOP, RESET or UPDATE`);
    }
  }

  #updateVm(vm: VmRecord, body: { action: string; type?: string | undefined; disks?: DiskRef[] | undefined }) {
    if (vm.state !== "STATE_RUNNING" && vm.state !== "STATE_STOPPED") {
      throw conflict(`action UPDATE is not allowed while the VM is ${vm.state}`);
    }
    if (body.type !== undefined && body.type !== vm.type) {
      if (!(VM_TYPES as readonly string[]).includes(body.type))
        throw badRequest(`type: unknown VM type '${body.type}'`);
      if (vmFamily(body.type) !== vmFamily(vm.type)) {
        throw badRequest(`type: ${body.type} is not in the family of ${vm.type} (${vmFamily(vm.type)})`);
      }
      if (vm.state !== "STATE_STOPPED") throw conflict("type: the VM must be stopped to change its type");
    }
    const refs = body.disks?.map((d) => ({ id: d.id, mode: d.mode ?? "read-write" }));
    if (refs !== undefined) this.#checkDiskRefs(vm.projectId, vm.location, refs, vm.id);
    vm.previousState = vm.state;
    this.#setVmState(vm, "STATE_UPDATING");
    return this.#startOperation(vm.projectId, "vm", "UPDATE", vm.id, body, { type: body.type, disks: refs });
  }

  deleteVm(projectId: string, vmId: string): OperationRecord {
    const vm = this.getVm(projectId, vmId);
    if (vm.state === "STATE_DELETING") {
      const inFlight = this.listOperations(projectId, "vm", { resourceId: vm.id, state: "IN_PROGRESS" });
      if (inFlight[0] !== undefined) return inFlight[0];
    }
    if (vm.state !== "STATE_RUNNING" && vm.state !== "STATE_STOPPED") {
      throw conflict(`a VM cannot be terminated while it is ${vm.state}`);
    }
    vm.previousState = vm.state;
    this.#setVmState(vm, "STATE_DELETING");
    return this.#startOperation(projectId, "vm", "DELETE", vm.id, {});
  }

  #applyVm(op: OperationRecord): unknown {
    const vm = this.#vms.get(op.resourceId);
    if (vm === undefined) throw new SimError(404, `vm ${op.resourceId} no longer exists`);
    switch (op.name) {
      case "CREATE":
      case "START":
      case "RESET":
        this.#setVmState(vm, "STATE_RUNNING");
        break;
      case "STOP":
        this.#setVmState(vm, "STATE_STOPPED");
        break;
      case "UPDATE": {
        const pending = op.pending as { type?: string; disks?: { id: string; mode: string }[] } | null;
        if (pending?.disks !== undefined) {
          this.#checkDiskRefs(vm.projectId, vm.location, pending.disks, vm.id);
          this.#attach(vm, pending.disks);
        }
        this.#setVmState(vm, vm.previousState);
        if (pending?.type !== undefined) vm.type = pending.type;
        break;
      }
      case "DELETE": {
        const last = this.vmJson(vm);
        this.#removeVm(vm);
        return last;
      }
    }
    return this.vmJson(vm);
  }

  /** Admin drift: force a VM into a state (or remove it) without an operation. */
  forceVmState(vmId: string, state: string): VmRecord {
    const vm = this.#vms.get(vmId);
    if (vm === undefined) throw notFound(`vm ${vmId} not found`);
    this.#setVmState(vm, state);
    vm.previousState = state;
    this.#changed();
    return vm;
  }

  // -------------------------------------------------------------------------------------------------------
  // Disks
  // -------------------------------------------------------------------------------------------------------

  #diskBase(disk: DiskRecord) {
    return {
      id: disk.id,
      name: disk.name,
      type: disk.type,
      size: disk.size,
      location: disk.location,
      block_size: disk.blockSize,
      serial_number: disk.serialNumber,
      created_at: formatTimestamp(new Date(disk.createdAtMs)),
      updated_at: formatTimestamp(new Date(disk.updatedAtMs)),
    };
  }

  diskJson(disk: DiskRecord) {
    return {
      ...this.#diskBase(disk),
      attached_to: disk.attachments.map((a) => ({ vm_id: a.vmId, attachment_type: "data", mode: a.mode })),
    };
  }

  #checkDiskSize(type: string, size: string): void {
    const gib = sizeInGib(size);
    if (type === "shared-volume") {
      if (gib % TIB !== 0 || gib < TIB || gib > 1000 * TIB) {
        throw badRequest(`size: a shared-volume is 1TiB to 1000TiB in whole TiB, got ${size}`);
      }
    } else if (gib < 1 || gib > 10 * TIB) {
      throw badRequest(`size: a persistent-ssd is 1GiB to 10TiB, got ${size}`);
    }
  }

  createDisk(projectId: string, body: CreateDiskRequest): OperationRecord {
    this.#requirePaymentMethod(projectId);
    if (!(LOCATIONS as readonly string[]).includes(body.location)) {
      throw badRequest(`location: unknown location '${body.location}'`);
    }
    const type = body.type ?? "persistent-ssd";
    this.#checkDiskSize(type, body.size);
    if (this.#nameTaken(projectId, "disk", body.name)) return this.#duplicate(projectId, "disk", body.name, body);
    const now = this.now();
    const disk: DiskRecord = {
      id: randomUUID(),
      projectId,
      name: body.name,
      type,
      size: body.size,
      location: body.location,
      blockSize: body.block_size ?? 4096,
      serialNumber: `SIMDISK${this.#nextAddress().toString(16).padStart(8, "0").toUpperCase()}`,
      createdAtMs: now,
      updatedAtMs: now,
      visibleAtMs: 0,
      attachments: [],
      busyOperationId: "",
    };
    return this.#startOperation(projectId, "disk", "CREATE", disk.id, body, disk);
  }

  getDisk(projectId: string, diskId: string): DiskRecord {
    const disk = this.#disks.get(diskId);
    if (disk === undefined || disk.projectId !== projectId || !this.#visible(disk)) {
      throw notFound(`disk ${diskId} not found`);
    }
    return disk;
  }

  listDisks(projectId: string): DiskRecord[] {
    return [...this.#disks.values()].filter((d) => d.projectId === projectId && this.#visible(d));
  }

  #busy(record: { busyOperationId: string }, what: string): void {
    if (record.busyOperationId !== "") {
      throw conflict(`${what} has an operation in flight (${record.busyOperationId})`);
    }
  }

  resizeDisk(projectId: string, diskId: string, size: string): OperationRecord {
    const disk = this.getDisk(projectId, diskId);
    this.#checkDiskSize(disk.type, size);
    if (sizeInGib(size) < sizeInGib(disk.size)) {
      throw badRequest(`size: disks only grow; ${size} is smaller than the current ${disk.size}`);
    }
    this.#busy(disk, `disk ${disk.id}`);
    const op = this.#startOperation(projectId, "disk", "RESIZE", disk.id, { size }, { size });
    disk.busyOperationId = op.id;
    return op;
  }

  deleteDisk(projectId: string, diskId: string): OperationRecord {
    const disk = this.getDisk(projectId, diskId);
    if (disk.attachments.length > 0) {
      throw conflict(
        `disk ${disk.id} is attached to ${disk.attachments.map((a) => a.vmId).join(", ")}; detach it first`,
      );
    }
    const inFlight = this.#operations.get(disk.busyOperationId);
    if (inFlight?.name === "DELETE" && inFlight.state === "IN_PROGRESS") return inFlight;
    this.#busy(disk, `disk ${disk.id}`);
    const op = this.#startOperation(projectId, "disk", "DELETE", disk.id, {});
    disk.busyOperationId = op.id;
    return op;
  }

  #applyDisk(op: OperationRecord): unknown {
    if (op.name === "CREATE") {
      const disk = op.pending as DiskRecord;
      disk.createdAtMs = this.now();
      disk.updatedAtMs = disk.createdAtMs;
      disk.visibleAtMs = this.now() + this.#faults.notFoundAfterCreateMs();
      this.#disks.set(disk.id, disk);
      return this.diskJson(disk);
    }
    const disk = this.#disks.get(op.resourceId);
    if (disk === undefined) throw new SimError(404, `disk ${op.resourceId} no longer exists`);
    disk.busyOperationId = "";
    if (op.name === "RESIZE") {
      disk.size = (op.pending as { size: string }).size;
      disk.updatedAtMs = this.now();
      return this.diskJson(disk);
    }
    if (disk.attachments.length > 0) throw new SimError(409, `disk ${disk.id} was attached meanwhile`);
    this.#disks.delete(disk.id);
    return this.diskJson(disk);
  }

  // -------------------------------------------------------------------------------------------------------
  // Networks
  // -------------------------------------------------------------------------------------------------------

  #newNetwork(projectId: string, name: string, cidr: string): NetworkRecord {
    const now = this.now();
    return {
      id: randomUUID(),
      projectId,
      name,
      cidr,
      subnets: [randomUUID()],
      gateway: randomUUID(),
      createdAtMs: now,
      visibleAtMs: 0,
      busyOperationId: "",
    };
  }

  networkJson(network: NetworkRecord) {
    return {
      id: network.id,
      name: network.name,
      subnets: [...network.subnets],
      gateway: network.gateway,
      cidr: network.cidr,
    };
  }

  /** Make sure the project has its default network (VMs' interfaces live there). */
  ensureDefaultNetwork(projectId: string): void {
    this.#defaultNetwork(projectId);
  }

  createNetwork(projectId: string, body: CreateNetworkRequest): OperationRecord {
    this.#requirePaymentMethod(projectId);
    this.#defaultNetwork(projectId);
    if (this.#nameTaken(projectId, "network", body.name)) {
      return this.#duplicate(projectId, "network", body.name, body);
    }
    const network = this.#newNetwork(projectId, body.name, body.cidr ?? "10.0.0.0/16");
    return this.#startOperation(projectId, "network", "CREATE", network.id, body, network);
  }

  getNetwork(projectId: string, networkId: string): NetworkRecord {
    const network = this.#networks.get(networkId);
    if (network === undefined || network.projectId !== projectId || !this.#visible(network)) {
      throw notFound(`network ${networkId} not found`);
    }
    return network;
  }

  listNetworks(projectId: string): NetworkRecord[] {
    this.#defaultNetwork(projectId);
    return [...this.#networks.values()].filter((n) => n.projectId === projectId && this.#visible(n));
  }

  deleteNetwork(projectId: string, networkId: string): OperationRecord {
    const network = this.getNetwork(projectId, networkId);
    const inFlight = this.#operations.get(network.busyOperationId);
    if (inFlight?.name === "DELETE" && inFlight.state === "IN_PROGRESS") return inFlight;
    this.#checkNetworkUnused(network);
    const op = this.#startOperation(projectId, "network", "DELETE", network.id, {});
    network.busyOperationId = op.id;
    return op;
  }

  #checkNetworkUnused(network: NetworkRecord): void {
    const rules = [...this.#rules.values()].filter((r) => r.vpcNetworkId === network.id).length;
    const vms = [...this.#vms.values()].filter((v) => v.networkId === network.id).length;
    if (rules > 0 || vms > 0) {
      throw conflict(`network ${network.id} is still used by ${rules} firewall rule(s) and ${vms} VM(s)`);
    }
  }

  #applyNetwork(op: OperationRecord): unknown {
    if (op.name === "CREATE") {
      const network = op.pending as NetworkRecord;
      network.createdAtMs = this.now();
      network.visibleAtMs = this.now() + this.#faults.notFoundAfterCreateMs();
      this.#networks.set(network.id, network);
      return this.networkJson(network);
    }
    const network = this.#networks.get(op.resourceId);
    if (network === undefined) throw new SimError(404, `network ${op.resourceId} no longer exists`);
    network.busyOperationId = "";
    this.#checkNetworkUnused(network);
    this.#networks.delete(network.id);
    return this.networkJson(network);
  }

  // -------------------------------------------------------------------------------------------------------
  // Firewall rules
  // -------------------------------------------------------------------------------------------------------

  ruleJson(rule: FirewallRuleRecord) {
    return {
      id: rule.id,
      name: rule.name,
      direction: rule.direction,
      action: rule.action,
      vpc_network_id: rule.vpcNetworkId,
      state: "active",
      sources: rule.sources.map((e) => ({ ...e })),
      source_ports: [...rule.sourcePorts],
      destinations: rule.destinations.map((e) => ({ ...e })),
      destination_ports: [...rule.destinationPorts],
      protocols: [...rule.protocols],
    };
  }

  createFirewallRule(projectId: string, body: CreateFirewallRuleRequest): OperationRecord {
    this.#requirePaymentMethod(projectId);
    const network = this.#networks.get(body.vpc_network_id);
    if (network === undefined || network.projectId !== projectId) {
      throw badRequest(`vpc_network_id: network ${body.vpc_network_id} not found in this project`);
    }
    if (this.#nameTaken(projectId, "firewall-rule", body.name)) {
      return this.#duplicate(projectId, "firewall-rule", body.name, body);
    }
    const endpoints = (list: { cidr?: string | undefined; resource_id?: string | undefined }[] | undefined) =>
      (list ?? []).map((e): EndpointRecord => ({ cidr: e.cidr ?? "", resource_id: e.resource_id ?? "" }));
    const now = this.now();
    const rule: FirewallRuleRecord = {
      id: randomUUID(),
      projectId,
      name: body.name,
      direction: body.direction,
      action: body.action,
      vpcNetworkId: network.id,
      sources: endpoints(body.sources),
      sourcePorts: [...(body.source_ports ?? [])],
      destinations: endpoints(body.destinations),
      destinationPorts: [...(body.destination_ports ?? [])],
      protocols: [...body.protocols],
      createdAtMs: now,
      visibleAtMs: 0,
      busyOperationId: "",
    };
    return this.#startOperation(projectId, "firewall-rule", "CREATE", rule.id, body, rule);
  }

  getFirewallRule(projectId: string, ruleId: string): FirewallRuleRecord {
    const rule = this.#rules.get(ruleId);
    if (rule === undefined || rule.projectId !== projectId || !this.#visible(rule)) {
      throw notFound(`firewall rule ${ruleId} not found`);
    }
    return rule;
  }

  listFirewallRules(projectId: string): FirewallRuleRecord[] {
    return [...this.#rules.values()].filter((r) => r.projectId === projectId && this.#visible(r));
  }

  patchFirewallRule(projectId: string, ruleId: string, body: PatchFirewallRuleRequest): OperationRecord {
    const rule = this.getFirewallRule(projectId, ruleId);
    this.#busy(rule, `firewall rule ${rule.id}`);
    if (body.name !== undefined && this.#nameTaken(projectId, "firewall-rule", body.name, rule.id)) {
      throw conflict(`a firewall-rule named '${body.name}' already exists in this project`);
    }
    const op = this.#startOperation(projectId, "firewall-rule", "UPDATE", rule.id, body, body);
    rule.busyOperationId = op.id;
    return op;
  }

  deleteFirewallRule(projectId: string, ruleId: string): OperationRecord {
    const rule = this.getFirewallRule(projectId, ruleId);
    const inFlight = this.#operations.get(rule.busyOperationId);
    if (inFlight?.name === "DELETE" && inFlight.state === "IN_PROGRESS") return inFlight;
    this.#busy(rule, `firewall rule ${rule.id}`);
    const op = this.#startOperation(projectId, "firewall-rule", "DELETE", rule.id, {});
    rule.busyOperationId = op.id;
    return op;
  }

  #applyRule(op: OperationRecord): unknown {
    if (op.name === "CREATE") {
      const rule = op.pending as FirewallRuleRecord;
      rule.createdAtMs = this.now();
      rule.visibleAtMs = this.now() + this.#faults.notFoundAfterCreateMs();
      this.#rules.set(rule.id, rule);
      return this.ruleJson(rule);
    }
    const rule = this.#rules.get(op.resourceId);
    if (rule === undefined) throw new SimError(404, `firewall rule ${op.resourceId} no longer exists`);
    rule.busyOperationId = "";
    if (op.name === "DELETE") {
      this.#rules.delete(rule.id);
      return this.ruleJson(rule);
    }
    const patch = op.pending as PatchFirewallRuleRequest;
    const endpoints = (list: { cidr?: string | undefined; resource_id?: string | undefined }[]) =>
      list.map((e): EndpointRecord => ({ cidr: e.cidr ?? "", resource_id: e.resource_id ?? "" }));
    if (patch.name !== undefined) rule.name = patch.name;
    if (patch.protocols !== undefined) rule.protocols = [...patch.protocols];
    if (patch.sources !== undefined) rule.sources = endpoints(patch.sources);
    if (patch.destinations !== undefined) rule.destinations = endpoints(patch.destinations);
    if (patch.source_ports !== undefined) rule.sourcePorts = [...patch.source_ports];
    if (patch.destination_ports !== undefined) rule.destinationPorts = [...patch.destination_ports];
    return this.ruleJson(rule);
  }

  /** Admin: remove any resource behind the operator's back. */
  removeResource(kind: "vms" | "disks" | "networks" | "firewall-rules", id: string): void {
    if (kind === "vms") {
      const vm = this.#vms.get(id);
      if (vm === undefined) throw notFound(`vm ${id} not found`);
      this.#removeVm(vm);
    } else if (kind === "disks") {
      if (!this.#disks.delete(id)) throw notFound(`disk ${id} not found`);
    } else if (kind === "networks") {
      if (!this.#networks.delete(id)) throw notFound(`network ${id} not found`);
    } else if (!this.#rules.delete(id)) {
      throw notFound(`firewall rule ${id} not found`);
    }
    this.#changed();
  }

  /** Admin: change fields of a firewall rule or disk behind the operator's back (drift). */
  mutateFirewallRule(id: string, patch: PatchFirewallRuleRequest): void {
    const rule = this.#rules.get(id);
    if (rule === undefined) throw notFound(`firewall rule ${id} not found`);
    const op = { pending: patch, resourceId: id, name: "UPDATE" } as OperationRecord;
    this.#applyRule(op);
    this.#changed();
  }
}
