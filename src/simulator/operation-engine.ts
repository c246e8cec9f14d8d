// The asynchronous operation engine: every change starts an operation that stays IN_PROGRESS for the configured
// latency, then applies (or reverts, when it fails) through the kind that owns its family. It also answers the
// operation reads and lists: finished operations older than the retention vanish from both, as on a real server.
import { randomUUID } from "node:crypto";
import { formatTimestamp } from "../cloud/wire.ts";
import type { TimerHandle } from "./clock.ts";
import { conflict, SimError } from "./errors.ts";
import type { Family, Records, StoreContext } from "./records.ts";
import type { OperationRecord } from "./state.ts";

/** What a kind does when one of its operations settles. */
export interface OperationHandler {
  /** Apply a succeeded operation; returns its `result`. Throwing fails the operation. */
  apply(op: OperationRecord): unknown;
  /** Undo what starting the operation did (it failed). */
  revert(op: OperationRecord): void;
}

const DAY_MS = 86_400_000;
const OPERATION_HISTORY_LIMIT = 50_000;

export interface OperationFilter {
  resourceId?: string | undefined;
  state?: string | undefined;
  lowerTimeBoundMs?: number | undefined;
}

export class OperationEngine {
  readonly #records: Records;
  readonly #context: StoreContext;
  readonly #handlers = new Map<string, OperationHandler>();
  readonly #timers = new Map<string, TimerHandle>();
  #startedSincePrune = 0;

  constructor(records: Records, context: StoreContext) {
    this.#records = records;
    this.#context = context;
  }

  register(family: Family, handler: OperationHandler): void {
    this.#handlers.set(family, handler);
  }

  /** Schedule every operation the records hold in flight (start-up, reset, a reloaded state file). */
  resume(): void {
    this.close();
    for (const op of this.#records.inFlight) this.#schedule(op, Math.max(0, op.settleAtMs - this.#records.now()));
  }

  close(): void {
    for (const timer of this.#timers.values()) timer.cancel();
    this.#timers.clear();
  }

  start(
    projectId: string,
    family: Family,
    name: string,
    resourceId: string,
    request: unknown,
    pending: unknown = null,
    plannedFailure: { code: string; message: string } | null = null,
  ): OperationRecord {
    const now = this.#records.now();
    const latencyMs = this.#context.settings.latencyMs;
    const failure = plannedFailure ?? this.#context.faults.operationFailure(family, name) ?? null;
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
      settleAtMs: now + latencyMs,
      failure,
      pending,
    };
    this.#records.operations.set(op.id, op);
    this.#records.inFlight.add(op);
    this.#schedule(op, latencyMs);
    if (++this.#startedSincePrune >= 1000) this.#prune();
    this.#context.changed();
    return op;
  }

  /** 409 `conflict`, or (the other form a real server may use) an operation that fails `already_exists`. */
  duplicate(projectId: string, family: Family, name: string, request: unknown): OperationRecord {
    const message = `a ${family} named '${name}' already exists in this project`;
    if (this.#context.settings.duplicateNames === "conflict") throw conflict(message);
    return this.start(projectId, family, "CREATE", randomUUID(), request, null, { code: "already_exists", message });
  }

  /** The operation of this kind in flight on a resource (a repeated DELETE answers the same operation). */
  inFlightFor(projectId: string, family: Family, resourceId: string, name: string): OperationRecord | undefined {
    for (const op of this.#records.inFlight) {
      if (op.projectId === projectId && op.family === family && op.resourceId === resourceId && op.name === name) {
        return op;
      }
    }
    return undefined;
  }

  #schedule(op: OperationRecord, delayMs: number): void {
    this.#timers.set(
      op.id,
      this.#context.clock.setTimer(delayMs, () => {
        this.#timers.delete(op.id);
        this.#settle(op);
      }),
    );
  }

  #settle(op: OperationRecord): void {
    if (op.state !== "IN_PROGRESS") return;
    this.#records.inFlight.delete(op);
    const handler = this.#handlers.get(op.family);
    let failure = op.failure;
    let result: unknown = null;
    try {
      if (handler === undefined) throw new Error(`no handler for operations of family ${op.family}`);
      if (failure === null) result = handler.apply(op);
      else handler.revert(op);
    } catch (error) {
      // A rule broken between start and settle (e.g. a disk attached elsewhere meanwhile) fails the operation.
      failure = {
        code: error instanceof SimError ? "invalid_state" : "internal_error",
        message: error instanceof Error ? error.message : String(error),
      };
      handler?.revert(op);
    }
    op.state = failure === null ? "SUCCEEDED" : "FAILED";
    op.result = failure ?? result;
    op.completedAtMs = this.#records.now();
    op.pending = null;
    this.#context.changed();
  }

  /** Finished longer ago than the retention: no longer listed nor readable. */
  #expired(op: OperationRecord): boolean {
    const retentionMs = this.#context.settings.operationRetentionMs;
    return (
      retentionMs !== undefined && op.state !== "IN_PROGRESS" && op.completedAtMs + retentionMs <= this.#records.now()
    );
  }

  get(projectId: string, family: Family, operationId: string): OperationRecord {
    const op = this.#records.operations.get(operationId);
    if (op === undefined || op.projectId !== projectId || op.family !== family || this.#expired(op)) {
      throw new SimError(this.#context.settings.unknownOperationStatus, `operation ${operationId} not found`);
    }
    return op;
  }

  list(projectId: string, family: Family, filter: OperationFilter): OperationRecord[] {
    const out: OperationRecord[] = [];
    const candidates = filter.state === "IN_PROGRESS" ? this.#records.inFlight : this.#records.operations.values();
    for (const op of candidates) {
      if (op.projectId !== projectId || op.family !== family) continue;
      if (filter.resourceId !== undefined && op.resourceId !== filter.resourceId) continue;
      if (filter.state !== undefined && op.state !== filter.state) continue;
      // Seconds precision, like the timestamps the client sees.
      if (filter.lowerTimeBoundMs !== undefined && Math.floor(op.startedAtMs / 1000) * 1000 < filter.lowerTimeBoundMs)
        continue;
      if (this.#expired(op)) continue;
      out.push(op);
    }
    return out;
  }

  json(op: OperationRecord) {
    return {
      operation_id: op.id,
      state: op.state,
      metadata: { operation_name: op.name, id: op.resourceId, type: op.family, request: op.request },
      result: op.result,
      started_at: formatTimestamp(new Date(op.startedAtMs)),
      completed_at: op.completedAtMs === 0 ? "" : formatTimestamp(new Date(op.completedAtMs)),
    };
  }

  /**
   * Forget finished operations older than a day (or than the retention), and the oldest finished ones beyond
   * 50,000, so a long playground session does not grow without bound (clients tolerate a vanished operation).
   */
  #prune(): void {
    this.#startedSincePrune = 0;
    const operations = this.#records.operations;
    const cutoff = this.#records.now() - DAY_MS;
    const finished = [...operations.values()].filter((op) => op.state !== "IN_PROGRESS");
    const excess = operations.size - OPERATION_HISTORY_LIMIT;
    finished.forEach((op, index) => {
      if (op.completedAtMs < cutoff || index < excess || this.#expired(op)) operations.delete(op.id);
    });
  }
}
