// Standalone disks: create, grow-only resize, delete once detached; and the attachment rules VMs use (same
// project and location, a read-write disk on one VM only).
import { randomUUID } from "node:crypto";
import type { CreateDiskRequest } from "../cloud/wire.ts";
import { formatTimestamp } from "../cloud/wire.ts";
import { LOCATIONS } from "./catalogue.ts";
import { badRequest, conflict, notFound, SimError } from "./errors.ts";
import { requireIdle } from "./records.ts";
import type { DiskRecord, OperationRecord, VmRecord } from "./state.ts";
import { StoreArea } from "./store-area.ts";

const GIB = 1;
const TIB = 1024;

/** Size string → GiB. */
export function sizeInGib(size: string): number {
  const match = /^([1-9][0-9]*)(GiB|TiB)$/.exec(size);
  if (match === null) throw badRequest(`size: '${size}' is not a whole number followed by GiB or TiB`);
  return Number(match[1]) * (match[2] === "TiB" ? TIB : GIB);
}

export interface DiskRef {
  id: string;
  mode: string;
}

export class Disks extends StoreArea {
  /** The fields a disk shows both standalone and inside a VM. */
  base(disk: DiskRecord) {
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

  json(disk: DiskRecord) {
    return {
      ...this.base(disk),
      attached_to: disk.attachments.map((a) => ({ vm_id: a.vmId, attachment_type: "data", mode: a.mode })),
    };
  }

  #checkSize(type: string, size: string): void {
    const gib = sizeInGib(size);
    if (type === "shared-volume") {
      if (gib % TIB !== 0 || gib < TIB || gib > 1000 * TIB) {
        throw badRequest(`size: a shared-volume is 1TiB to 1000TiB in whole TiB, got ${size}`);
      }
    } else if (gib < 1 || gib > 10 * TIB) {
      throw badRequest(`size: a persistent-ssd is 1GiB to 10TiB, got ${size}`);
    }
  }

  create(projectId: string, body: CreateDiskRequest): OperationRecord {
    this.records.requirePaymentMethod(projectId);
    if (!(LOCATIONS as readonly string[]).includes(body.location)) {
      throw badRequest(`location: unknown location '${body.location}'`);
    }
    const type = body.type ?? "persistent-ssd";
    this.#checkSize(type, body.size);
    if (this.records.nameTaken(projectId, "disk", body.name)) {
      return this.operations.duplicate(projectId, "disk", body.name, body);
    }
    const now = this.records.now();
    const disk: DiskRecord = {
      id: randomUUID(),
      projectId,
      name: body.name,
      type,
      size: body.size,
      location: body.location,
      blockSize: body.block_size ?? 4096,
      serialNumber: `SIMDISK${this.records.nextAddress().toString(16).padStart(8, "0").toUpperCase()}`,
      createdAtMs: now,
      updatedAtMs: now,
      visibleAtMs: 0,
      attachments: [],
      busyOperationId: "",
    };
    return this.operations.start(projectId, "disk", "CREATE", disk.id, body, disk);
  }

  get(projectId: string, diskId: string): DiskRecord {
    const disk = this.records.disks.get(diskId);
    if (disk === undefined || disk.projectId !== projectId || !this.records.visible(disk)) {
      throw notFound(`disk ${diskId} not found`);
    }
    return disk;
  }

  list(projectId: string): DiskRecord[] {
    return [...this.records.disks.values()].filter((d) => d.projectId === projectId && this.records.visible(d));
  }

  resize(projectId: string, diskId: string, size: string): OperationRecord {
    const disk = this.get(projectId, diskId);
    this.#checkSize(disk.type, size);
    if (sizeInGib(size) < sizeInGib(disk.size)) {
      throw badRequest(`size: disks only grow; ${size} is smaller than the current ${disk.size}`);
    }
    requireIdle(disk, `disk ${disk.id}`);
    const op = this.operations.start(projectId, "disk", "RESIZE", disk.id, { size }, { size });
    disk.busyOperationId = op.id;
    return op;
  }

  delete(projectId: string, diskId: string): OperationRecord {
    const disk = this.get(projectId, diskId);
    if (disk.attachments.length > 0) {
      throw conflict(
        `disk ${disk.id} is attached to ${disk.attachments.map((a) => a.vmId).join(", ")}; detach it first`,
      );
    }
    const inFlight = this.records.operations.get(disk.busyOperationId);
    if (inFlight?.name === "DELETE" && inFlight.state === "IN_PROGRESS") return inFlight;
    requireIdle(disk, `disk ${disk.id}`);
    const op = this.operations.start(projectId, "disk", "DELETE", disk.id, {});
    disk.busyOperationId = op.id;
    return op;
  }

  apply(op: OperationRecord): unknown {
    const now = this.records.now();
    if (op.name === "CREATE") {
      const disk = op.pending as DiskRecord;
      disk.createdAtMs = now;
      disk.updatedAtMs = now;
      disk.visibleAtMs = now + this.context.faults.notFoundAfterCreateMs();
      this.records.disks.set(disk.id, disk);
      return this.json(disk);
    }
    const disk = this.records.disks.get(op.resourceId);
    if (disk === undefined) throw new SimError(404, `disk ${op.resourceId} no longer exists`);
    disk.busyOperationId = "";
    if (op.name === "RESIZE") {
      disk.size = (op.pending as { size: string }).size;
      disk.updatedAtMs = now;
      return this.json(disk);
    }
    if (disk.attachments.length > 0) throw new SimError(409, `disk ${disk.id} was attached meanwhile`);
    this.records.disks.delete(disk.id);
    return this.json(disk);
  }

  // -------------------------------------------------------------------------------------------------------
  // Attachments (VM create, UPDATE of its disks, terminate)
  // -------------------------------------------------------------------------------------------------------

  /** The data disks a VM may have: same project and location, not attached read-write to another VM. */
  checkRefs(projectId: string, location: string, refs: DiskRef[], vmId: string): void {
    const seen = new Set<string>();
    refs.forEach((ref, index) => {
      if (seen.has(ref.id)) throw badRequest(`disks[${index}].id: disk ${ref.id} is listed twice`);
      seen.add(ref.id);
      const disk = this.records.disks.get(ref.id);
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

  /** Attach and detach so that exactly `refs` are attached to the VM, in their modes. */
  attach(vm: VmRecord, refs: DiskRef[]): void {
    const wanted = new Map(refs.map((r) => [r.id, r.mode]));
    for (const disk of this.records.disks.values()) {
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
      disk.updatedAtMs = this.records.now();
    }
  }

  /** The data disks attached to a VM, as the VM shows them. */
  attachedTo(vmId: string) {
    const out = [];
    for (const disk of this.records.disks.values()) {
      const attachment = disk.attachments.find((a) => a.vmId === vmId);
      if (attachment !== undefined) out.push({ ...this.base(disk), attachment_type: "data", mode: attachment.mode });
    }
    return out;
  }
}
