import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { WorkQueue } from "../../src/runtime/workqueue.ts";

// A fixed random of 0.5 removes jitter, so delays are exact powers of two.
const exactBackoff = { random: () => 0.5 };

describe("WorkQueue", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("dedupes a key added several times before a worker takes it", async () => {
    const queue = new WorkQueue({ name: "test" });
    queue.add("ns/a");
    queue.add("ns/b");
    queue.add("ns/a");
    expect(queue.len()).toBe(2);
    expect(await queue.get()).toBe("ns/a");
    expect(await queue.get()).toBe("ns/b");
    expect(queue.len()).toBe(0);
  });

  it("never hands a key to two workers at once and re-queues it on done if re-added meanwhile", async () => {
    const queue = new WorkQueue({ name: "test" });
    queue.add("ns/a");
    const first = await queue.get();
    expect(first).toBe("ns/a");
    queue.add("ns/a"); // while processing
    expect(queue.len()).toBe(0);
    let secondWorker: string | undefined = "pending";
    void queue.get().then((key) => {
      secondWorker = key;
    });
    await Promise.resolve();
    expect(secondWorker).toBe("pending");
    queue.done("ns/a");
    await Promise.resolve();
    expect(secondWorker).toBe("ns/a");
    expect(queue.isProcessing("ns/a")).toBe(true);
  });

  it("does not re-queue a key on done when nobody added it during processing", async () => {
    const queue = new WorkQueue({ name: "test" });
    queue.add("ns/a");
    const key = await queue.get();
    queue.done(key ?? "");
    expect(queue.len()).toBe(0);
    expect(queue.processingCount()).toBe(0);
  });

  it("grows the backoff exponentially, caps it at 5 minutes and resets it on forget", () => {
    const queue = new WorkQueue({ name: "test", ...exactBackoff });
    expect([0, 1, 2, 3, 8, 9, 20].map((failures) => queue.backoffDelay(failures))).toEqual([
      1000, 2000, 4000, 8000, 256_000, 300_000, 300_000,
    ]);
    queue.addRateLimited("ns/a");
    queue.addRateLimited("ns/a");
    expect(queue.numRequeues("ns/a")).toBe(2);
    queue.forget("ns/a");
    expect(queue.numRequeues("ns/a")).toBe(0);
  });

  it("keeps jittered backoff within [1 s, 5 min]", () => {
    const low = new WorkQueue({ name: "low", random: () => 0 });
    const high = new WorkQueue({ name: "high", random: () => 0.999 });
    expect(low.backoffDelay(0)).toBe(1000);
    expect(low.backoffDelay(3)).toBe(7200);
    expect(high.backoffDelay(3)).toBeGreaterThan(8700);
    expect(high.backoffDelay(30)).toBe(300_000);
  });

  it("delivers a rate-limited key only after its backoff delay", async () => {
    const queue = new WorkQueue({ name: "test", ...exactBackoff });
    queue.addRateLimited("ns/a"); // 1 s
    expect(queue.len()).toBe(0);
    await vi.advanceTimersByTimeAsync(999);
    expect(queue.len()).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(queue.len()).toBe(1);
    const key = await queue.get();
    queue.done(key ?? "");
    queue.addRateLimited("ns/a"); // second failure: 2 s
    await vi.advanceTimersByTimeAsync(1999);
    expect(queue.len()).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(queue.len()).toBe(1);
  });

  it("addAfter: the earliest pending deadline for a key wins", async () => {
    const queue = new WorkQueue({ name: "test" });
    queue.addAfter("ns/a", 10_000);
    queue.addAfter("ns/a", 3000); // earlier: replaces
    queue.addAfter("ns/a", 5000); // later: ignored
    expect(queue.delayedLen()).toBe(1);
    await vi.advanceTimersByTimeAsync(2999);
    expect(queue.len()).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(queue.len()).toBe(1);
    expect(queue.delayedLen()).toBe(0);
    // The superseded 10 s entry must not add the key again.
    expect(await queue.get()).toBe("ns/a");
    queue.done("ns/a");
    await vi.advanceTimersByTimeAsync(20_000);
    expect(queue.len()).toBe(0);
  });

  it("drops superseded delayed entries once they outnumber the live ones (bounded, deadlines kept)", async () => {
    const queue = new WorkQueue({ name: "test" });
    // 1,000 keys waiting a long resync, each then requeued sooner and sooner (a burst's passes) or taken now.
    for (let key = 0; key < 1000; key++) queue.addAfter(`ns/${key}`, 600_000);
    for (let round = 1; round <= 20; round++) {
      for (let key = 0; key < 1000; key++) queue.addAfter(`ns/${key}`, 600_000 - round * 1000);
    }
    for (let key = 0; key < 500; key++) queue.addNow(`ns/${key}`);
    for (let key = 500; key < 1000; key++) queue.addAfter(`ns/${key}`, 100_000);
    expect(queue.delayedLen()).toBe(500);
    expect(queue.delayedEntries()).toBeLessThanOrEqual(2 * 1000 + 1024 + 1);
    // Every live deadline still fires, once, at its time.
    expect(queue.len()).toBe(500);
    await vi.advanceTimersByTimeAsync(99_999);
    expect(queue.len()).toBe(500);
    await vi.advanceTimersByTimeAsync(1);
    expect(queue.len()).toBe(1000);
    expect(queue.delayedLen()).toBe(0);
    await vi.advanceTimersByTimeAsync(600_000);
    expect(queue.len()).toBe(1000);
  });

  it("orders delayed keys by deadline and wakes a waiting worker", async () => {
    const queue = new WorkQueue({ name: "test" });
    queue.addAfter("ns/late", 300);
    queue.addAfter("ns/early", 100);
    queue.addAfter("ns/middle", 200);
    const taken: string[] = [];
    const worker = (async () => {
      for (let index = 0; index < 3; index++) {
        const key = await queue.get();
        if (key === undefined) return;
        taken.push(key);
        queue.done(key);
      }
    })();
    await vi.advanceTimersByTimeAsync(300);
    await worker;
    expect(taken).toEqual(["ns/early", "ns/middle", "ns/late"]);
  });

  it("shutDown stops intake and releases waiting workers", async () => {
    const queue = new WorkQueue({ name: "test" });
    const waiting = queue.get();
    queue.shutDown();
    expect(await waiting).toBeUndefined();
    queue.add("ns/a");
    queue.addAfter("ns/b", 10);
    expect(queue.len()).toBe(0);
    expect(queue.delayedLen()).toBe(0);
    expect(await queue.get()).toBeUndefined();
  });

  it("shutDownWithDrain resolves only after in-flight keys are done", async () => {
    const queue = new WorkQueue({ name: "test" });
    queue.add("ns/a");
    const key = await queue.get();
    let drained = false;
    const draining = queue.shutDownWithDrain().then(() => {
      drained = true;
    });
    await Promise.resolve();
    expect(drained).toBe(false);
    queue.done(key ?? "");
    await draining;
    expect(drained).toBe(true);
  });

  it("reports processing time for the unfinished-work and longest-running gauges", async () => {
    const queue = new WorkQueue({ name: "test" });
    queue.add("ns/a");
    queue.add("ns/b");
    await queue.get();
    await vi.advanceTimersByTimeAsync(2000);
    await queue.get();
    await vi.advanceTimersByTimeAsync(1000);
    expect(queue.longestRunningProcessorSeconds()).toBe(3);
    expect(queue.unfinishedWorkSeconds()).toBe(4);
  });

  it("feeds its observer", async () => {
    const seen: string[] = [];
    const queue = new WorkQueue({
      name: "test",
      observer: {
        onAdd: () => seen.push("add"),
        onRetry: () => seen.push("retry"),
        onQueueLatency: (seconds) => seen.push(`latency:${seconds}`),
        onWorkDuration: (seconds) => seen.push(`work:${seconds}`),
      },
    });
    queue.add("ns/a");
    await vi.advanceTimersByTimeAsync(500);
    const key = await queue.get();
    await vi.advanceTimersByTimeAsync(250);
    queue.done(key ?? "");
    queue.addRateLimited("ns/a");
    expect(seen).toEqual(["add", "latency:0.5", "work:0.25", "retry"]);
  });

  it("rejects nonsensical backoff bounds", () => {
    expect(() => new WorkQueue({ name: "bad", baseDelayMs: 0 })).toThrow(RangeError);
    expect(() => new WorkQueue({ name: "bad", baseDelayMs: 10, maxDelayMs: 5 })).toThrow(RangeError);
  });
});

