import { spawn } from "node:child_process";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { OPERATOR_NODE_FLAGS } from "../../src/cli/node-flags.ts";

const MODULE = path.resolve(import.meta.dirname, "../../src/cli/memory-reducer.ts");

/**
 * A process shaped like an operator going quiet: a burst that leaves ~40 MB alive and collects several times,
 * then a small timer's allocations for `idleMs`. Returns V8's memory reducer lines (--trace-memory-reducer) and
 * whether the reducer started a collection (`Memory reducer: started GC`) before the end.
 */
function quietProcess(withAllocations: boolean, idleMs: number): Promise<{ started: boolean; lines: string[] }> {
  const script = `
    ${withAllocations ? `const { keepEmbedderAllocationRateAboveZero } = await import(${JSON.stringify(MODULE)}); keepEmbedderAllocationRateAboveZero(2000);` : ""}
    const kept = [];
    for (let round = 0; round < 30; round++) {
      const batch = []; for (let i = 0; i < 40000; i++) batch.push({ round, i, name: "object-" + i });
      kept.push(batch); if (kept.length > 8) kept.shift();
    }
    const idle = setInterval(() => { const small = []; for (let i = 0; i < 200; i++) small.push({ i }); }, 1000);
    setTimeout(() => { clearInterval(idle); process.exit(0); }, ${idleMs});`;
  const child = spawn(
    process.execPath,
    [...OPERATOR_NODE_FLAGS, "--trace-memory-reducer", "--input-type=module", "-e", script],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const lines: string[] = [];
  let buffered = "";
  return new Promise((resolve, reject) => {
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      buffered += chunk;
      const complete = buffered.split("\n");
      buffered = complete.pop() ?? "";
      for (const line of complete) if (line.includes("Memory reducer")) lines.push(line.trim());
      if (lines.some((line) => line.includes("started GC"))) child.kill();
    });
    child.on("error", reject);
    child.on("close", () => resolve({ started: lines.some((line) => line.includes("started GC")), lines }));
  });
}

describe("V8's memory reducer in a quiet operator process (ADR 0034)", () => {
  it("starts within seconds once the embedder's allocation rate is above zero, and (this Node) never before its 100-s watchdog without it", async () => {
    const [without, withAllocations] = await Promise.all([quietProcess(false, 30_000), quietProcess(true, 30_000)]);
    // Both sides are V8's own decision: each 8-s tick of the reducer says whether it saw a low allocation rate.
    expect(withAllocations.started, withAllocations.lines.join("\n")).toBe(true);
    expect(withAllocations.lines.some((line) => line.includes("low alloc"))).toBe(true);
    // When this fails, Node's V8 reads a zero embedder rate as low at last: src/cli/memory-reducer.ts can go.
    expect(without.started, without.lines.join("\n")).toBe(false);
    expect(without.lines.some((line) => line.includes("high alloc"))).toBe(true);
  }, 60_000);
});
