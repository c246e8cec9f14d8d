// Capacity per location and VM type (which VMs hold a slot), availability answers, and GPU-hour usage accrued
// per UTC day while a VM is billable.
import type { VmType } from "../cloud/wire.ts";
import { VM_TYPE_INFO, VM_TYPES } from "../cloud/wire.ts";
import type { Capacity } from "./catalogue.ts";
import { LOCATIONS, regionOf } from "./catalogue.ts";
import type { Records, StoreContext } from "./records.ts";
import type { VmRecord } from "./state.ts";

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

const DAY_MS = 86_400_000;

function effectiveState(vm: VmRecord): string {
  return PASS_THROUGH_STATES.has(vm.state) ? vm.previousState : vm.state;
}

export function holdsCapacity(vm: VmRecord): boolean {
  return vm.doomed === "" && HOLDING_STATES.has(effectiveState(vm));
}

function isBillable(vm: VmRecord): boolean {
  return BILLABLE_STATES.has(effectiveState(vm));
}

export interface UsageFilter {
  resourceTypes?: string[] | undefined;
  regions?: string[] | undefined;
  startDate?: string | undefined;
  endDate?: string | undefined;
}

export class CapacityAndUsage {
  readonly #records: Records;
  readonly #context: StoreContext;

  constructor(records: Records, context: StoreContext) {
    this.#records = records;
    this.#context = context;
  }

  capacityOf(location: string, type: string): number {
    return this.#records.state.capacity[location]?.[type as VmType] ?? 0;
  }

  usedCapacity(location: string, type: string): number {
    let used = 0;
    for (const vm of this.#records.vms.values()) {
      if (vm.location === location && vm.type === type && holdsCapacity(vm)) used++;
    }
    return used;
  }

  hasCapacity(location: string, type: string): boolean {
    return this.usedCapacity(location, type) < this.capacityOf(location, type);
  }

  setCapacity(update: Capacity): void {
    const capacity = this.#records.state.capacity;
    for (const [location, perType] of Object.entries(update)) {
      capacity[location] = { ...capacity[location], ...perType };
    }
    this.#context.changed();
  }

  /** The spec's `available` per (type, location), and `available_count` (free VMs) when the setting says so. */
  availabilities(productName: string | undefined, location: string | undefined) {
    const items: { type: string; location: string; available: boolean; available_count?: number }[] = [];
    const counts = this.#context.settings.availabilityCounts;
    for (const loc of LOCATIONS) {
      if (location !== undefined && location !== loc) continue;
      for (const type of VM_TYPES) {
        if (productName !== undefined && productName !== type) continue;
        const free = Math.max(0, this.capacityOf(loc, type) - this.usedCapacity(loc, type));
        items.push({ type, location: loc, available: free > 0, ...(counts ? { available_count: free } : {}) });
      }
    }
    return items;
  }

  /** Add the running time since the last accrual to the per-day usage (before every state change). */
  accrue(vm: VmRecord): void {
    const now = this.#records.now();
    const usage = this.#records.state.usage;
    if (isBillable(vm) && vm.doomed === "") {
      const gpus = VM_TYPE_INFO[vm.type as VmType]?.gpus ?? 0;
      let from = vm.billedUntilMs;
      while (from < now) {
        const dayEnd = (Math.floor(from / DAY_MS) + 1) * DAY_MS;
        const until = Math.min(dayEnd, now);
        const date = new Date(from).toISOString().slice(0, 10);
        const key = `${date}|${vm.projectId}|${vm.type}|${vm.location}`;
        usage[key] = (usage[key] ?? 0) + ((until - from) / 3_600_000) * gpus;
        from = until;
      }
    }
    vm.billedUntilMs = now;
  }

  usage(projectId: string, filter: UsageFilter) {
    for (const vm of this.#records.vms.values()) if (vm.projectId === projectId) this.accrue(vm);
    const items = [];
    for (const [key, quantity] of Object.entries(this.#records.state.usage)) {
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
}
