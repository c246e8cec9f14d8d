// VMs: the state machine of contract-decisions.md (create, START/STOP/RESET/UPDATE, terminate), capacity at
// create and start, the VM's JSON with its boot disk, attached data disks and network interface, and the admin
// shortcuts (bulk insert, forced state).
import { randomUUID } from "node:crypto";
import type { CreateVmRequest, DiskRef as WireDiskRef } from "../cloud/wire.ts";
import { formatTimestamp, VM_TYPES, vmFamily } from "../cloud/wire.ts";
import type { CapacityAndUsage } from "./capacity-usage.ts";
import { DEFAULT_IMAGE, IMAGES, LOCATIONS } from "./catalogue.ts";
import type { Disks } from "./disks.ts";
import { badRequest, conflict, notFound, SimError } from "./errors.ts";
import type { OperationEngine } from "./operation-engine.ts";
import type { Records, StoreContext } from "./records.ts";
import type { OperationRecord, VmRecord } from "./state.ts";
import { StoreArea } from "./store-area.ts";

/**
 * Who is told when a VM's operating system comes up or goes down, and when the VM is gone (the node-join
 * emulation). Called synchronously from state changes: an observer queues its own work and never throws.
 */
export interface VmObserver {
  /** The VM runs now and did not before: CREATE, START or RESET finished, or a forced state. */
  booted(vm: Readonly<VmRecord>): void;
  /** The VM's operating system went down: STOP, RESET or DELETE begun, or a forced state. */
  halted(vm: Readonly<VmRecord>): void;
  /** The VM no longer exists (terminated, a failed create, removed through the admin API). */
  removed(vm: Readonly<VmRecord>): void;
}

/** Whether the VM's operating system runs (an UPDATE of a running VM, a disk attachment, keeps it running). */
export function isVmUp(vm: Pick<VmRecord, "state" | "previousState">): boolean {
  return vm.state === "STATE_RUNNING" || (vm.state === "STATE_UPDATING" && vm.previousState === "STATE_RUNNING");
}

export interface VmActionBody {
  action: string;
  type?: string | undefined;
  disks?: WireDiskRef[] | undefined;
}

export class Vms extends StoreArea {
  readonly #capacity: CapacityAndUsage;
  readonly #disks: Disks;
  readonly #observer: VmObserver | undefined;

  constructor(
    records: Records,
    context: StoreContext,
    parts: { operations: OperationEngine; capacity: CapacityAndUsage; disks: Disks; observer?: VmObserver | undefined },
  ) {
    super(records, context, parts.operations);
    this.#capacity = parts.capacity;
    this.#disks = parts.disks;
    this.#observer = parts.observer;
  }

  /** Bodies are validated by the caller; this checks the references and the catalogue. */
  create(projectId: string, body: CreateVmRequest): OperationRecord {
    this.records.requirePaymentMethod(projectId);
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
    if (this.records.nameTaken(projectId, "vm", body.name)) {
      return this.operations.duplicate(projectId, "vm", body.name, body);
    }
    const refs = (body.disks ?? []).map((d) => ({ id: d.id, mode: d.mode ?? "read-write" }));
    this.#disks.checkRefs(projectId, body.location, refs, "");
    const vm = this.#newVm(projectId, body.name, type, body.location, imageName, "STATE_PROVISIONING");
    if (body.startup_script !== undefined) vm.startupScript = body.startup_script;
    vm.doomed = this.#capacity.hasCapacity(body.location, type) ? "" : "out_of_stock";
    this.records.vms.set(vm.id, vm);
    this.#disks.attach(vm, refs);
    const failure =
      vm.doomed === "" ? null : { code: "out_of_stock", message: `no capacity for ${type} in ${body.location}` };
    const op = this.operations.start(projectId, "vm", "CREATE", vm.id, body, null, failure);
    if (op.failure !== null) vm.doomed = op.failure.code;
    return op;
  }

