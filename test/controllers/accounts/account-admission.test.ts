// Parking: a reconcile refused because its cloud account's slots are all taken waits, without a timer, until a
// slot frees; settled work (`high`) is woken before new work, then first come, first served.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { AccountBulkhead, DEFAULT_BULKHEAD } from "../../../src/cloud/bulkhead.ts";
import { CloudError } from "../../../src/cloud/errors.ts";
import {
  AccountAdmissions,
  PARKED_FALLBACK_MS,
  PROMISE_TTL_MS,
} from "../../../src/controllers/accounts/account-admission.ts";
import type { Outcome, Priority, ReconcileContext, ReconcileRequest } from "../../../src/runtime/index.ts";

function provenBulkhead(laneLimit: number): AccountBulkhead {
  const bulkhead = new AccountBulkhead({ ...DEFAULT_BULKHEAD, laneLimit, rateLimit: undefined });
  const attempt = bulkhead.startAttempt("GET", "/projects/:projectId");
  if (attempt instanceof CloudError) throw attempt;
  attempt.end("success"); // an account that answered: healthy, the lane limit applies
  return bulkhead;
}

function context(priority: Priority): ReconcileContext {
  return { signal: new AbortController().signal, logger: pino({ level: "silent" }), reconcileId: "r", priority };
}

function request(name: string): ReconcileRequest {
  return { namespace: "ns", name };
}

/** An inner reconciler whose passes take a slot (as `connect` does) and end when the test says so. */
function holdingReconciler(admissions: AccountAdmissions, bulkhead: AccountBulkhead) {
  const started: string[] = [];
  const finish = new Map<string, () => void>();
  return {
    started,
    end(name: string): void {
      finish.get(name)?.();
    },
    reconciler: {
      async reconcile(req: ReconcileRequest): Promise<Outcome> {
        const key = `${req.namespace}/${req.name}`;
        admissions.admit(key, bulkhead);
        started.push(req.name);
        await new Promise<void>((resolve) => finish.set(req.name, resolve));
        return { type: "done" };
      },
    },
  };
}

/** One account of one slot, its admissions and the keys they woke, in order. */
function oneSlotAccount(now?: () => number) {
  const bulkhead = provenBulkhead(1);
  const admissions = new AccountAdmissions("gpuvm", now ? { now } : {});
  const woken: string[] = [];
  /** Each wake as it was asked: the key, the lane its pass is told, the lane it is queued in. */
  const wakes: Array<[string, Priority, Priority]> = [];
  admissions.wakeWith((key, priority, position) => {
    woken.push(key);
    wakes.push([key, priority, position]);
  });
  return { bulkhead, admissions, woken, wakes, inner: holdingReconciler(admissions, bulkhead) };
}

