// The runtime's fence (util/fence.ts): a write leaves this process only while (1) the process may act — it
// holds its shard's Lease with margin (leader-election.ts `holdsLease`), or runs without leader election — and
// (2) the pass that sends it was not cancelled (leadership lost, shutdown timeout): a pass runs inside
// `runInPass`, whose scope follows its async calls, so a write is judged by the pass that made it even when
// leadership was regained since. Kubernetes writes (status, finalizers, objects, Events) go through a KubeConfig
// whose dispatcher applies the fence (`fenceKubeConfig`); cloud clients get the fence as an option.
import { AsyncLocalStorage } from "node:async_hooks";
import type { KubeConfig } from "@kubernetes/client-node";
import { type Fence, fencingInterceptor } from "../util/fence.ts";
import { withInterceptor } from "./kube-request-metrics.ts";

interface PassScope {
  signal: AbortSignal;
}

const passes = new AsyncLocalStorage<PassScope>();

/** Runs one pass of a controller: writes it makes (directly or in calls it awaits) are refused once `signal` aborts. */
export function runInPass<T>(signal: AbortSignal, pass: () => T): T {
  return passes.run({ signal }, pass);
}

/** Whether the pass running in the current async context was cancelled (false outside any pass). */
export function passCancelled(): boolean {
  return passes.getStore()?.signal.aborted ?? false;
}

export class LeadershipFence implements Fence {
  readonly #mayAct: () => string | undefined;

  /** `mayAct`: why this process may not act now (no Lease, or not with margin), or undefined. */
  constructor(mayAct: () => string | undefined) {
    this.#mayAct = mayAct;
  }

  writeGuard(): () => string | undefined {
    const pass = passes.getStore();
    return () => {
      if (pass?.signal.aborted) return `its pass was cancelled (${reasonOf(pass.signal)})`;
      return this.#mayAct();
    };
  }

  /** The check now, in the caller's context: for work that is decided and started at once (an Event). */
  refusal(): string | undefined {
    return this.writeGuard()();
  }
}

function reasonOf(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason.message : String(reason);
}

/** A KubeConfig that behaves like `source` whose writes pass `fence` as their bytes are about to leave. */
export function fenceKubeConfig(source: KubeConfig, fence: Fence): KubeConfig {
  return withInterceptor(source, fencingInterceptor(fence));
}
