// What one pass of a lifecycle concludes (a managed kind's or a pool's): the verdict (the conditions to write and
// the outcome to hand back to the work queue), or RELEASED when the object was let go and nothing is written.
import { REASONS, type Reason } from "../../api/common.ts";
import type { Outcome } from "../../runtime/index.ts";

const KNOWN_REASONS: ReadonlySet<string> = new Set(Object.values(REASONS));

/** Whether a condition's reason (read from a status: any text) is one of the fixed set. */
export function isReason(text: string): text is Reason {
  return KNOWN_REASONS.has(text);
}

/** Reasons after which nothing changes until the spec does (or a long backoff passes). */
export const TERMINAL_REASONS: ReadonlySet<Reason> = new Set<Reason>([
  REASONS.InvalidSpec,
  REASONS.ImmutableFieldChanged,
  REASONS.NotSupported,
  REASONS.OperationFailed,
  REASONS.StatusRejected,
]);

/** How long a terminal stall waits before trying again without a spec change. */
export const TERMINAL_RETRY_MS = 10 * 60_000;

export interface Verdict {
  /** Ready condition; undefined keeps the previous value (pause). */
  ready: boolean | undefined;
  reason: Reason;
  message: string;
  /** Reconciling=True: work is under way. */
  progressing: boolean;
  /** Stalled=True: no progress without outside help. */
  stalled: boolean;
  outcome: Outcome;
  /** An Event to record (reason = verdict reason); only emitted when the condition changes. */
  event?: "Normal" | "Warning";
  /** Nothing to write (a Kubernetes 409 on our own write, or an object not ours to speak for yet): the outcome only. */
  silent?: boolean;
  /** false: the resource is not in step with the spec although the reason alone would say so (synced.ts). */
  synced?: false;
  /** The UpToDate condition (create-only values); undefined keeps the previous one. */
  upToDate?: { status: "True" | "False"; reason: Reason; message: string };
}

/** The object is released (finalizer removed or never held): no status to write. */
export const RELEASED = Symbol("released");
export type Step = Verdict | typeof RELEASED;

export function verdict(
  reason: Reason,
  message: string,
  outcome: Outcome,
  flags: { ready?: boolean; progressing?: boolean; stalled?: boolean; event?: "Normal" | "Warning" } = {},
): Verdict {
  return {
    ready: flags.ready ?? false,
    reason,
    message,
    progressing: flags.progressing ?? false,
    stalled: flags.stalled ?? false,
    outcome,
    ...(flags.event ? { event: flags.event } : {}),
  };
}

export const after = (ms: number): Outcome => ({ type: "requeueAfter", ms });

/** Nothing to poll: the runtime resyncs the key after its sync period (jittered, per-object annotation). */
export const DONE: Outcome = { type: "done" };

/** A Kubernetes 409 on our own write: the cache is behind. Requeue silently; the next pass re-reads. */
export function conflict(): Verdict {
  return { ...verdict(REASONS.Updating, "", after(0)), silent: true };
}
