// Who goes first among objects waiting for room in a budget or for capacity: the higher priority, then the one
// waiting since earlier, then the smaller UID (so that every replica, shard and restart computes the same order from
// the same objects). A budget's maxPriority caps what the objects it covers may claim: in a shared cloud account a
// tenant cannot jump every queue by writing priority 1000.
import { DEFAULT_PRIORITY, MAX_PRIORITY, MIN_PRIORITY } from "../api/gpu-vm.ts";

export interface Precedence {
  priority: number;
  /** Milliseconds since the epoch: when it started waiting (or the object's creation, for a create). */
  sinceMs: number;
  uid: string;
}

/** An object's priority: spec.priority, or the default; out-of-range values (a hand-edited status) are clamped. */
export function priorityOf(spec: { priority?: number | undefined }): number {
  const priority = spec.priority ?? DEFAULT_PRIORITY;
  if (!Number.isFinite(priority)) return DEFAULT_PRIORITY;
  return Math.min(MAX_PRIORITY, Math.max(MIN_PRIORITY, Math.trunc(priority)));
}

/** The priority counted: the object's, capped by each covering budget's maxPriority. */
export function cappedPriority(priority: number, caps: readonly (number | undefined)[]): number {
  return caps.reduce<number>((lowest, cap) => (cap === undefined ? lowest : Math.min(lowest, cap)), priority);
}

/** Negative when `a` goes before `b`. A total order: no two distinct UIDs compare equal. */
export function comparePrecedence(a: Precedence, b: Precedence): number {
  if (a.priority !== b.priority) return b.priority - a.priority;
  if (a.sinceMs !== b.sinceMs) return a.sinceMs - b.sinceMs;
  return a.uid < b.uid ? -1 : a.uid > b.uid ? 1 : 0;
}

/** An RFC 3339 time in milliseconds; a missing or unreadable time counts as the latest possible (it goes last). */
export function timeMs(text: string | undefined): number {
  const ms = text === undefined ? Number.NaN : Date.parse(text);
  return Number.isFinite(ms) ? ms : Number.MAX_SAFE_INTEGER;
}
