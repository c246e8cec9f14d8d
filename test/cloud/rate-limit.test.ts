import { afterEach, describe, expect, it, vi } from "vitest";
import { credentialKeyOf, sharedBucketFor, TokenBucket } from "../../src/cloud/rate-limit.ts";

describe("TokenBucket", () => {
  it("lets a burst through at once, then paces at ratePerSec", async () => {
    const bucket = new TokenBucket({ ratePerSec: 20, burst: 3 });
    const started = performance.now();
    const times: number[] = [];
    await Promise.all(
      Array.from({ length: 6 }, async () => {
        await bucket.take();
        times.push(performance.now() - started);
      }),
    );
    times.sort((a, b) => a - b);
    expect(times[2]).toBeLessThan(30);
    // 3 tokens beyond the burst at 20/s need about 150 ms.
    expect(times[5]).toBeGreaterThanOrEqual(135);
    expect(times[5]).toBeLessThan(600);
  });

  it("serves waiters in order and honours abort", async () => {
    const bucket = new TokenBucket({ ratePerSec: 10, burst: 1 });
    await bucket.take();
    const order: string[] = [];
    const controller = new AbortController();
    const first = bucket.take().then(() => order.push("first"));
    const aborted = bucket.take(controller.signal).catch((error: unknown) => {
      order.push("aborted");
      return error;
    });
    const second = bucket.take().then(() => order.push("second"));
    controller.abort(new Error("shutting down"));
    await Promise.all([first, second]);
    expect(await aborted).toBeInstanceOf(Error);
    expect(order).toEqual(["aborted", "first", "second"]);
  });

  it("refills with an injected clock, never beyond burst", () => {
    let now = 0;
    const bucket = new TokenBucket({ ratePerSec: 2, burst: 4, now: () => now });
    expect(bucket.available()).toBe(4);
    now = 60_000;
    expect(bucket.available()).toBe(4);
  });

  it("rejects nonsense options", () => {
    expect(() => new TokenBucket({ ratePerSec: 0, burst: 1 })).toThrow(RangeError);
    expect(() => new TokenBucket({ ratePerSec: 1, burst: 0 })).toThrow(RangeError);
  });
});