describe("WorkQueue priority lanes", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("serves high before normal before low, FIFO within a lane", async () => {
    const queue = new WorkQueue({ name: "lanes" });
    for (let i = 0; i < 3; i++) queue.add(`ns/create-${i}`);
    queue.add("ns/resync", "low");
    queue.add("ns/settled-a", "high");
    queue.add("ns/settled-b", "high");
    expect(queue.laneLen("normal")).toBe(3);
    const order: (string | undefined)[] = [];
    for (let i = 0; i < 6; i++) order.push(await queue.get());
    expect(order).toEqual(["ns/settled-a", "ns/settled-b", "ns/create-0", "ns/create-1", "ns/create-2", "ns/resync"]);
  });

  it("a queued key moves up to a higher lane, never down, and is still queued once", async () => {
    const queue = new WorkQueue({ name: "lanes" });
    queue.add("ns/a");
    queue.add("ns/b");
    queue.add("ns/b", "high");
    queue.add("ns/b", "low");
    expect(queue.len()).toBe(2);
    expect(queue.laneLen("high")).toBe(1);
    expect(await queue.get()).toBe("ns/b");
    expect(await queue.get()).toBe("ns/a");
  });

  it("a key raised while it is processed comes back in its new lane after done, never twice at once", async () => {
    const queue = new WorkQueue({ name: "lanes" });
    queue.add("ns/busy");
    expect(await queue.get()).toBe("ns/busy");
    queue.add("ns/other");
    queue.add("ns/busy", "high"); // while processing: not handed out again
    expect(queue.len()).toBe(1);
    queue.done("ns/busy");
    expect(queue.laneLen("high")).toBe(1);
    expect(await queue.get()).toBe("ns/busy");
  });

  it("addNow may queue a key ahead of its lane; its pass is told its own lane unless an add asked for more", async () => {
    const queue = new WorkQueue({ name: "lanes" });
    queue.add("ns/create");
    queue.addNow("ns/woken-resync", "low", "high");
    queue.addNow("ns/woken-then-event", "low", "high");
    queue.add("ns/woken-then-event", "normal"); // an event for it before it runs
    expect(await queue.get()).toBe("ns/woken-resync");
    expect(queue.takenFrom("ns/woken-resync")).toBe("low");
    expect(await queue.get()).toBe("ns/woken-then-event");
    expect(queue.takenFrom("ns/woken-then-event")).toBe("normal");
    expect(await queue.get()).toBe("ns/create");
    expect(queue.takenFrom("ns/create")).toBe("normal");
    // Queued already for an event, then woken ahead as a resync: the event still stands.
    queue.done("ns/create");
    queue.add("ns/create", "normal");
    queue.addNow("ns/create", "low", "high");
    expect(queue.laneLen("high")).toBe(1);
    expect(await queue.get()).toBe("ns/create");
    expect(queue.takenFrom("ns/create")).toBe("normal");
    // Added again while processed: the next pass is told what the new add asked for.
    queue.add("ns/woken-resync", "low");
    queue.done("ns/woken-resync");
    expect(await queue.get()).toBe("ns/woken-resync");
    expect(queue.takenFrom("ns/woken-resync")).toBe("low");
  });

  it("a delayed add lands in the lane it was asked for; the earliest deadline wins", async () => {
    const queue = new WorkQueue({ name: "lanes" });
    queue.addAfter("ns/resync", 1000, "low");
    queue.addAfter("ns/poll", 1000, "normal");
    queue.addAfter("ns/resync", 500, "high");
    await vi.advanceTimersByTimeAsync(1000);
    expect(queue.laneLen("high")).toBe(1);
    expect(queue.laneLen("normal")).toBe(1);
    expect(queue.laneLen("low")).toBe(0);
  });
});
