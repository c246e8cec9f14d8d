// GpuBudgets kept in memory as an API server keeps them: every read is a copy with the current resourceVersion,
// every status write is refused (conflict) unless it carries that version, and each call yields to the event loop
// first, so concurrent ledgers interleave their reads and writes as separate clients would.
import { setImmediate as yieldToOthers } from "node:timers/promises";
import type { BudgetRecords, StatusWrite } from "../../src/admission/budget-ledger.ts";
import { budgetOf } from "../../src/admission/budget-records.ts";
import type { Budget, BudgetStatusShape } from "../../src/admission/ledger.ts";
import { jsonEqual } from "../../src/runtime/index.ts";

interface Stored {
  metadata: { name: string; namespace: string; resourceVersion: string; generation: number };
  spec: unknown;
  status: unknown;
}

export class MemoryBudgets {
  readonly #objects = new Map<string, Stored>();
  #version = 0;
  writes = 0;
  conflicts = 0;
  lists = 0;

  put(namespace: string, name: string, spec: unknown, status: unknown = {}): void {
    const key = `${namespace}/${name}`;
    const before = this.#objects.get(key);
    this.#objects.set(key, {
      metadata: {
        name,
        namespace,
        resourceVersion: String(++this.#version),
        generation: (before?.metadata.generation ?? 0) + 1,
      },
      spec,
      status: before?.status ?? status,
    });
  }

  delete(namespace: string, name: string): void {
    this.#objects.delete(`${namespace}/${name}`);
  }

  /** The budget as a fresh read would parse it. */
  read(namespace: string, name: string): Budget {
    const stored = this.#objects.get(`${namespace}/${name}`);
    const budget = stored === undefined ? undefined : budgetOf(structuredClone(stored));
    if (budget === undefined) throw new Error(`no budget ${namespace}/${name}`);
    return budget;
  }

  records(): BudgetRecords {
    return {
      list: async (namespace) => {
        await yieldToOthers();
        this.lists++;
        return [...this.#objects.values()]
          .filter((stored) => stored.metadata.namespace === namespace)
          .flatMap((stored) => budgetOf(structuredClone(stored)) ?? []);
      },
      writeStatus: async (budget: Budget, status: BudgetStatusShape): Promise<StatusWrite> => {
        await yieldToOthers();
        const stored = this.#objects.get(`${budget.namespace}/${budget.name}`);
        if (stored === undefined) return { type: "gone" };
        if (stored.metadata.resourceVersion !== budget.resourceVersion) {
          this.conflicts++;
          return { type: "conflict" };
        }
        // As KubeClient.patchStatus: an unchanged status is not sent.
        if (jsonEqual(stored.status, status)) return { type: "written", budget };
        this.writes++;
        stored.status = structuredClone(status);
        stored.metadata.resourceVersion = String(++this.#version);
        const written = budgetOf(structuredClone(stored));
        if (written === undefined) throw new Error("unparsable budget");
        return { type: "written", budget: written };
      },
    };
  }
}
