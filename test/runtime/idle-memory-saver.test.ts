import { describe, expect, it } from "vitest";
import { IdleMemorySaver, type IdleMemorySaverOptions } from "../../src/runtime/idle-memory-saver.ts";
import type { Clock, TimerHandle } from "../../src/runtime/time.ts";
import { silentLogger } from "./helpers.ts";

/** A clock whose timers fire only when the test advances it. */
function manualClock(): Clock & { advance(ms: number): void } {
  let now = 0;
  let next = 1;
  const timers = new Map<number, { at: number; callback: () => void }>();
  return {
    now: () => now,
    setTimeout(callback, ms): TimerHandle {
      const id = next++;
      timers.set(id, { at: now + ms, callback });
      return id;
    },
    clearTimeout(handle) {
      timers.delete(handle as number);
    },
    advance(ms) {
      const until = now + ms;
      for (;;) {
        const due = [...timers].filter(([, timer]) => timer.at <= until).sort((a, b) => a[1].at - b[1].at)[0];
        if (due === undefined) break;
        timers.delete(due[0]);
        now = due[1].at;
        due[1].callback();
      }
      now = until;
    },
  };
}

function saver(overrides: Partial<IdleMemorySaverOptions> = {}) {
  const clock = manualClock();
  const flags: string[] = [];
  const gauge: boolean[] = [];
  const instance = new IdleMemorySaver({
    idleAfterMs: 60_000,
    logger: silentLogger,
    clock,
    execArgv: [],
    setFlags: (flag) => flags.push(flag),
    onChange: (saving) => gauge.push(saving),
    ...overrides,
  });
  return { instance, clock, flags, gauge };
}

describe("IdleMemorySaver", () => {
  it("optimizes for memory after the idle period, and stops at the first work", () => {
    const { instance, clock, flags, gauge } = saver();
    instance.start();
    clock.advance(45_000);
    expect(flags).toEqual([]);
    clock.advance(15_000);
    expect(flags).toEqual(["--optimize-for-size"]);
    expect(instance.saving).toBe(true);
    instance.work();
    expect(flags).toEqual(["--optimize-for-size", "--no-optimize-for-size"]);
    expect(gauge).toEqual([true, false]);
    expect(instance.saving).toBe(false);
  });

  it("work keeps it from ever starting, and each flag is set once per change", () => {
    const { instance, clock, flags } = saver();
    instance.start();
    for (let second = 0; second < 300; second += 10) {
      instance.work();
      clock.advance(10_000);
    }
    expect(flags).toEqual([]);
    clock.advance(75_000);
    clock.advance(120_000);
    expect(flags).toEqual(["--optimize-for-size"]);
    instance.work();
    instance.work();
    expect(flags).toEqual(["--optimize-for-size", "--no-optimize-for-size"]);
  });

  it("gives the heap back its usual setting when stopped, and never fires again", () => {
    const { instance, clock, flags } = saver();
    instance.start();
    clock.advance(60_000);
    instance.stop();
    expect(flags).toEqual(["--optimize-for-size", "--no-optimize-for-size"]);
    clock.advance(600_000);
    expect(flags).toHaveLength(2);
  });

  it("keeps out of the way when it is off (0) or node's command line asks for --optimize-for-size for good", () => {
    for (const overrides of [{ idleAfterMs: 0 }, { execArgv: ["--max-semi-space-size=4", "--optimize_for_size"] }]) {
      const { instance, clock, flags } = saver(overrides);
      instance.start();
      clock.advance(600_000);
      instance.work();
      instance.stop();
      expect(flags).toEqual([]);
    }
  });
});
