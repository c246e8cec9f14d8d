// The ledger's arithmetic, pure: what fits, who waits ahead of whom, the words of a waiting object and of a budget
// over its limit, in whole micro-dollars (twenty a40.1x make exactly $22.00).
import { describe, expect, it } from "vitest";
import {
  admissibleWaiters,
  type Budget,
  decide,
  type Need,
  nextStatus,
  waitingLine,
  waitMessage,
} from "../../src/admission/ledger.ts";
import { formatDollarsPerHour, toMicros, toMicrosRoundedUp } from "../../src/admission/money.ts";
import { DEFAULT_PRICES } from "../../src/admission/prices.ts";
import type { LedgerEntry, Waiter } from "../../src/api/gpu-budget.ts";
import { CREATE_A40, subject } from "./subjects.ts";

const NOW = new Date("2026-11-28T12:00:00.000Z");
const create = CREATE_A40;

function budget(spec: Partial<Budget["spec"]> = {}, fields: Partial<Budget> = {}): Budget {
  return {
    namespace: "team",
    name: "gpus",
    generation: 3,
    resourceVersion: "1",
    spec: { maxHourlyUSD: 22, ...spec },
    entries: {},
    waiting: {},
    conditions: [],
    malformed: 0,
    ...fields,
  };
}

const used = (name: string, amountUSD: number, gpus = 1, gpuModel = "a40"): [string, LedgerEntry] => [
  `uid-${name}`,
  { kind: "GpuVm", name, amountUSD, gpus, gpuModel, purpose: "Running", state: "Used", since: "2026-11-28T11:00:00Z" },
];

const waiter = (name: string, since: string, priority = 0, amountUSD = 1.1): [string, Waiter] => [
  `uid-${name}`,
  { kind: "GpuVm", name, amountUSD, gpus: 1, gpuModel: "a40", purpose: "Create", priority, since },
];

/** A budget holding `count` running a40.1x. */
const holding = (count: number, extra: Partial<Budget> = {}, spec: Partial<Budget["spec"]> = {}) =>
  budget(spec, {
    entries: Object.fromEntries(Array.from({ length: count }, (_, i) => used(`vm-${i}`, 1.1))),
    ...extra,
  });

describe("money", () => {
  it("counts in whole micro-dollars and says amounts as kubectl users read them", () => {
    expect(toMicros(1.1) * 20).toBe(toMicros(22));
    expect(toMicrosRoundedUp(0.00013)).toBe(130);
    expect(toMicrosRoundedUp(0.0001300001)).toBe(131);
    expect(formatDollarsPerHour(toMicros(14.48))).toBe("$14.48/h");
    expect(formatDollarsPerHour(143)).toBe("$0.000143/h");
    expect(formatDollarsPerHour(0)).toBe("$0.00/h");
  });
});