describe("AccountAdmissions parking", () => {
  it("parks refused keys without running them and wakes them as slots free, high first", async () => {
    const bulkhead = provenBulkhead(2);
    const admissions = new AccountAdmissions("gpuvm");
    const woken: Array<[string, Priority, Priority]> = [];
    admissions.wakeWith((key, priority, position) => woken.push([key, priority, position]));
    const inner = holdingReconciler(admissions, bulkhead);
    const wrapped = admissions.wrap(inner.reconciler, () => bulkhead);

    const a = wrapped.reconcile(request("a"), context("normal"));
    const b = wrapped.reconcile(request("b"), context("normal"));
    await Promise.resolve();
    expect(inner.started).toEqual(["a", "b"]);

    // Both slots taken: new work and settled work are parked at once, without a pass.
    expect(await wrapped.reconcile(request("new-1"), context("normal"))).toEqual({
      type: "parked",
      fallbackMs: PARKED_FALLBACK_MS,
    });
    await wrapped.reconcile(request("new-2"), context("normal"));
    await wrapped.reconcile(request("settled"), context("high"));
    expect(inner.started).toEqual(["a", "b"]);
    expect(admissions.parkedCount).toBe(3);
    expect(woken).toEqual([]);

    // One slot frees: the settled key is woken first (queued high, to take the slot before fresh keys).
    inner.end("a");
    await a;
    expect(woken).toEqual([["ns/settled", "high", "high"]]);
    // The freed slot is promised to the woken key: a fresh key that reaches a worker first is parked instead of
    // taking it (before, it took the slot and sent the woken key back to wait).
    expect(await wrapped.reconcile(request("fresh"), context("normal"))).toMatchObject({ type: "parked" });
    expect(inner.started).toEqual(["a", "b"]);
    const settled = wrapped.reconcile(request("settled"), context("high"));
    await Promise.resolve();
    expect(inner.started).toEqual(["a", "b", "settled"]);
    expect(admissions.parkedCount).toBe(3);

    // Then first come, first served among the new ones.
    inner.end("b");
    await b;
    // Queued ahead (high), its pass still told its own lane.
    expect(woken.at(-1)).toEqual(["ns/new-1", "normal", "high"]);
    const first = wrapped.reconcile(request("new-1"), context("normal"));
    await Promise.resolve();
    inner.end("settled");
    await settled;
    expect(woken.slice(-1)).toEqual([["ns/new-2", "normal", "high"]]);
    const second = wrapped.reconcile(request("new-2"), context("normal"));
    await Promise.resolve();
    expect(inner.started).toEqual(["a", "b", "settled", "new-1", "new-2"]);
    expect(admissions.parkedCount).toBe(1); // fresh, next in line
    inner.end("new-1");
    await first;
    expect(woken.at(-1)).toEqual(["ns/fresh", "normal", "high"]);
    inner.end("new-2");
    await second;
    expect(admissions.parkedCount).toBe(0);
  });

  it("a woken key that no longer needs its slot hands it to the next parked key", async () => {
    const { bulkhead, admissions, woken, inner } = oneSlotAccount();
    let gone = "";
    const wrapped = admissions.wrap(inner.reconciler, (req) => (req.name === gone ? undefined : bulkhead));
    const gentle = admissions.wrap({ reconcile: async () => ({ type: "done" }) }, (req) =>
      req.name === gone ? undefined : bulkhead,
    );

    const holder = wrapped.reconcile(request("holder"), context("normal"));
    await Promise.resolve();
    await wrapped.reconcile(request("deleted"), context("normal"));
    await wrapped.reconcile(request("next"), context("normal"));
    inner.end("holder");
    await holder;
    expect(woken).toEqual(["ns/deleted"]);
    // Its object is gone by the time it runs: no account, no slot taken; the promised slot goes on at once.
    gone = "deleted";
    await gentle.reconcile(request("deleted"), context("high"));
    expect(woken).toEqual(["ns/deleted", "ns/next"]);
  });

  it("a pass that asks for its slot only once connected does not take one promised to a woken key", async () => {
    const { bulkhead, admissions, woken, inner } = oneSlotAccount();
    // No account known before the pass (credentials not resolved early): the pass's own admit decides.
    let early = true;
    const wrapped = admissions.wrap(inner.reconciler, () => (early ? bulkhead : undefined));

    const holder = wrapped.reconcile(request("holder"), context("normal"));
    await Promise.resolve();
    await wrapped.reconcile(request("waiting"), context("normal"));
    inner.end("holder");
    await holder;
    expect(woken).toEqual(["ns/waiting"]);
    early = false;
    await expect(wrapped.reconcile(request("late"), context("normal"))).rejects.toMatchObject({
      code: "account_busy",
    });
    expect(inner.started).toEqual(["holder"]);
    early = true;
    const waiting = wrapped.reconcile(request("waiting"), context("high"));
    await Promise.resolve();
    expect(inner.started).toEqual(["holder", "waiting"]);
    inner.end("waiting");
    await waiting;
    expect(woken.at(-1)).toBe("ns/late"); // parked by its refusal, woken when the slot frees
  });

  it("a key woken and refused again keeps the lane it was parked in", async () => {
    let now = 1_000_000;
    const { bulkhead, admissions, woken, inner } = oneSlotAccount(() => now);
    const wrapped = admissions.wrap(inner.reconciler, () => bulkhead);

    const holder = wrapped.reconcile(request("holder"), context("normal"));
    await Promise.resolve();
    await wrapped.reconcile(request("resync"), context("low"));
    await wrapped.reconcile(request("create"), context("normal"));
    inner.end("holder");
    await holder;
    expect(woken).toEqual(["ns/create"]); // normal before low
    // Its promise lapses (the wake was lost): another key takes the slot, and the woken one, queued ahead in the
    // high lane but told its own (normal), is parked again: as normal, not high.
    now += PROMISE_TTL_MS + 1;
    const taker = wrapped.reconcile(request("taker"), context("normal"));
    await Promise.resolve();
    expect(inner.started).toEqual(["holder", "taker"]);
    await wrapped.reconcile(request("create"), context("normal"));
    await wrapped.reconcile(request("urgent"), context("high"));
    inner.end("taker");
    await taker;
    expect(woken).toEqual(["ns/create", "ns/urgent"]);
  });

  it("wakes a parked key ahead (high) but for its own lane: a woken resync is still a resync", async () => {
    const { bulkhead, admissions, wakes, inner } = oneSlotAccount();
    const wrapped = admissions.wrap(inner.reconciler, () => bulkhead);
    const holder = wrapped.reconcile(request("holder"), context("normal"));
    await Promise.resolve();
    await wrapped.reconcile(request("resync"), context("low"));
    inner.end("holder");
    await holder;
    // Before, it was woken as `high` work: its pass ran in full (never quietly, ADR 0018) and counted as work.
    expect(wakes).toEqual([["ns/resync", "low", "high"]]);
  });

  it("an account whose circuit is open is left to the pass, which reports it", async () => {
    const bulkhead = new AccountBulkhead({
      ...DEFAULT_BULKHEAD,
      failureThreshold: 1,
      laneLimit: 2,
      rateLimit: undefined,
    });
    const attempt = bulkhead.startAttempt("GET", "/projects/:projectId");
    if (attempt instanceof CloudError) throw attempt;
    attempt.end("failure");
    expect(bulkhead.health()).toBe("open");
    const admissions = new AccountAdmissions("gpuvm");
    admissions.wakeWith(() => undefined);
    const passes: string[] = [];
    const wrapped = admissions.wrap(
      {
        async reconcile(req) {
          passes.push(req.name);
          try {
            admissions.admit(`${req.namespace}/${req.name}`, bulkhead);
          } catch (error) {
            return { type: "retry", error: error as Error };
          }
          return { type: "done" };
        },
      },
      () => bulkhead,
    );
    const result = await wrapped.reconcile(request("a"), context("normal"));
    expect(passes).toEqual(["a"]);
    expect(result.type).toBe("retry");
    expect(admissions.parkedCount).toBe(0);
  });
});
