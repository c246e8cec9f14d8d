// Every write the API received (any method but GET), in order: when it arrived (the simulator's clock), who sent it
// (the User-Agent: the operator names its replica there), what it asked (route template, path, a VM action's name)
// and how it was answered (a status, or `lost` when the change was made and the answer dropped). Tests and the
// chaos run read it (`GET /_sim/requests/log`) to tell which replica acted when, e.g. that none acted after it lost
// its Lease. Bounded: the oldest entries go first.
import { BoundedLog } from "../util/bounded-log.ts";

export interface WriteLogEntry {
  /** Milliseconds since the epoch when the request arrived. */
  at: number;
  method: string;
  /** Route template below /v0.1 (`/projects/:projectId/vms/:vmId`). */
  route: string;
  /** The concrete path below /v0.1. */
  path: string;
  userAgent: string;
  /** A VM action's `action` (START, STOP, RESET, UPDATE), when the body names one. */
  action?: string;
  /** Filled when answered: the HTTP status, or `lost` (made, answer dropped). */
  status?: number | "lost";
  /** The operation the write started, when it started one (answered or lost). */
  operationId?: string;
}

/** The simulator's write log: the newest 100,000 writes. */
export const newWriteLog = (): BoundedLog<WriteLogEntry> => new BoundedLog<WriteLogEntry>(100_000);
