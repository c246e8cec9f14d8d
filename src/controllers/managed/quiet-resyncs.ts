// Quiet resyncs: a periodic pass over an object that nothing has touched since its last good pass ends at once.
//
// A resync exists to see drift in the cloud: everything on the Kubernetes side (the object, the objects and
// Secrets it refers to, the Secret or ConfigMap it publishes to, its credentials) wakes the key with an event of
// its own, which is never a resync (the work queue's `low` lane holds only resyncs; any event lifts the key out
// of it). So when a pass ended Available, the object's version is still the one that pass read, and the
// cloud items its observation was computed from are still the very objects the family snapshots hold now (a
// snapshot keeps an item's object while each list shows it alike, and is listed again once older than the sync
// period, as a full pass would have it), the full pass would observe the same resource, decide nothing and
// write nothing. It is skipped (what that saves at scale: ADR 0018).
// A kind whose observation reads more than its own items (a GpuDisk names the GpuVms it is attached to, from
// the GpuVm objects) does not offer `reread`, and its resyncs stay full passes.

import type { Logger } from "pino";
import type { ManagedObject, ManagedSpecBase } from "../core/object-model.ts";
import type { CloudConnection } from "./pass.ts";

interface QuietState {
  /** The object's resourceVersion the last good pass read. */
  version: string;
  /** The snapshot items its observation was computed from (by identity). */
  reads: readonly object[];
}

export class QuietResyncs {
  readonly #quiet = new Map<string, QuietState>();

  /** A pass of `key` ended Available after observing `reads` (undefined: the kind cannot tell; forgotten). */
  record(key: string, version: string, reads: readonly object[] | undefined): void {
    if (reads === undefined || reads.length === 0) this.#quiet.delete(key);
    else this.#quiet.set(key, { version, reads });
  }

  forget(key: string): void {
    this.#quiet.delete(key);
  }

  /** Whether a resync of `key` would see what its last good pass saw (see the top of this file). */
  async unchanged<Spec extends ManagedSpecBase>(
    key: string,
    mr: ManagedObject<Spec>,
    connect: () => Promise<CloudConnection<Spec> | undefined>,
    signal: AbortSignal,
    logger: Logger,
  ): Promise<boolean> {
    const quiet = this.#quiet.get(key);
    if (quiet === undefined || quiet.version !== mr.metadata.resourceVersion) return false;
    try {
      const connection = await connect();
      if (connection?.external.reread === undefined || connection.usingCachedCredentials) return false;
      const now = await connection.external.reread(mr, signal);
      return now.length === quiet.reads.length && now.every((item, index) => item === quiet.reads[index]);
    } catch (error) {
      // The full pass meets the same failure and says it in status.
      logger.debug({ err: error }, "quiet resync check failed; running the full pass");
      return false;
    }
  }
}
