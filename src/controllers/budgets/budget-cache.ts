// The GpuBudgets as this replica caches them (every budget of the watched namespaces, whatever its shard): each
// cached version parsed once (admission/budget-records.ts budgetOf). Read to skip what needs no write (an object
// still waiting, an entry already right), to cap priorities, for the metrics and to wake waiters; never to admit
// (the ledger reads the budgets live before every reservation).
import type { KubernetesObject } from "@kubernetes/client-node";
import { budgetOf } from "../../admission/budget-records.ts";
import type { Budget } from "../../admission/ledger.ts";
import type { InformerEvent, ObjectInformer } from "../../runtime/index.ts";

export class BudgetCache {
  readonly informer: ObjectInformer<KubernetesObject>;
  readonly #parsed = new WeakMap<object, Budget | undefined>();

  constructor(informer: ObjectInformer<KubernetesObject>) {
    this.informer = informer;
  }

  /** A cached object as a Budget (undefined: not one). */
  parse(raw: KubernetesObject): Budget | undefined {
    if (this.#parsed.has(raw)) return this.#parsed.get(raw);
    const budget = budgetOf(raw);
    this.#parsed.set(raw, budget);
    return budget;
  }

  /** The budgets of a namespace (all namespaces: undefined). */
  list(namespace?: string): Budget[] {
    return this.informer.list(namespace).flatMap((raw) => this.parse(raw) ?? []);
  }

  get(namespace: string, name: string): Budget | undefined {
    const raw = this.informer.get(namespace, name);
    return raw === undefined ? undefined : this.parse(raw);
  }

  /** Each change of a budget, parsed (a deleted one as it was last cached). */
  on(handler: (event: { type: InformerEvent<unknown>["type"]; budget: Budget }) => void): () => void {
    return this.informer.on((event) => {
      const budget = this.parse(event.object);
      if (budget !== undefined) handler({ type: event.type, budget });
    });
  }

  hasSynced(): boolean {
    return this.informer.hasSynced();
  }
}
