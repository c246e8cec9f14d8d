// Reconcile admission per cloud account: a reconcile that talks to the cloud first takes a slot of its account's
// bulkhead in its controller's lane (see src/cloud/bulkhead.ts) and gives it back when the reconcile ends, however
// it ends. A refused admission is thrown by `connect` as a CloudError (account_busy or circuit_open), which
// classify() turns into a requeue: the worker is free at once for objects of other accounts.
import type { AccountBulkhead } from "../cloud/bulkhead.ts";
import type { Reconciler } from "../runtime/index.ts";

export class AccountAdmissions {
  readonly lane: string;
  /** key → release of the slot its running reconcile holds (a key is never reconciled twice at once). */
  readonly #held = new Map<string, () => void>();

  constructor(lane: string) {
    this.lane = lane;
  }

  /** Take a slot for the reconcile of `key`; throws the bulkhead's refusal. */
  admit(key: string, bulkhead: AccountBulkhead | undefined): void {
    if (bulkhead === undefined) return;
    const admission = bulkhead.admit(this.lane);
    if (!admission.ok) throw admission.error;
    this.#held.get(key)?.();
    this.#held.set(key, admission.release);
  }

  release(key: string): void {
    this.#held.get(key)?.();
    this.#held.delete(key);
  }

  /** The reconciler with every slot its reconciles took given back when they end. */
  wrap(inner: Reconciler): Reconciler {
    return {
      reconcile: async (request, ctx) => {
        try {
          return await inner.reconcile(request, ctx);
        } finally {
          this.release(`${request.namespace}/${request.name}`);
        }
      },
    };
  }
}