describe("decide", () => {
  it("admits the twentieth a40.1x into a $22 budget and refuses the twenty-first", () => {
    const nineteen = holding(19);
    const fits = decide(nineteen, subject("twentieth"), create, NOW);
    expect(fits).toEqual({
      type: "fits",
      entry: {
        kind: "GpuVm",
        name: "twentieth",
        amountUSD: 1.1,
        gpus: 1,
        gpuModel: "a40",
        purpose: "Create",
        state: "Reserved",
        since: NOW.toISOString(),
      },
    });
    const short = decide(holding(20), subject("next"), create, NOW);
    expect(short.type).toBe("short");
    if (short.type !== "short") return;
    expect(short.waiter).toMatchObject({ name: "next", amountUSD: 1.1, priority: 0, since: NOW.toISOString() });
    expect(waitMessage(short.shortfall)).toBe(
      "GpuBudget gpus: needs $1.10/h, $0.00/h free of $22.00/h (missing $1.10/h); used or reserved by 20 objects, " +
        "most by GpuVm vm-0 ($1.10/h), GpuVm vm-1 ($1.10/h), GpuVm vm-10 ($1.10/h)",
    );
  });

  it("is idempotent: an object holding enough is held (a pass after a crash), a larger need reserves the rest", () => {
    const entries = Object.fromEntries([used("a", 1.1)]);
    expect(decide(budget({}, { entries }), subject("a"), create, NOW)).toEqual({ type: "held" });
    const bigger = DEFAULT_PRICES.vm("a40.4x");
    if (bigger === undefined) throw new Error("no price");
    // a40.1x → a40.4x: $3.30 more; in a $4 budget it fits, in a $3 one it does not.
    const change: Need = { ...bigger, purpose: "TypeChange" };
    expect(decide(budget({ maxHourlyUSD: 4.4 }, { entries }), subject("a"), change, NOW)).toMatchObject({
      type: "fits",
      entry: { amountUSD: 4.4, gpus: 4, purpose: "TypeChange", state: "Reserved" },
    });
    const short = decide(budget({ maxHourlyUSD: 4 }, { entries }), subject("a"), change, NOW);
    expect(short.type === "short" && short.shortfall.needMicros).toBe(toMicros(3.3));
    // A smaller type needs no room: the entry keeps the larger amount until the change is settled.
    const smaller: Need = { ...CREATE_A40, purpose: "TypeChange" };
    const fourX = Object.fromEntries([used("a", 4.4, 4)]);
    expect(decide(budget({ maxHourlyUSD: 0 }, { entries: fourX }), subject("a"), smaller, NOW)).toEqual({
      type: "held",
    });
  });

  it("keeps room for the waiters ahead: a later arrival of the same priority does not overtake", () => {
    const line = Object.fromEntries([
      waiter("first", "2026-11-28T11:00:00Z"),
      waiter("second", "2026-11-28T11:30:00Z"),
    ]);
    const full = holding(18, { waiting: line });
    // $2.20 free: exactly what the two waiters ask. A newcomer waits behind them.
    const newcomer = decide(full, subject("third"), create, NOW);
    expect(newcomer.type).toBe("short");
    if (newcomer.type === "short") {
      expect(newcomer.shortfall).toMatchObject({ aheadCount: 2, freeMicros: 0 });
      expect(waitMessage(newcomer.shortfall)).toContain("; 2 wait ahead ($2.20/h)");
    }
    // The first waiter fits (nobody is ahead of it), and so does the second (only the first is).
    expect(decide(full, subject("first"), create, NOW).type).toBe("fits");
    expect(decide(full, subject("second"), create, NOW).type).toBe("fits");
    // A higher priority goes ahead of both.
    expect(decide(full, subject("urgent", 10), create, NOW).type).toBe("fits");
    // Unless the budget caps priorities at 0.
    expect(decide(holding(18, { waiting: line }, { maxPriority: 0 }), subject("urgent", 10), create, NOW).type).toBe(
      "short",
    );
    expect(waitingLine(full).map(([uid]) => uid)).toEqual(["uid-first", "uid-second"]);
  });

  it("keeps a waiter's place: re-deciding keeps its since, its priority is capped", () => {
    const line = Object.fromEntries([waiter("w", "2026-11-28T11:00:00Z")]);
    const short = decide(holding(20, { waiting: line }, { maxPriority: 5 }), subject("w", 50), create, NOW);
    expect(short.type === "short" && short.waiter).toMatchObject({ since: "2026-11-28T11:00:00Z", priority: 5 });
  });

  it("limits GPUs in total and per model, and names the limit", () => {
    const entries = Object.fromEntries([used("big", 14.48, 8, "a100-80gb")]);
    const eight = DEFAULT_PRICES.vm("a100-80gb.8x");
    if (eight === undefined) throw new Error("no price");
    const total = decide(
      budget({ maxHourlyUSD: 1000, maxGpus: { total: 12 } }, { entries }),
      subject("x"),
      { ...eight, purpose: "Create" },
      NOW,
    );
    expect(total.type === "short" && waitMessage(total.shortfall)).toBe(
      "GpuBudget gpus: needs 8 GPUs, 4 of 12 free (maxGpus.total)",
    );
    const model = decide(
      budget({ maxHourlyUSD: 1000, maxGpus: { byModel: { "a100-80gb": 8 } } }, { entries }),
      subject("x"),
      { ...eight, purpose: "Create" },
      NOW,
    );
    expect(model.type === "short" && waitMessage(model.shortfall)).toBe(
      "GpuBudget gpus: needs 8 a100-80gb GPUs, 0 of 8 free (maxGpus.byModel.a100-80gb)",
    );
    // Another model is not limited by that one.
    expect(
      decide(
        budget({ maxHourlyUSD: 1000, maxGpus: { byModel: { "a100-80gb": 8 } } }, { entries }),
        subject("y"),
        create,
        NOW,
      ).type,
    ).toBe("fits");
  });

  it("admits nothing new while over the limit, and says by how much it is over", () => {
    const over = holding(20, {}, { maxHourlyUSD: 15 });
    const short = decide(over, subject("x"), create, NOW);
    expect(short.type === "short" && waitMessage(short.shortfall)).toMatch(
      /^GpuBudget gpus is over its limit by \$7\.00\/h \(\$22\.00\/h of \$15\.00\/h\): needs \$1\.10\/h; used or reserved by 20 objects/,
    );
    // Disks cost something too: even a small disk waits.
    const disk = decide(
      over,
      { ...subject("d"), kind: "GpuDisk" },
      { ...DEFAULT_PRICES.disk(1e9), purpose: "DiskCreate" },
      NOW,
    );
    expect(disk.type).toBe("short");
  });
});

