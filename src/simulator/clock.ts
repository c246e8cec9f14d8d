// The simulator's notion of time. Operations settle on timers of this clock, so tests can either run on real
// time (latency 0 settles on the next tick) or step a manual clock and watch operations finish in order.

export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Run `callback` after `ms` milliseconds of this clock's time. */
  setTimer(ms: number, callback: () => void): TimerHandle;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, callback) {
    // setImmediate for 0 so that "settle on the next tick" does not wait for the 1 ms timer floor.
    if (ms <= 0) {
      const immediate = setImmediate(callback);
      return { cancel: () => clearImmediate(immediate) };
    }
    const timeout = setTimeout(callback, ms);
    timeout.unref();
    return { cancel: () => clearTimeout(timeout) };
  },
};

export interface ManualClock extends Clock {
  /** Move time forward by `ms`, running every timer that falls due, in due order. */
  advance(ms: number): void;
  /** Number of timers not yet run. */
  pending(): number;
}

/** A clock that only moves when told to; for deterministic tests. */
export function createManualClock(startMs = Date.UTC(2026, 10, 21, 12, 0, 0)): ManualClock {
  let current = startMs;
  let sequence = 0;
  const timers = new Map<number, { dueAt: number; callback: () => void }>();
  return {
    now: () => current,
    setTimer(ms, callback) {
      const id = sequence++;
      timers.set(id, { dueAt: current + Math.max(0, ms), callback });
      return { cancel: () => timers.delete(id) };
    },
    advance(ms) {
      const target = current + ms;
      for (;;) {
        let nextId: number | undefined;
        let nextDue = Number.POSITIVE_INFINITY;
        for (const [id, timer] of timers) {
          if (timer.dueAt <= target && timer.dueAt < nextDue) {
            nextDue = timer.dueAt;
            nextId = id;
          }
        }
        if (nextId === undefined) break;
        const timer = timers.get(nextId);
        timers.delete(nextId);
        current = Math.max(current, nextDue);
        timer?.callback();
      }
      current = target;
    },
    pending: () => timers.size,
  };
}
