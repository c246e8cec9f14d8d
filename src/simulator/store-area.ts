// The base of the store's parts (vms.ts, disks.ts, networks.ts, firewall-rules.ts): what each one works with,
// and the default undo of a failed operation (the resource is no longer busy).
import type { OperationEngine, OperationHandler } from "./operation-engine.ts";
import type { Records, StoreContext } from "./records.ts";
import type { OperationRecord } from "./state.ts";

export abstract class StoreArea implements OperationHandler {
  protected readonly records: Records;
  protected readonly context: StoreContext;
  protected readonly operations: OperationEngine;

  constructor(records: Records, context: StoreContext, operations: OperationEngine) {
    this.records = records;
    this.context = context;
    this.operations = operations;
  }

  abstract apply(op: OperationRecord): unknown;

  revert(op: OperationRecord): void {
    const record = this.records.resourceOf(op.family, op.resourceId);
    if (record !== undefined) record.busyOperationId = "";
  }
}
