import { describe, expect, it } from "vitest";
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
