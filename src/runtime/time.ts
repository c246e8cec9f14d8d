// Time helpers shared by the runtime: an injectable clock (so queues and watchdogs run under fake timers),
// duration parsing for flags and annotations, jitter, and Kubernetes MicroTime formatting.

/** A timer handle as returned by `Clock.setTimeout`; opaque to callers. */
export type TimerHandle = object | number;

/** The clock every runtime component reads; tests inject a fake one (or use vitest fake timers). */
export interface Clock {
  now(): number;
  setTimeout(callback: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

/** The real clock. Timers are unref'd so a pending requeue never keeps the process alive on its own. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (callback, ms) => {
    const handle = setTimeout(callback, Math.max(0, ms));
    handle.unref?.();
    return handle;
  },
  clearTimeout: (handle) => clearTimeout(handle as Parameters<typeof clearTimeout>[0]),
};

/**
 * The value of a `gpucloud.dev/sync-period` annotation in ms, raised to `floorMs` when shorter (`raisedFrom` then
 * holds what was asked); an error for an unparseable or non-positive duration.
 */
export function syncPeriodOf(
  annotation: string,
  floorMs: number,
): { ms: number; raisedFrom?: number } | { error: DurationError } {
  try {
    const ms = parseDuration(annotation);
    if (ms <= 0) return { error: new DurationError("sync period must be positive") };
    return ms < floorMs ? { ms: floorMs, raisedFrom: ms } : { ms };
  } catch (error) {
    if (error instanceof DurationError) return { error };
    throw error;
  }
}

/** Thrown for a duration string that cannot be parsed ("5x", "", "-1s"). */
export class DurationError extends Error {
  override name = "DurationError";
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * Parses a Go-style duration ("500ms", "30s", "5m", "1h30m", "1.5s") into milliseconds. A bare number is not
 * accepted: an annotation "30" is ambiguous, and a clear error beats guessing seconds or milliseconds.
 */
export function parseDuration(text: string): number {
  const trimmed = text.trim();
  const pattern = /(\d+(?:\.\d+)?)(ms|s|m|h)/y;
  let total = 0;
  let consumed = 0;
  while (consumed < trimmed.length) {
    pattern.lastIndex = consumed;
    const match = pattern.exec(trimmed);
    if (match === null) break;
    total += Number(match[1]) * (UNIT_MS[match[2] ?? ""] ?? Number.NaN);
    consumed = pattern.lastIndex;
  }
  if (trimmed.length === 0 || consumed !== trimmed.length || !Number.isFinite(total)) {
    throw new DurationError(`invalid duration "${text}": use a number with a unit, e.g. "500ms", "30s", "5m", "1h"`);
  }
  return Math.round(total);
}

/** Formats milliseconds back to a short duration string ("90000" → "1m30s") for logs and help text. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  const parts: string[] = [];
  let rest = Math.round(ms / 1000);
  const hours = Math.floor(rest / 3600);
  rest -= hours * 3600;
  const minutes = Math.floor(rest / 60);
  rest -= minutes * 60;
  if (hours > 0) parts.push(`${hours}h`);
  if (minutes > 0) parts.push(`${minutes}m`);
  if (rest > 0 || parts.length === 0) parts.push(`${rest}s`);
  return parts.join("");
}

/**
 * Spreads `ms` uniformly over [ms·(1−fraction), ms·(1+fraction)] so that many objects scheduled together do not
 * fire together. `random` is injectable for deterministic tests.
 */
export function jitter(ms: number, fraction: number, random: () => number = Math.random): number {
  return Math.round(ms * (1 - fraction + 2 * fraction * random()));
}

/**
 * Kubernetes MicroTime: RFC 3339 with exactly six fractional digits. The API server rejects milliseconds
 * (kubernetes/kubernetes#94748), so Leases and Events must use this, never `toISOString()`.
 */
export function formatMicroTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

/** Parses a MicroTime or Time string (or a Date the client already deserialized); undefined when unusable. */
export function parseKubeTime(value: unknown): number | undefined {
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? undefined : value.getTime();
  if (typeof value !== "string") return undefined;
  const parsed = Date.parse(value);
  return Number.isNaN(parsed) ? undefined : parsed;
}

/** Resolves after `ms` on the given clock, or at once when the signal aborts. */
export function sleep(ms: number, signal?: AbortSignal, clock: Clock = systemClock): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const onAbort = (): void => {
      clock.clearTimeout(handle);
      resolve();
    };
    const handle = clock.setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
