// The ledger's writes against an API server's concurrency rules (kept in memory: every write guarded by the
// resourceVersion it read): many ledgers reserving at once never hold more than the limit, a crash between the
// reservation and the cloud call leaves an entry the next pass finds, an object covered by two budgets takes room in
// both or in neither, and releases let exactly as many waiters proceed, in their order.
import { describe, expect, it } from "vitest";
import { BudgetLedger } from "../../src/admission/budget-ledger.ts";
import { admissibleWaiters, type Subject, totalsOf } from "../../src/admission/ledger.ts";
import { toMicros } from "../../src/admission/money.ts";
import { MemoryBudgets } from "./memory-budgets.ts";
import { CREATE_A40, subject } from "./subjects.ts";

const create = CREATE_A40;
let clock = Date.parse("2026-11-28T12:00:00Z");
const now = () => (clock += 1000);

const ledgerOf = (memory: MemoryBudgets) => new BudgetLedger({ records: memory.records(), now, retryBaseMs: 0 });

/** Reserve until the answer is not `busy` (a controller requeues a busy key). */
async function reserveSettled(ledger: BudgetLedger, who: Subject, need = create) {
  for (;;) {
    const answer = await ledger.reserve(who, need);
    if (answer.type !== "busy") return answer;
  }
}

describe("BudgetLedger", () => {
  it("never holds more than the limit, however many ledgers reserve at once", async () => {
    const memory = new MemoryBudgets();
    memory.put("team", "gpus", { maxHourlyUSD: 22 });
    // Six ledgers (six replicas or shards), ten objects each, all at once.
    const ledgers = Array.from({ length: 6 }, () => ledgerOf(memory));
    const answers = await Promise.all(
      ledgers.flatMap((ledger, replica) =>
        Array.from({ length: 10 }, (_, i) => reserveSettled(ledger, subject(`r${replica}-vm${i}`))),
      ),
    );
    const admitted = answers.filter((answer) => answer.type === "admitted");
    const budget = memory.read("team", "gpus");
    expect(admitted).toHaveLength(20);
    expect(Object.keys(budget.entries)).toHaveLength(20);
    expect(totalsOf(budget.entries).reservedMicros).toBe(toMicros(22));
    expect(Object.keys(budget.waiting)).toHaveLength(40);
    expect(memory.conflicts, "the writers really raced").toBeGreaterThan(0);
    const waiting = answers.find((answer) => answer.type === "waiting");
    expect(waiting?.type === "waiting" && waiting.message).toMatch(
      /^GpuBudget gpus: needs \$1\.10\/h, \$0\.00\/h free/,
    );
  });

  it("is idempotent after a crash: the next pass (another replica) finds the entry and writes nothing", async () => {
    const memory = new MemoryBudgets();
    memory.put("team", "gpus", { maxHourlyUSD: 22 });
    expect(await ledgerOf(memory).reserve(subject("a"), create)).toEqual({ type: "admitted", budgets: ["gpus"] });
    const writes = memory.writes;
    // The process dies before its cloud call; a new one reserves again for the same object.
    expect(await ledgerOf(memory).reserve(subject("a"), create)).toEqual({ type: "admitted", budgets: ["gpus"] });
    expect(memory.writes).toBe(writes);
    expect(Object.keys(memory.read("team", "gpus").entries)).toEqual(["uid-a"]);
  });

  it("takes room in every covering budget or in none", async () => {
    const memory = new MemoryBudgets();
    memory.put("team", "all", { maxHourlyUSD: 100 });
    memory.put("team", "vision", { maxHourlyUSD: 1, selector: { matchLabels: { team: "vision" } } });
    const ledger = ledgerOf(memory);
    const vision = subject("v", 0, { team: "vision" });
    const answer = await ledger.reserve(vision, create);
    expect(answer).toMatchObject({ type: "waiting", budget: "vision" });
    expect(memory.read("team", "all").entries).toEqual({});
    expect(Object.keys(memory.read("team", "vision").waiting)).toEqual(["uid-v"]);
    // Not covered by the vision budget: only the namespace-wide one counts it.
    expect(await ledger.reserve(subject("other"), create)).toEqual({ type: "admitted", budgets: ["all"] });
    // No budget in the namespace: admitted, nothing written.
    const writes = memory.writes;
    expect(await ledger.reserve({ ...subject("x"), namespace: "elsewhere" }, create)).toEqual({
      type: "admitted",
      budgets: [],
    });
    expect(memory.writes).toBe(writes);
  });

  it("keeps an object's place in a line it waits in when another budget turns it away", async () => {
    const memory = new MemoryBudgets();
    memory.put("team", "a", { maxHourlyUSD: 2.2, selector: { matchLabels: { pool: "a" } } });
    memory.put("team", "b", { maxHourlyUSD: 100 });
    const ledger = ledgerOf(memory);
    const inA = (name: string) => subject(name, 0, { pool: "a" });
    for (const name of ["a1", "a2"]) await ledger.reserve(inA(name), create);
    // x waits in a (full).
    expect(await ledger.reserve(inA("x"), create)).toMatchObject({ type: "waiting", budget: "a" });
    const since = memory.read("team", "a").waiting["uid-x"]?.since;
    // Room frees in a, and what frees in b goes to another object: x fits a, not b.
    memory.put("team", "b", { maxHourlyUSD: 2.2 });
    await ledger.release(inA("a1"));
    expect(await ledger.reserve(subject("other"), create)).toEqual({ type: "admitted", budgets: ["b"] });
    expect(await ledger.reserve(inA("x"), create)).toMatchObject({ type: "waiting", budget: "b" });
    // It took nothing in a, and is still first in a's line, since then.
    expect(memory.read("team", "a").entries["uid-x"]).toBeUndefined();
    expect(memory.read("team", "a").waiting["uid-x"]?.since).toBe(since);
  });

  it("gives nothing away when it gives up: busy after too many conflicts, and no entry left behind", async () => {
    const memory = new MemoryBudgets();
    memory.put("team", "a", { maxHourlyUSD: 100 });
    memory.put("team", "b", { maxHourlyUSD: 100 });
    const records = memory.records();
    let writesToB = 0;
    const ledger = new BudgetLedger({
      records: {
        list: records.list,
        // Budget b always meets a newer version.
        writeStatus: async (budget, status) => {
          if (budget.name !== "b") return records.writeStatus(budget, status);
          writesToB++;
          return { type: "conflict" };
        },
      },
      now,
      retryBaseMs: 0,
      maxAttempts: 3,
    });
    const answer = await ledger.reserve(subject("x"), create);
    expect(answer).toEqual({
      type: "busy",
      message: "GpuBudget b: 3 writes in a row met a newer version (other writers); trying again",
    });
    expect(writesToB).toBe(3);
    expect(memory.read("team", "a").entries).toEqual({});
  });

  it("settles to what the cloud confirmed, and releases: the freed room goes to the waiters in order", async () => {
    const memory = new MemoryBudgets();
    memory.put("team", "gpus", { maxHourlyUSD: 22 });
    const ledger = ledgerOf(memory);
    for (let i = 0; i < 20; i++) expect((await ledger.reserve(subject(`vm${i}`), create)).type).toBe("admitted");
    await ledger.settle(subject("vm0"), { ...create, purpose: "Create" });
    expect(memory.read("team", "gpus").entries["uid-vm0"]).toMatchObject({ state: "Used", amountUSD: 1.1 });
    // Eight wait: four of priority 0 in arrival order, then two urgent ones, then two more.
    for (const [name, priority] of [
      ["w1", 0],
      ["w2", 0],
      ["w3", 0],
      ["w4", 0],
      ["u1", 10],
      ["u2", 10],
      ["w5", 0],
      ["w6", 0],
    ] as const) {
      expect((await ledger.reserve(subject(name, priority), create)).type).toBe("waiting");
    }
    // Five VMs deleted: exactly five waiters may go, the urgent ones first, then the oldest.
    for (let i = 0; i < 5; i++) expect((await ledger.release(subject(`vm${i}`))).type).toBe("done");
    const budget = memory.read("team", "gpus");
    expect(admissibleWaiters(budget).map(([uid]) => uid)).toEqual(["uid-u1", "uid-u2", "uid-w1", "uid-w2", "uid-w3"]);
    // The sixth in line does not fit yet, and a newcomer does not either.
    expect((await ledger.reserve(subject("w4"), create)).type).toBe("waiting");
    expect((await ledger.reserve(subject("late"), create)).type).toBe("waiting");
    for (const name of ["u1", "u2", "w1", "w2", "w3"]) {
      expect((await ledger.reserve(subject(name, name.startsWith("u") ? 10 : 0), create)).type).toBe("admitted");
    }
    const after = memory.read("team", "gpus");
    expect(Object.keys(after.entries)).toHaveLength(20);
    expect(Object.keys(after.waiting).sort()).toEqual(["uid-late", "uid-w4", "uid-w5", "uid-w6"]);
    expect(after.spec.maxHourlyUSD).toBe(22);
  });

  it("a budget lowered below its use holds new spend, admits nothing until the use drops, and lets settles through", async () => {
    const memory = new MemoryBudgets();
    memory.put("team", "gpus", { maxHourlyUSD: 22 });
    const ledger = ledgerOf(memory);
    for (let i = 0; i < 10; i++) await ledger.reserve(subject(`vm${i}`), create);
    memory.put("team", "gpus", { maxHourlyUSD: 5.5 });
    const answer = await ledger.reserve(subject("new"), create);
    expect(answer.type === "waiting" && answer.message).toMatch(
      /^GpuBudget gpus is over its limit by \$5\.50\/h \(\$11\.00\/h of \$5\.50\/h\)/,
    );
    expect((await ledger.settle(subject("vm0"), create)).type).toBe("done");
    const stalled = memory.read("team", "gpus").conditions.find((condition) => condition.type === "Stalled");
    expect(stalled).toMatchObject({ status: "True", reason: "OverLimit", observedGeneration: 2 });
  });
});
