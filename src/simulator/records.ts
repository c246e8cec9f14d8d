// The simulated cloud's records, indexed: tenancy lookups, the per-kind maps, the operations in flight, and the
// rules every kind shares (visibility after the eventual-consistency delay, unique names, address allocation,
// each project's default network). The kind modules (vms.ts, disks.ts, …) work on these maps.
import { randomUUID } from "node:crypto";
import type { Clock } from "./clock.ts";
import { conflict, forbidden, notFound } from "./errors.ts";
import type { FaultInjector } from "./faults.ts";
import type {
  DiskRecord,
  FirewallRuleRecord,
  NetworkRecord,
  OperationRecord,
  OrganizationRecord,
  ProjectRecord,
  SimState,
  VmRecord,
} from "./state.ts";

export type Family = "vm" | "disk" | "network" | "firewall-rule";
export type DuplicateNameMode = "conflict" | "operation";

/** Run-time settings (the admin API changes them). */
export interface SimSettings {
  /** How long an operation stays IN_PROGRESS. */
  latencyMs: number;
  duplicateNames: DuplicateNameMode;
  /** 404, or 403 as the real cloud answers for an unknown or expired operation id. */
  unknownOperationStatus: 403 | 404;
  /**
   * How long a finished operation stays readable and listed; undefined keeps it (until the history is pruned
   * after a day). A real server drops finished operations after a while.
   */
  operationRetentionMs: number | undefined;
  /** Availability items carry `available_count`, how many more VMs of the type fit (a tolerated extension). */
  availabilityCounts: boolean;
}

/** What every part of the store shares: time, faults, settings, and the change hook (state file). */
export interface StoreContext {
  clock: Clock;
  faults: FaultInjector;
  settings: SimSettings;
  changed(): void;
}

/** 409 while another operation works on the record (resize, patch, delete). */
export function requireIdle(record: { busyOperationId: string }, what: string): void {
  if (record.busyOperationId !== "") {
    throw conflict(`${what} has an operation in flight (${record.busyOperationId})`);
  }
}

export class Records {
  state: SimState;
  readonly #context: StoreContext;
  vms = new Map<string, VmRecord>();
  disks = new Map<string, DiskRecord>();
  networks = new Map<string, NetworkRecord>();
  rules = new Map<string, FirewallRuleRecord>();
  operations = new Map<string, OperationRecord>();
  /** Operations in flight: name reservations and `state=IN_PROGRESS` without scanning the history. */
  readonly inFlight = new Set<OperationRecord>();

  constructor(state: SimState, context: StoreContext) {
    this.#context = context;
    this.state = state;
    this.load(state);
  }

  /** Index a whole state (start-up, reset). The operation engine resumes what is in flight. */
  load(state: SimState): void {
    this.state = state;
    this.vms = new Map(state.vms.map((r) => [r.id, r]));
    this.disks = new Map(state.disks.map((r) => [r.id, r]));
    this.networks = new Map(state.networks.map((r) => [r.id, r]));
    this.rules = new Map(state.firewallRules.map((r) => [r.id, r]));
    this.operations = new Map(state.operations.map((r) => [r.id, r]));
    this.inFlight.clear();
    for (const op of this.operations.values()) if (op.state === "IN_PROGRESS") this.inFlight.add(op);
  }

  /** The state as plain JSON (arrays rebuilt from the maps). */
  snapshot(): SimState {
    return {
      ...this.state,
      vms: [...this.vms.values()],
      disks: [...this.disks.values()],
      networks: [...this.networks.values()],
      firewallRules: [...this.rules.values()],
      operations: [...this.operations.values()],
    };
  }

  now(): number {
    return this.#context.clock.now();
  }

  // -------------------------------------------------------------------------------------------------------
  // Tenancy
  // -------------------------------------------------------------------------------------------------------

  project(projectId: string): ProjectRecord {
    const project = this.state.projects.find((p) => p.id === projectId);
    if (project === undefined) throw notFound(`project ${projectId} not found`);
    return project;
  }

  organization(organizationId: string): OrganizationRecord {
    const org = this.state.organizations.find((o) => o.id === organizationId);
    if (org === undefined) throw notFound(`organization ${organizationId} not found`);
    return org;
  }

  requirePaymentMethod(projectId: string): void {
    const org = this.organization(this.project(projectId).organization_id);
    if (!org.hasValidPaymentMethod) {
      throw forbidden(
        `organization ${org.name} has no valid payment method; add one through the billing link`,
        "payment_method_required",
      );
    }
  }

  // -------------------------------------------------------------------------------------------------------
  // Rules every kind shares
  // -------------------------------------------------------------------------------------------------------

  /** A created resource may stay unreadable for a while (the eventual-consistency fault). */
  visible(record: { visibleAtMs: number }): boolean {
    return record.visibleAtMs <= this.now();
  }

  nameTaken(projectId: string, family: Family, name: string, exceptId = ""): boolean {
    const records: Iterable<{ projectId: string; name: string; id: string }> =
      family === "vm"
        ? this.vms.values()
        : family === "disk"
          ? this.disks.values()
          : family === "network"
            ? this.networks.values()
            : this.rules.values();
    for (const r of records) if (r.projectId === projectId && r.name === name && r.id !== exceptId) return true;
    // Creates still in flight hold their name too.
    for (const op of this.inFlight) {
      if (op.projectId !== projectId || op.family !== family) continue;
      const pending = op.pending as { name?: unknown } | null;
      if (op.name === "CREATE" && pending?.name === name) return true;
    }
    return false;
  }

  /** The record an operation of a disk, network or rule works on (VMs have their own). */
  resourceOf(family: string, id: string): DiskRecord | NetworkRecord | FirewallRuleRecord | undefined {
    if (family === "disk") return this.disks.get(id);
    if (family === "network") return this.networks.get(id);
    return this.rules.get(id);
  }

  nextAddress(): number {
    this.state.addressCounter += 1;
    return this.state.addressCounter;
  }

  newNetwork(projectId: string, name: string, cidr: string): NetworkRecord {
    return {
      id: randomUUID(),
      projectId,
      name,
      cidr,
      subnets: [randomUUID()],
      gateway: randomUUID(),
      createdAtMs: this.now(),
      visibleAtMs: 0,
      busyOperationId: "",
    };
  }

  /** The project's `default` network (VMs' interfaces live there), created on first use. */
  defaultNetwork(projectId: string): NetworkRecord {
    for (const n of this.networks.values()) if (n.projectId === projectId && n.name === "default") return n;
    const network = this.newNetwork(projectId, "default", "10.0.0.0/16");
    this.networks.set(network.id, network);
    return network;
  }
}
