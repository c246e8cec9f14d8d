// The simulated cloud, assembled: the indexed records, the operation engine and one part per area (VMs, disks,
// networks, firewall rules, capacity and usage). Handlers call the parts with already-validated bodies; every
// rule of the contract lives in them. This file only wires them together and holds the run-time settings.
import { CapacityAndUsage } from "./capacity-usage.ts";
import type { Clock } from "./clock.ts";
import { Disks } from "./disks.ts";
import { notFound } from "./errors.ts";
import type { FaultInjector } from "./faults.ts";
import { FirewallRules } from "./firewall-rules.ts";
import { Networks } from "./networks.ts";
import { OperationEngine } from "./operation-engine.ts";
import { Records, type SimSettings, type StoreContext } from "./records.ts";
import type { SimState } from "./state.ts";
import { type VmObserver, Vms } from "./vms.ts";

export type { DuplicateNameMode, Family, SimSettings } from "./records.ts";

export interface StoreOptions extends SimSettings {
  clock: Clock;
  faults: FaultInjector;
  onChange: () => void;
  /** Told when VMs boot, halt and go (the node-join emulation). */
  vmObserver?: VmObserver;
}

export const RESOURCE_KINDS = ["vms", "disks", "networks", "firewall-rules"] as const;
export type ResourceKind = (typeof RESOURCE_KINDS)[number];

export class Store {
  readonly settings: SimSettings;
  readonly records: Records;
  readonly operations: OperationEngine;
  readonly capacity: CapacityAndUsage;
  readonly vms: Vms;
  readonly disks: Disks;
  readonly networks: Networks;
  readonly firewallRules: FirewallRules;
  readonly #context: StoreContext;

  constructor(state: SimState, options: StoreOptions) {
    this.settings = {
      latencyMs: options.latencyMs,
      duplicateNames: options.duplicateNames,
      unknownOperationStatus: options.unknownOperationStatus,
      operationRetentionMs: options.operationRetentionMs,
      availabilityCounts: options.availabilityCounts,
    };
    const context: StoreContext = {
      clock: options.clock,
      faults: options.faults,
      settings: this.settings,
      changed: options.onChange,
    };
    this.#context = context;
    this.records = new Records(state, context);
    this.operations = new OperationEngine(this.records, context);
    this.capacity = new CapacityAndUsage(this.records, context);
    this.disks = new Disks(this.records, context, this.operations);
    this.vms = new Vms(this.records, context, {
      operations: this.operations,
      capacity: this.capacity,
      disks: this.disks,
      observer: options.vmObserver,
    });
    this.networks = new Networks(this.records, context, this.operations);
    this.firewallRules = new FirewallRules(this.records, context, this.operations);
    this.operations.register("vm", this.vms);
    this.operations.register("disk", this.disks);
    this.operations.register("network", this.networks);
    this.operations.register("firewall-rule", this.firewallRules);
    this.operations.resume();
  }

  get state(): SimState {
    return this.records.state;
  }

  /** Replace the whole state (start-up, reset) and resume the operations still in flight. */
  load(state: SimState): void {
    this.operations.close();
    this.records.load(state);
    this.operations.resume();
  }

  snapshot(): SimState {
    return this.records.snapshot();
  }

  close(): void {
    this.operations.close();
  }

  /** Admin: remove any resource behind the operator's back. */
  removeResource(kind: ResourceKind, id: string): void {
    const records = this.records;
    if (kind === "vms") {
      const vm = records.vms.get(id);
      if (vm === undefined) throw notFound(`vm ${id} not found`);
      this.vms.remove(vm);
    } else if (kind === "disks") {
      if (!records.disks.delete(id)) throw notFound(`disk ${id} not found`);
    } else if (kind === "networks") {
      if (!records.networks.delete(id)) throw notFound(`network ${id} not found`);
    } else if (!records.rules.delete(id)) {
      throw notFound(`firewall rule ${id} not found`);
    }
    this.#context.changed();
  }
}