describe("TokenBucket adapting to the server", () => {
  it("keeps the reserve of its burst in hand", () => {
    const bucket = new TokenBucket({ ratePerSec: 20, burst: 40, reserve: 4, now: () => 0 });
    expect(bucket.available()).toBe(36);
    expect(() => new TokenBucket({ ratePerSec: 1, burst: 4, reserve: 4 })).toThrow(RangeError);
  });

  it("a 429 lowers the rate once per second, drops the tokens in hand; accepted answers bring it back gradually", () => {
    let now = 0;
    const bucket = new TokenBucket({
      ratePerSec: 20,
      burst: 40,
      adaptive: { recoveryPerSec: 2, decreaseFactor: 0.5 },
      now: () => now,
    });
    bucket.throttled();
    expect(bucket.currentRate()).toBe(10);
    expect(bucket.available()).toBe(0);
    bucket.throttled(); // the 429s of requests already in flight: the same signal
    expect(bucket.currentRate()).toBe(10);
    now = 1000;
    expect(bucket.available()).toBeCloseTo(10); // refilled at the lowered rate
    bucket.throttled();
    expect(bucket.currentRate()).toBe(5);
    now = 3000;
    bucket.accepted();
    expect(bucket.currentRate()).toBeCloseTo(9); // +2/s for 2 s
    now = 30_000;
    bucket.accepted();
    expect(bucket.currentRate()).toBe(20); // never above the configured rate
    expect(bucket.throttledCount).toBe(3);
  });

  it("never goes below its minimum rate", () => {
    let now = 0;
    const bucket = new TokenBucket({ ratePerSec: 4, burst: 4, adaptive: { minRatePerSec: 1 }, now: () => now });
    for (let i = 0; i < 20; i++) {
      now += 1000;
      bucket.throttled();
    }
    expect(bucket.currentRate()).toBe(1);
  });

  it("a fixed bucket keeps its rate but still honours Retry-After", () => {
    const bucket = new TokenBucket({ ratePerSec: 20, burst: 40, now: () => 0 });
    bucket.throttled(1000);
    expect(bucket.currentRate()).toBe(20);
  });

  it("serves urgent waiters (reads that finish work) before a backlog of others, each lane in order", async () => {
    const bucket = new TokenBucket({ ratePerSec: 50, burst: 1 });
    await bucket.take();
    const order: string[] = [];
    const all = [
      bucket.take().then(() => order.push("create-1")),
      bucket.take().then(() => order.push("create-2")),
      bucket.take(undefined, { urgent: true }).then(() => order.push("poll-1")),
      bucket.take(undefined, { urgent: true }).then(() => order.push("poll-2")),
    ];
    await Promise.all(all);
    expect(order).toEqual(["poll-1", "poll-2", "create-1", "create-2"]);
  });

  it("Retry-After holds every caller of the account until it has passed", async () => {
    const bucket = new TokenBucket({ ratePerSec: 100, burst: 10, adaptive: {} });
    await bucket.take();
    bucket.throttled(300);
    const started = performance.now();
    await Promise.all([bucket.take(), bucket.take()]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(280);
  });
});

describe("TokenBucket releasing queued callers in batches", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /** When each of `count` callers queued on an empty bucket got its token, in ms of fake time. */
  async function releaseTimes(
    options: { batchWindowMs?: number; urgentAt?: number },
    count: number,
  ): Promise<number[]> {
    vi.useFakeTimers({ now: 0 });
    const bucket = new TokenBucket({ ratePerSec: 20, burst: 40, reserve: 4, now: () => Date.now(), ...options });
    for (let i = 0; i < 36; i++) await bucket.take(); // the burst spent: from here on callers queue
    const times: number[] = new Array(count);
    const takes = Array.from({ length: count }, (_, index) =>
      bucket.take(undefined, { urgent: index === options.urgentAt }).then(() => {
        times[index] = Date.now();
      }),
    );
    await vi.advanceTimersByTimeAsync(5_000);
    await Promise.all(takes);
    return times;
  }

  it("lets queued callers go in batches of what the rate grants in half a second, at the same pace", async () => {
    const times = await releaseTimes({}, 30);
    // 20/s: ten tokens every 500 ms, so three groups of ten at 500, 1,000 and 1,500 ms.
    expect(new Set(times)).toEqual(new Set([500, 1000, 1500]));
    expect(times.filter((t) => t === 500)).toHaveLength(10);
    expect(Math.max(...times)).toBe(1500); // the rate is unchanged: 30 tokens take 1.5 s either way
  });

  it("releases them one by one with batchWindowMs 0, as fast in total", async () => {
    const times = await releaseTimes({ batchWindowMs: 0 }, 30);
    expect(new Set(times).size).toBe(30);
    expect(times[0]).toBe(50);
    expect(Math.max(...times)).toBe(1500);
  });

  it("never holds an urgent caller for a batch", async () => {
    const times = await releaseTimes({ urgentAt: 25 }, 30);
    expect(times[25]).toBe(50); // the next token, not the next batch
    expect(Math.max(...times)).toBe(1500);
  });

  it("a short queue waits only for its own tokens", async () => {
    const times = await releaseTimes({}, 3);
    expect(times).toEqual([150, 150, 150]);
  });

  it("refuses a negative window", () => {
    expect(() => new TokenBucket({ ratePerSec: 1, burst: 1, batchWindowMs: -1 })).toThrow(RangeError);
  });
});

describe("sharedBucketFor", () => {
  it("returns one bucket per credential key", () => {
    const keyA = credentialKeyOf({ apiKey: "secret-a" }, "http://x/v0.1");
    const keyB = credentialKeyOf({ apiKey: "secret-b" }, "http://x/v0.1");
    expect(keyA).not.toContain("secret");
    const a1 = sharedBucketFor(keyA, { ratePerSec: 5, burst: 5 });
    const a2 = sharedBucketFor(keyA, { ratePerSec: 50, burst: 50 });
    const b = sharedBucketFor(keyB, { ratePerSec: 5, burst: 5 });
    expect(a1).toBe(a2);
    expect(a1).not.toBe(b);
    expect(credentialKeyOf({ email: "Ada@x" }, "u")).toBe(credentialKeyOf({ email: "ada@x" }, "u"));
  });
});
