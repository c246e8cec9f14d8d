// The faults a chaos run turns on while its objects are applied: the cloud's (errors, lost answers, FAILED
// operations, latency spikes, through the simulator's admin API) and the Kubernetes API's (watches dropped, history
// compacted so that re-watches get 410 Gone, conflicts on status writes, through the test double).
import type { RunningKubeDouble } from "../../kube-double/index.ts";
import type { FaultConfigInput } from "../../simulator/faults.ts";

/** The cloud faults while chaos is on: 10 % 5xx, 5 % 429, 2 % lost answers, 5 % FAILED operations, spikes. */
export const CLOUD_FAULTS: FaultConfigInput = {
  // Tried in order, each on what the ones before left: 5 % 500, 5 % 503, 5 % 429 of all requests.
  errors: [
    { status: 500, code: "internal_error", rate: 0.05 },
    { status: 503, code: "unavailable", rate: 0.0527 },
    { status: 429, code: "too_many_requests", retry_after_seconds: 1, rate: 0.0556 },
  ],
  lost_responses: [{ rate: 0.02 }],
  operation_failures: [
    { code: "internal_error", rate: 0.02 },
    { code: "unavailable", rate: 0.015 },
    { code: "aborted", rate: 0.01 },
    { code: "timeout", rate: 0.0052 },
  ],
  latency: [{ ms: 3000, rate: 0.01 }],
};

/** The Kubernetes API's faults, on from `start` to `stop`, and how often each fired. */
export class KubeFaults {
  readonly counts = { watch_drops: 0, compactions: 0 };
  readonly #timers: NodeJS.Timeout[] = [];

  /** Drops every watch each 10 s, compacts the history each 15 s, and fails two status writes with 409 each 3 s. */
  start(double: RunningKubeDouble): void {
    this.#timers.push(
      setInterval(() => {
        double.faults.dropWatches();
        this.counts.watch_drops++;
      }, 10_000),
      setInterval(() => {
        // Forget the history, then end the watches cleanly: every re-watch from its last resourceVersion gets
        // 410 Gone.
        double.faults.compact();
        double.faults.endWatches();
        this.counts.compactions++;
      }, 15_000),
      setInterval(() => double.faults.failNext(2, 409, { path: "/status" }), 3000),
    );
  }

  stop(): void {
    for (const timer of this.#timers.splice(0)) clearInterval(timer);
  }
}