  #newVm(projectId: string, name: string, type: string, location: string, image: string, state: string): VmRecord {
    const now = this.records.now();
    const network = this.records.defaultNetwork(projectId);
    const n = this.records.nextAddress();
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
      visibleAtMs: now + this.context.faults.notFoundAfterCreateMs(),
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
  insert(
    projectId: string,
    specs: { name: string; type: string; location: string; state?: string | undefined }[],
  ): VmRecord[] {
    this.records.project(projectId);
    const created: VmRecord[] = [];
    for (const spec of specs) {
      if (this.records.nameTaken(projectId, "vm", spec.name)) {
        throw conflict(`a vm named '${spec.name}' already exists`);
      }
      const vm = this.#newVm(
        projectId,
        spec.name,
        spec.type,
        spec.location,
        DEFAULT_IMAGE,
        spec.state ?? "STATE_RUNNING",
      );
      vm.visibleAtMs = 0;
      this.records.vms.set(vm.id, vm);
      created.push(vm);
    }
    this.context.changed();
    return created;
  }

  #setState(vm: VmRecord, state: string): void {
    this.#capacity.accrue(vm);
    const wasUp = isVmUp(vm);
    vm.state = state;
    vm.updatedAtMs = this.records.now();
    if (!wasUp && isVmUp(vm)) this.#observer?.booted(vm);
    if (wasUp && !isVmUp(vm)) this.#observer?.halted(vm);
  }

  /** The boot disk lives inside the VM record and goes with it; data disks are detached, never deleted. */
  remove(vm: VmRecord): void {
    this.#capacity.accrue(vm);
    this.#disks.attach(vm, []);
    this.records.vms.delete(vm.id);
    this.#observer?.removed(vm);
  }

  get(projectId: string, vmId: string): VmRecord {
    const vm = this.records.vms.get(vmId);
    if (vm === undefined || vm.projectId !== projectId || !this.records.visible(vm)) {
      throw notFound(`vm ${vmId} not found`);
    }
    return vm;
  }

  list(projectId: string): VmRecord[] {
    const out: VmRecord[] = [];
    for (const vm of this.records.vms.values()) {
      if (vm.projectId === projectId && this.records.visible(vm)) out.push(vm);
    }
    return out;
  }

  json(vm: VmRecord) {
    const created = formatTimestamp(new Date(vm.createdAtMs));
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
        ...this.#disks.attachedTo(vm.id),
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

  action(projectId: string, vmId: string, body: VmActionBody): OperationRecord {
    const vm = this.get(projectId, vmId);
    const wrongState = () => conflict(`action ${body.action} is not allowed while the VM is ${vm.state}`);
    switch (body.action) {
      case "START": {
        if (vm.state !== "STATE_STOPPED") throw wrongState();
        const outOfStock = !this.#capacity.hasCapacity(vm.location, vm.type);
        vm.previousState = vm.state;
        this.#setState(vm, "STATE_STARTING");
        const failure = outOfStock
          ? { code: "out_of_stock", message: `no capacity for ${vm.type} in ${vm.location}` }
          : null;
        const op = this.operations.start(projectId, "vm", "START", vm.id, body, null, failure);
        vm.doomed = op.failure?.code ?? "";
        return op;
      }
      case "STOP":
      case "RESET": {
        if (vm.state !== "STATE_RUNNING") throw wrongState();
        vm.previousState = vm.state;
        this.#setState(vm, body.action === "STOP" ? "STATE_STOPPING" : "STATE_RESETTING");
        return this.operations.start(projectId, "vm", body.action, vm.id, body);
      }
      case "UPDATE":
        return this.#update(vm, body);
      default:
        throw badRequest(`action: must be START, STOP, RESET or UPDATE`);
    }
  }

  #update(vm: VmRecord, body: VmActionBody): OperationRecord {
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
    if (refs !== undefined) this.#disks.checkRefs(vm.projectId, vm.location, refs, vm.id);
    vm.previousState = vm.state;
    this.#setState(vm, "STATE_UPDATING");
    return this.operations.start(vm.projectId, "vm", "UPDATE", vm.id, body, { type: body.type, disks: refs });
  }

  delete(projectId: string, vmId: string): OperationRecord {
    const vm = this.get(projectId, vmId);
    if (vm.state === "STATE_DELETING") {
      const inFlight = this.operations.inFlightFor(projectId, "vm", vm.id, "DELETE");
      if (inFlight !== undefined) return inFlight;
    }
    if (vm.state !== "STATE_RUNNING" && vm.state !== "STATE_STOPPED") {
      throw conflict(`a VM cannot be terminated while it is ${vm.state}`);
    }
    vm.previousState = vm.state;
    this.#setState(vm, "STATE_DELETING");
    return this.operations.start(projectId, "vm", "DELETE", vm.id, {});
  }

  apply(op: OperationRecord): unknown {
    const vm = this.records.vms.get(op.resourceId);
    if (vm === undefined) throw new SimError(404, `vm ${op.resourceId} no longer exists`);
    switch (op.name) {
      case "CREATE":
      case "START":
      case "RESET":
        this.#setState(vm, "STATE_RUNNING");
        break;
      case "STOP":
        this.#setState(vm, "STATE_STOPPED");
        break;
      case "UPDATE": {
        const pending = op.pending as { type?: string; disks?: { id: string; mode: string }[] } | null;
        if (pending?.disks !== undefined) {
          this.#disks.checkRefs(vm.projectId, vm.location, pending.disks, vm.id);
          this.#disks.attach(vm, pending.disks);
        }
        this.#setState(vm, vm.previousState);
        if (pending?.type !== undefined) vm.type = pending.type;
        break;
      }
      case "DELETE": {
        const last = this.json(vm);
        this.remove(vm);
        return last;
      }
    }
    return this.json(vm);
  }

  override revert(op: OperationRecord): void {
    const vm = this.records.vms.get(op.resourceId);
    if (vm === undefined) return;
    if (op.name === "CREATE") {
      this.remove(vm);
    } else {
      this.#setState(vm, op.name === "START" ? "STATE_STOPPED" : vm.previousState);
    }
    vm.doomed = "";
  }

  /** Admin drift: force a VM into a state without an operation. */
  forceState(vmId: string, state: string): VmRecord {
    const vm = this.records.vms.get(vmId);
    if (vm === undefined) throw notFound(`vm ${vmId} not found`);
    vm.previousState = state;
    this.#setState(vm, state);
    this.context.changed();
    return vm;
  }
}
