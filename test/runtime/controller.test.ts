import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  Controller,
  type Outcome,
  outcome,
  parseKey,
  type ReconcileContext,
  ReconcilePacer,
  type ReconcileRequest,
} from "../../src/runtime/controller.ts";
import { Metrics } from "../../src/runtime/metrics.ts";

const logger = pino({ level: "silent" });

/** A reconciler whose outcomes are scripted per call; records every request and context. */
function scripted(outcomes: Array<Outcome | Error>) {
  const calls: Array<{ request: ReconcileRequest; ctx: ReconcileContext }> = [];
  return {
    calls,
    reconciler: {
      async reconcile(request: ReconcileRequest, ctx: ReconcileContext): Promise<Outcome> {
        calls.push({ request, ctx });
        const next = outcomes.shift() ?? outcome.done();
        if (next instanceof Error) throw next;
        return next;
      },
    },
  };
}

async function metricValue(metrics: Metrics, name: string, labels: Record<string, string>): Promise<number> {
  const metric = (await metrics.registry.getMetricsAsJSON()).find((entry) => entry.name === name);
  const value = metric?.values.find((entry) =>
    Object.entries(labels).every(([key, wanted]) => entry.labels[key] === wanted),
  );
  return value?.value ?? 0;
}

describe("Controller", () => {
  beforeEach(() => {
    // From a whole second: resyncs come due on whole seconds (resyncTickMs), the periods below are whole seconds.
    vi.useFakeTimers({ now: 0 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("maps done/requeueAfter/retry/terminal/throw to queue actions and counts them", async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const { calls, reconciler } = scripted([
      outcome.retry(new Error("cloud 503")),
      new Error("thrown"),
      outcome.requeueAfter(5000),
      outcome.terminal(new Error("bad spec")),
    ]);
    const controller = new Controller({ name: "demo", reconciler, logger, metrics, queue: { random: () => 0.5 } });
    controller.start();
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toHaveLength(1); // retry → 1 s backoff
    await vi.advanceTimersByTimeAsync(999);
    expect(calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toHaveLength(2); // thrown → retry with 2 s backoff
    await vi.advanceTimersByTimeAsync(2000);
    expect(calls).toHaveLength(3); // requeueAfter 5 s, backoff forgotten
    expect(controller.queue.numRequeues("ns/a")).toBe(0);
    await vi.advanceTimersByTimeAsync(5000);
    expect(calls).toHaveLength(4); // terminal: not retried
    await vi.advanceTimersByTimeAsync(600_000);
    expect(calls).toHaveLength(4);
    expect(await metricValue(metrics, "controller_runtime_reconcile_total", { result: "error" })).toBe(3);
    expect(await metricValue(metrics, "controller_runtime_reconcile_total", { result: "requeue_after" })).toBe(1);
    expect(await metricValue(metrics, "controller_runtime_reconcile_errors_total", { controller: "demo" })).toBe(3);
    expect(await metricValue(metrics, "controller_runtime_terminal_reconcile_errors_total", {})).toBe(1);
    // Only the thrown error is a panic; returned failures are ordinary errors.
    expect(await metricValue(metrics, "controller_runtime_reconcile_panics_total", { controller: "demo" })).toBe(1);
    expect(await metricValue(metrics, "workqueue_retries_total", { name: "demo" })).toBe(2);
    await controller.stop(1000);
  });

  it("gives each reconcile a request, an unaborted signal and a unique reconcileId", async () => {
    const { calls, reconciler } = scripted([]);
    const controller = new Controller({ name: "demo", reconciler, logger });
    controller.start();
    controller.enqueue("team-a/vm-1");
    controller.enqueue("cluster-scoped");
    await vi.advanceTimersByTimeAsync(0);
    expect(calls.map((call) => call.request)).toEqual([
      { namespace: "team-a", name: "vm-1" },
      { namespace: "", name: "cluster-scoped" },
    ]);
    expect(calls[0]?.ctx.signal.aborted).toBe(false);
    expect(calls[0]?.ctx.reconcileId).not.toBe(calls[1]?.ctx.reconcileId);
    expect(calls[0]?.ctx.logger.bindings()).toMatchObject({
      controller: "demo",
      namespace: "team-a",
      name: "vm-1",
      reconcileID: calls[0]?.ctx.reconcileId,
    });
    await controller.stop(1000);
  });

  it("an expected failure (a returned retry) logs one line without a stack; a thrown error logs its stack", async () => {
    const lines: Record<string, unknown>[] = [];
    const captured = pino({ level: "debug" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    let call = 0;
    const controller = new Controller({
      name: "demo",
      logger: captured,
      reconciler: {
        async reconcile() {
          call++;
          if (call === 1) return outcome.retry(new Error("CredentialsInvalid: unknown token"));
          if (call === 2) throw new Error("a bug");
          return outcome.done();
        },
      },
    });
    controller.start();
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(10_000);
    const retry = lines.find(
      (line) => line.msg === "reconcile failed, will retry" && line.error === "CredentialsInvalid: unknown token",
    );
    expect(retry).toBeDefined();
    expect(JSON.stringify(retry)).not.toContain("stack");
    const panic = lines.find((line) => line.msg === "reconcile panicked");
    expect(JSON.stringify(panic)).toContain("a bug");
    expect((panic?.err as { stack?: string } | undefined)?.stack).toContain("Error: a bug");
    await controller.stop(1000);
  });

  it("never reconciles one key concurrently, even with many workers", async () => {
    let running = 0;
    let maxRunning = 0;
    let calls = 0;
    const controller = new Controller({
      name: "demo",
      workers: 4,
      logger,
      reconciler: {
        async reconcile() {
          calls++;
          running++;
          maxRunning = Math.max(maxRunning, running);
          await new Promise((resolve) => setTimeout(resolve, 100));
          running--;
          return outcome.done();
        },
      },
    });
    controller.start();
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(10);
    controller.enqueue("ns/a"); // while processing: queued once more
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(500);
    expect(maxRunning).toBe(1);
    expect(calls).toBe(2);
    await controller.stop(1000);
  });

  it("runs different keys in parallel up to the worker count", async () => {
    let running = 0;
    let maxRunning = 0;
    const controller = new Controller({
      name: "demo",
      workers: 3,
      logger,
      reconciler: {
        async reconcile() {
          running++;
          maxRunning = Math.max(maxRunning, running);
          await new Promise((resolve) => setTimeout(resolve, 100));
          running--;
          return outcome.done();
        },
      },
    });
    controller.start();
    for (const name of ["a", "b", "c", "d", "e"]) controller.enqueue(`ns/${name}`);
    await vi.advanceTimersByTimeAsync(1000);
    expect(maxRunning).toBe(3);
    await controller.stop(1000);
  });

  it("resyncs successful objects after their jittered period and stops when the object is gone", async () => {
    const periods = new Map<string, number | undefined>([["ns/a", 60_000]]);
    const { calls, reconciler } = scripted([]);
    const controller = new Controller({
      name: "demo",
      reconciler,
      logger,
      random: () => 1, // +10 %: 66 s
      resyncPeriodFor: (request) => periods.get(`${request.namespace}/${request.name}`),
    });
    controller.start();
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(65_999);
    expect(calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toHaveLength(2);
    periods.delete("ns/a"); // deleted: no further polling
    await vi.advanceTimersByTimeAsync(600_000);
    expect(calls).toHaveLength(3);
    await vi.advanceTimersByTimeAsync(600_000);
    expect(calls).toHaveLength(3);
    await controller.stop(1000);
  });

  it("tells each pass the lane that asked for it: `low` only for a periodic resync, also when woken ahead", async () => {
    const { calls, reconciler } = scripted([]);
    const controller = new Controller({
      name: "demo",
      reconciler,
      logger,
      random: () => 1,
      resyncPeriodFor: () => 60_000,
    });
    controller.start();
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(0);
    await vi.advanceTimersByTimeAsync(66_000); // the resync
    controller.enqueue("ns/a", "high"); // an event
    await vi.advanceTimersByTimeAsync(10);
    controller.wake("ns/a", "low", "high"); // a resync that waited for a slot of its account, queued ahead
    await vi.advanceTimersByTimeAsync(10);
    expect(calls.map((call) => call.ctx.priority)).toEqual(["normal", "low", "high", "low"]);
    await controller.stop(1000);
  });

  it("stop waits for a running reconcile within the bound, then aborts its signal", async () => {
    let seenSignal: AbortSignal | undefined;
    const controller = new Controller({
      name: "demo",
      logger,
      reconciler: {
        reconcile(_request, ctx) {
          seenSignal = ctx.signal;
          return new Promise<Outcome>((resolve) => {
            ctx.signal.addEventListener("abort", () => resolve(outcome.retry(new Error("aborted"))));
          });
        },
      },
    });
    controller.start();
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(0);
    const stopping = controller.stop(3000);
    await vi.advanceTimersByTimeAsync(2999);
    expect(seenSignal?.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await stopping).toBe(false);
    expect(seenSignal?.aborted).toBe(true);
  });

  it("drops malformed keys instead of failing", async () => {
    const { calls, reconciler } = scripted([]);
    const controller = new Controller({ name: "demo", reconciler, logger });
    controller.start();
    controller.enqueue("a/b/c");
    controller.enqueue("/b");
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toHaveLength(0);
    expect(() => parseKey("a/")).toThrow(/invalid object key/);
    await controller.stop(1000);
  });

  it("treats a malformed outcome as a retry", async () => {
    const controller = new Controller({
      name: "demo",
      logger,
      queue: { random: () => 0.5 },
      reconciler: { reconcile: async () => ({ type: "requeueAfter", ms: Number.NaN }) },
    });
    controller.start();
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(0);
    expect(controller.queue.numRequeues("ns/a")).toBe(1);
    await controller.stop(1000);
  });

  it("can start again after stopNow (lost and regained leadership)", async () => {
    const { calls, reconciler } = scripted([]);
    const controller = new Controller({ name: "demo", reconciler, logger });
    controller.start();
    controller.stopNow();
    controller.enqueue("ns/a"); // ignored: intake stopped
    controller.start();
    controller.enqueue("ns/b");
    await vi.advanceTimersByTimeAsync(0);
    expect(calls.map((call) => call.request.name)).toEqual(["b"]);
    await controller.stop(1000);
  });
});

describe("Controller lanes and pacing", () => {
  beforeEach(() => {
    // From a whole second: resyncs come due on whole seconds (resyncTickMs), the periods below are whole seconds.
    vi.useFakeTimers({ now: 0 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("brings the resyncs due within one second together, at most a tenth of the period later", async () => {
    const { calls, reconciler } = scripted([]);
    const controller = new Controller({
      name: "ticks",
      reconciler,
      logger,
      workers: 2,
      resyncPeriodFor: (request) => (request.name === "short" ? 2000 : 10_000),
      resyncJitter: 0,
    });
    const passes = (name: string) => calls.filter((call) => call.request.name === name).length;
    controller.start();
    controller.enqueue("ns/a");
    controller.enqueue("ns/short");
    await vi.advanceTimersByTimeAsync(300);
    controller.enqueue("ns/b");
    await vi.advanceTimersByTimeAsync(600);
    controller.enqueue("ns/c");
    await vi.advanceTimersByTimeAsync(10_999 - 900);
    expect([passes("a"), passes("b"), passes("c")]).toEqual([2, 1, 1]); // a: due at 10 s exactly
    await vi.advanceTimersByTimeAsync(1);
    expect([passes("b"), passes("c")]).toEqual([2, 2]); // 10.3 s and 10.9 s: both at 11 s, in one wake-up
    // A 2-s period is rounded to a tenth of it (200 ms), not to a whole second: every 2 s, as asked.
    expect(passes("short")).toBe(6);
    const stopped = controller.stop(100);
    await vi.advanceTimersByTimeAsync(100);
    await stopped;
  });

  it("schedules the periodic resync in the low lane", async () => {
    let release: () => void = () => undefined;
    const reconciler = {
      async reconcile(request: ReconcileRequest): Promise<Outcome> {
        if (request.name === "busy") await new Promise<void>((resolve) => (release = resolve));
        return outcome.done();
      },
    };
    const controller = new Controller({
      name: "resync",
      reconciler,
      logger,
      resyncPeriodFor: () => 1000,
      resyncJitter: 0,
    });
    controller.start();
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(0);
    controller.enqueue("ns/busy"); // holds the one worker while a's resync comes due
    await vi.advanceTimersByTimeAsync(1000);
    expect(controller.queue.laneLen("low")).toBe(1);
    controller.enqueue("ns/changed", "high");
    release();
    await vi.advanceTimersByTimeAsync(0);
    expect(controller.queue.laneLen("low")).toBe(0);
    const stopped = controller.stop(100);
    await vi.advanceTimersByTimeAsync(100);
    await stopped;
  });

  it("a parked key waits for its wake, not for a timer nor its resync; the wake drops the fallback", async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const { calls, reconciler } = scripted([{ type: "parked", fallbackMs: 300_000 }]);
    const controller = new Controller({
      name: "parking",
      reconciler,
      logger,
      metrics,
      resyncPeriodFor: () => 30_000,
      resyncJitter: 0,
    });
    controller.start();
    controller.enqueue("ns/a", "high");
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toHaveLength(1);
    expect(calls[0]?.ctx.priority).toBe("high");
    // Parked: neither the resync period nor a short delay brings it back.
    await vi.advanceTimersByTimeAsync(60_000);
    expect(calls).toHaveLength(1);
    controller.wake("ns/a", "normal");
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toHaveLength(2);
    expect(calls[1]?.ctx.priority).toBe("normal");
    // The second pass ended done: its resync is the next look, the parked fallback is gone.
    await vi.advanceTimersByTimeAsync(30_000);
    expect(calls).toHaveLength(3);
    await vi.advanceTimersByTimeAsync(240_000);
    expect(calls).toHaveLength(3 + 8); // resyncs only (every 30 s), no extra pass at the old fallback
    expect(await metricValue(metrics, "controller_runtime_reconcile_total", { result: "parked" })).toBe(1);
    await controller.stop(1000);
  });

  it("a parked key nobody wakes comes back after its fallback", async () => {
    const { calls, reconciler } = scripted([{ type: "parked", fallbackMs: 5000 }]);
    const controller = new Controller({ name: "fallback", reconciler, logger });
    controller.start();
    controller.enqueue("ns/a");
    await vi.advanceTimersByTimeAsync(4999);
    expect(calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toHaveLength(2);
    await controller.stop(1000);
  });

  it("a shared ReconcilePacer spaces reconcile starts over every controller", async () => {
    const pacer = new ReconcilePacer(2);
    const starts: number[] = [];
    const reconciler = {
      async reconcile(): Promise<Outcome> {
        starts.push(Date.now());
        return outcome.done();
      },
    };
    const a = new Controller({ name: "a", reconciler, logger, workers: 4, pacer });
    const b = new Controller({ name: "b", reconciler, logger, workers: 4, pacer });
    a.start();
    b.start();
    for (let i = 0; i < 3; i++) {
      a.enqueue(`ns/a-${i}`);
      b.enqueue(`ns/b-${i}`);
    }
    await vi.advanceTimersByTimeAsync(0);
    expect(starts).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(2500);
    expect(starts).toHaveLength(6);
    const gaps = starts.slice(1).map((at, i) => at - (starts[i] ?? 0));
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(500);
    // Stopping while starts wait for their turn ends them without reconciling.
    for (let i = 3; i < 7; i++) a.enqueue(`ns/a-${i}`);
    await vi.advanceTimersByTimeAsync(0);
    const before = starts.length;
    const stopped = Promise.all([a.stop(10), b.stop(10)]);
    await vi.advanceTimersByTimeAsync(10);
    expect((await stopped)[0]).toBe(false);
    await vi.advanceTimersByTimeAsync(5000);
    expect(starts.length).toBeLessThanOrEqual(before + 1);
  });
});

describe("Controller and the event loop", () => {
  it("lets timers run between passes that never wait on I/O (no stall until the queue is empty)", async () => {
    let passes = 0;
    const reconciler = {
      async reconcile(): Promise<Outcome> {
        // A pass served entirely from caches: some CPU, no I/O.
        const until = performance.now() + 0.05;
        while (performance.now() < until) {
          // busy
        }
        passes++;
        return outcome.done();
      },
    };
    const controller = new Controller({ name: "cached", reconciler, logger, workers: 8 });
    for (let index = 0; index < 2000; index++) controller.enqueue(`ns/object-${index}`);
    const passesWhenTimerRan = new Promise<number>((resolve) => setTimeout(() => resolve(passes), 0));
    controller.start();
    // Without turns of the event loop the timer would only run once all 2,000 passes (~100 ms of CPU) are done.
    expect(await passesWhenTimerRan).toBeLessThan(2000);
    while (passes < 2000) await new Promise((resolve) => setTimeout(resolve, 5));
    await controller.stop(5000);
  });
});

describe("Controller across a lost and regained leadership", () => {
  it("never runs two passes of one key at once: a fresh queue's pass waits for the cancelled one to end", async () => {
    let running = 0;
    let most = 0;
    let passes = 0;
    const controller = new Controller({
      name: "demo",
      logger,
      workers: 4,
      reconciler: {
        async reconcile(_request, ctx): Promise<Outcome> {
          passes++;
          running++;
          most = Math.max(most, running);
          // A pass that needs a while to notice its cancellation (a request in flight).
          await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
          await new Promise((resolve) => setTimeout(resolve, 100));
          running--;
          return outcome.done();
        },
      },
    });
    controller.start();
    controller.enqueue("default/vm-1");
    await vi.waitFor(() => expect(running).toBe(1));
    // Leadership lost, and regained a moment later (the manager's onStoppedLeading, then onStartedLeading).
    controller.stopNow();
    controller.prepare();
    controller.enqueue("default/vm-1");
    controller.start();
    await vi.waitFor(() => expect(passes).toBe(2), { timeout: 2000 });
    expect(most).toBe(1);
    controller.stopNow();
  });
});