describe("the budget's status", () => {
  it("sums used and reserved, counts waiters, and is Ready WithinLimit", () => {
    const entries = Object.fromEntries([
      used("a", 1.1),
      ["uid-b", { ...used("b", 14.48, 8, "a100-80gb")[1], state: "Reserved" as const, purpose: "Create" as const }],
    ]);
    const waiting = Object.fromEntries([waiter("w", "2026-11-28T11:00:00Z")]);
    const status = nextStatus(budget({ maxHourlyUSD: 20 }), entries, waiting, NOW);
    expect(status).toMatchObject({
      observedGeneration: 3,
      usedUSD: 1.1,
      reservedUSD: 14.48,
      overLimitUSD: 0,
      gpus: 9,
      waitingCount: 1,
      waitingUSD: 1.1,
    });
    expect(status.conditions.map((c) => [c.type, c.status, c.reason])).toEqual([
      ["Ready", "True", "WithinLimit"],
      ["Stalled", "False", "WithinLimit"],
      ["Reconciling", "False", "WithinLimit"],
    ]);
    expect(status.conditions[0]?.message).toBe(
      "$15.58/h of $20.00/h used or reserved by 2 objects, 9 GPUs; 1 waits ($1.10/h)",
    );
  });

  it("lowered below its use: Stalled OverLimit with the amount over (kstatus Failed, Argo CD Degraded)", () => {
    const lowered = holding(20, {}, { maxHourlyUSD: 11, maxGpus: { total: 10 } });
    const status = nextStatus(lowered, lowered.entries, {}, NOW);
    expect(status.overLimitUSD).toBe(11);
    const stalled = status.conditions.find((c) => c.type === "Stalled");
    expect(stalled).toMatchObject({ status: "True", reason: "OverLimit" });
    expect(stalled?.message).toBe(
      "over its limit by $11.00/h, 20 GPUs of 10 (maxGpus.total): $22.00/h of $11.00/h used or reserved by 20 " +
        "objects, 20 GPUs; nothing is deleted, new spend waits until the use is below the limit",
    );
  });

  it("keeps a condition's lastTransitionTime while its status holds", () => {
    const first = nextStatus(budget(), {}, {}, NOW);
    const later = nextStatus(budget({}, { conditions: first.conditions }), {}, {}, new Date("2026-11-28T13:00:00Z"));
    expect(later.conditions[0]?.lastTransitionTime).toBe("2026-11-28T12:00:00Z");
  });
});

describe("admissibleWaiters", () => {
  it("is the prefix of the line that fits: a big waiter at the head holds back the small ones behind it", () => {
    const waiting = Object.fromEntries([
      waiter("big", "2026-11-28T10:00:00Z", 0, 4.4),
      waiter("small", "2026-11-28T10:05:00Z", 0, 1.1),
      waiter("urgent", "2026-11-28T11:00:00Z", 5, 1.1),
    ]);
    // $3.30 free: urgent (priority 5) fits, big ($4.40) does not, and small may not overtake big.
    const three = holding(17, { waiting });
    expect(admissibleWaiters(three).map(([uid]) => uid)).toEqual(["uid-urgent"]);
    expect(admissibleWaiters(holding(13, { waiting })).map(([uid]) => uid)).toEqual([
      "uid-urgent",
      "uid-big",
      "uid-small",
    ]);
  });
});
