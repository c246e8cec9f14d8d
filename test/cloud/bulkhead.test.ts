// The per-account bulkhead on a fake clock: reconcile admission per lane, what makes an account "degraded"
// (new, failing in a row, a request in flight too long), and the circuit breaker's open / probe / close cycle.
import { describe, expect, it } from "vitest";
import { AccountBulkhead, type AttemptHandle, DEFAULT_BULKHEAD } from "../../src/cloud/bulkhead.ts";
import { CloudError } from "../../src/cloud/errors.ts";

function bulkhead(now: { t: number }, laneLimit = 3) {
  return new AccountBulkhead({ ...DEFAULT_BULKHEAD, laneLimit, rateLimit: undefined, now: () => now.t });
}

function attempt(b: AccountBulkhead): AttemptHandle {
  const handle = b.startAttempt("GET", "/projects/:projectId/vms");
  if (handle instanceof CloudError) throw handle;
  return handle;
}

describe("AccountBulkhead", () => {
  it("admits one reconcile per lane while the account is unproven, the lane limit once it answered", () => {
    const now = { t: 0 };
    const b = bulkhead(now);
    const first = b.admit("gpuvm");
    expect(first.ok).toBe(true);
    const second = b.admit("gpuvm");
    expect(second.ok).toBe(false);
    if (!second.ok) {
      expect(second.error.code).toBe("account_busy");
      expect(second.error.retryable).toBe(true);
    }
    expect(b.admit("gpudisk").ok).toBe(true); // another lane has its own share
    attempt(b).end("success");
    expect(b.health()).toBe("healthy");
    expect(b.admit("gpuvm").ok).toBe(true);
    expect(b.admit("gpuvm").ok).toBe(true);
    expect(b.admit("gpuvm").ok).toBe(false); // 3 of 3
    if (first.ok) first.release();
    first.ok && first.release(); // twice: still one slot
    expect(b.report().admitted.gpuvm).toBe(2);
  });

  it("slots reserved by the caller count as taken", () => {
    const now = { t: 0 };
    const b = bulkhead(now, 2);
    attempt(b).end("success");
    expect(b.admit("gpuvm", undefined, 1).ok).toBe(true); // 1 used + 1 reserved: the lane is full
    const refused = b.admit("gpuvm", undefined, 1);
    expect(refused.ok).toBe(false);
    if (!refused.ok) expect(refused.error.message).toContain("1 promised to waiting ones");
    expect(b.admit("gpuvm").ok).toBe(true); // the reserved slot, taken by the one it was kept for
  });

  it("a request in flight longer than slowMs degrades the account until it ends", () => {
    const now = { t: 0 };
    const b = bulkhead(now);
    attempt(b).end("success");
    const slow = attempt(b);
    now.t = DEFAULT_BULKHEAD.slowMs + 1;
    expect(b.health()).toBe("degraded");
    slow.end("success");
    expect(b.health()).toBe("healthy");
  });

  it("a single failure among successes is noise; a run degrades, then opens the circuit", () => {
    const now = { t: 0 };
    const b = bulkhead(now);
    attempt(b).end("success");
    attempt(b).end("failure");
    expect(b.health()).toBe("healthy");
    attempt(b).end("failure");
    attempt(b).end("failure");
    expect(b.health()).toBe("degraded");
    attempt(b).end("failure");
    attempt(b).end("failure");
    expect(b.health()).toBe("open");
    const refused = b.startAttempt("GET", "/x");
    expect(refused).toBeInstanceOf(CloudError);
    expect((refused as CloudError).code).toBe("circuit_open");
    expect((refused as CloudError).retryAfterMs).toBe(DEFAULT_BULKHEAD.openMs);
    const admission = b.admit("gpuvm");
    expect(admission.ok).toBe(false);
  });

  it("after the open period one probe goes through; its failure doubles the open period, its success closes", () => {
    const now = { t: 0 };
    const b = bulkhead(now);
    for (let i = 0; i < DEFAULT_BULKHEAD.failureThreshold; i++) attempt(b).end("failure");
    now.t += DEFAULT_BULKHEAD.openMs;
    expect(b.health()).toBe("degraded");
    const probe = attempt(b);
    expect(b.startAttempt("GET", "/y")).toBeInstanceOf(CloudError); // only one probe at a time
    probe.end("failure");
    expect(b.report().openForMs).toBe(DEFAULT_BULKHEAD.openMs * 2);
    now.t += DEFAULT_BULKHEAD.openMs * 2;
    attempt(b).end("success");
    expect(b.health()).toBe("healthy");
    expect(b.report().openForMs).toBe(0);
  });

  it("a neutral outcome (the caller aborted) counts for nothing", () => {
    const now = { t: 0 };
    const b = bulkhead(now);
    for (let i = 0; i < 10; i++) attempt(b).end("neutral");
    expect(b.report().consecutiveFailures).toBe(0);
    expect(b.health()).toBe("degraded"); // still unproven
  });
});
