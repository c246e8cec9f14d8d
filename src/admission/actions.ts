// What each action does to the ledger, and the objects as the ledger and the capacity queue see them: the small,
// pure pieces the controllers call around their cloud calls (docs/budgets.md, "The order of a change").
//
// Billing (docs/api-contract.md#prices): a VM bills its type's price while it runs, nothing while it is stopped
// (the usage the cloud reports counts running hours only); a data disk bills its size whether attached or not.
// So a create and a START reserve the VM's price, a STOP asked by the user releases it, a type change of a running
// VM reserves the larger type before its STOP and keeps it through the UPDATE and the START that follow (it must
// not lose its room to another object meanwhile), a disk create or growth reserves the disk's price at the new
// size, and a delete releases once the resource is gone (it bills until then).
import type { ObjectMeta } from "../api/common.ts";
import { type BudgetedKind, MAX_HOURLY_USD, type SpendPurpose } from "../api/gpu-budget.ts";
import type { CapacityWaiter } from "./capacity-queue.ts";
import { type Budget, covers, type Need, type Subject } from "./ledger.ts";
import { toMicros } from "./money.ts";
import type { PriceTable } from "./prices.ts";
import { cappedPriority, priorityOf, timeMs } from "./priority.ts";

export type VmAction =
  | { action: "create"; type: string }
  /** A START the user asked for (powerState Running on a stopped VM). */
  | { action: "start"; type: string }
  /** A type change; `running`: the VM runs (its STOP, UPDATE and START follow). */
  | { action: "changeType"; to: string; running: boolean }
  /** A STOP the user asked for (powerState Stopped), not one that is part of a type change. */
  | { action: "stop" }
  /** The VM is gone (its DELETE succeeded, or it was released by deletionPolicy Orphan). */
  | { action: "gone" };

export type DiskAction =
  | { action: "create"; sizeBytes: number }
  | { action: "grow"; sizeBytes: number }
  | { action: "gone" };

/** What the ledger must do before (reserve) or after (release) the action; `none` for no change of spend. */
export type LedgerStep = { step: "reserve"; need: Need } | { step: "release" } | { step: "none" };

function reserve(spend: { micros: number; gpus: number; gpuModel?: string } | undefined, purpose: SpendPurpose) {
  // A type the table cannot price is never admitted by a budget: it asks for the most a budget may hold.
  const need: Need =
    spend === undefined ? { micros: toMicros(MAX_HOURLY_USD), gpus: 0, purpose } : { ...spend, purpose };
  return { step: "reserve" as const, need };
}

export function vmLedgerStep(action: VmAction, prices: PriceTable): LedgerStep {
  switch (action.action) {
    case "create":
      return reserve(prices.vm(action.type), "Create");
    case "start":
      return reserve(prices.vm(action.type), "Start");
    case "changeType":
      // A stopped VM bills nothing: its START reserves the new type.
      return action.running ? reserve(prices.vm(action.to), "TypeChange") : { step: "none" };
    case "stop":
    case "gone":
      return { step: "release" };
  }
}

export function diskLedgerStep(action: DiskAction, prices: PriceTable): LedgerStep {
  switch (action.action) {
    case "create":
      return reserve(prices.disk(action.sizeBytes), "DiskCreate");
    case "grow":
      return reserve(prices.disk(action.sizeBytes), "DiskGrow");
    case "gone":
      return { step: "release" };
  }
}

/** The object as the ledger sees it (its own priority; each budget caps it). */
export function subjectOf(kind: BudgetedKind, metadata: ObjectMeta, spec: { priority?: number | undefined }): Subject {
  return {
    kind,
    namespace: metadata.namespace,
    name: metadata.name,
    uid: metadata.uid ?? "",
    labels: metadata.labels ?? {},
    priority: priorityOf(spec),
  };
}

/** The priority an object counts with: its own, capped by every budget that covers it. */
export function effectivePriority(subject: Subject, budgets: readonly Budget[]): number {
  return cappedPriority(
    subject.priority,
    budgets.filter((budget) => covers(budget, subject)).map((budget) => budget.spec.maxPriority),
  );
}

/** The GpuVm fields the capacity queue reads. */
export interface QueuedVm {
  metadata: ObjectMeta;
  spec: { type: string; location?: string | undefined; locations?: readonly string[] | undefined };
  status?: {
    locationIndex?: number | undefined;
    conditions?: readonly { type: string; status: string; reason: string }[] | undefined;
    id?: string | undefined;
    createPending?: unknown;
  };
}

/**
 * The GpuVm as a capacity waiter, when it waits for capacity (Ready reason CapacityUnavailable and Stalled: every
 * location of its walk answered no; no VM and no create intent): its location list and where it is in it, its
 * priority as counted, and its age (creationTimestamp). All of it read from the object, so every replica derives the
 * same queue. A VM still walking its locations (not Stalled yet) tries the next one at once; one whose create intent
 * is written is about to be sent (it left the queue). `key` is what the caller wakes.
 */
export function capacityWaiterOf(vm: QueuedVm, key: string, priority: number): CapacityWaiter | undefined {
  const conditions = vm.status?.conditions ?? [];
  const ready = conditions.find((condition) => condition.type === "Ready");
  const stalled = conditions.find((condition) => condition.type === "Stalled");
  if (ready?.reason !== "CapacityUnavailable" || stalled?.status !== "True") return undefined;
  if (vm.status?.id !== undefined || vm.status?.createPending !== undefined) return undefined;
  const locations = vm.spec.locations ?? (vm.spec.location === undefined ? [] : [vm.spec.location]);
  if (locations.length === 0 || vm.metadata.uid === undefined) return undefined;
  return {
    key,
    uid: vm.metadata.uid,
    type: vm.spec.type,
    locations,
    locationIndex: vm.status?.locationIndex ?? 0,
    priority,
    sinceMs: timeMs(vm.metadata.creationTimestamp),
  };
}
