// What our own writes did to each object: every resourceVersion they replaced and the one the last write made.
// A pass can write several times (finalizer, intent, final status). A cache still at any replaced version has not
// seen all of our writes yet, and acting on it would repeat work. The watch event of each write is only its echo:
// the pass that wrote has decided what comes next, so the echo starts no pass of its own (`isEcho`), unless a
// pass is waiting for it (it found the cache behind). Shared by the managed reconciler and the GpuVmPool reconciler.

import type { KubeAccess, WriteResult } from "./kube-access.ts";
import { type ManagedObject, type ManagedStatusBase, objectKey } from "./object-model.ts";

interface Written {
  superseded: Set<string>;
  last: string;
}

export class OwnWrites {
  readonly #byKey = new Map<string, Written>();
  /** Keys whose last pass found the cache behind our writes: the echo of our last write must wake them. */
  readonly #awaitingEcho = new Set<string>();
  /** key → the write being sent (settles with the version it made, undefined when it made none). */
  readonly #inFlight = new Map<string, Promise<string | undefined>>();

  /**
   * The version our last write made when the cache shows one our writes replaced (the cache is behind); else
   * undefined, and the key is forgotten: at our last version, or at a later one somebody else wrote (our writes
   * are guarded by resourceVersion, so no foreign version falls between them), the cache has caught up.
   */
  behind(key: string, cachedVersion: string): string | undefined {
    const own = this.#byKey.get(key);
    if (own?.superseded.has(cachedVersion)) {
      this.#awaitingEcho.add(key);
      return own.last;
    }
    this.#byKey.delete(key);
    this.#awaitingEcho.delete(key);
    return undefined;
  }

  /**
   * Whether an update event at `version` is only the echo of our own write (then no pass needs to start for it).
   * An event that arrives while a write of the key is in flight is answered once the write has its version (the
   * watch often delivers the event before the write's answer). False for anything else, and for a key whose
   * pass waits for the echo.
   */
  isEcho(key: string, version: string): boolean | Promise<boolean> {
    const known = this.#knownEcho(key, version);
    if (known) return true;
    const flight = this.#inFlight.get(key);
    if (flight === undefined) return false;
    return flight.then((made) => made === version && this.#knownEcho(key, version));
  }

  #knownEcho(key: string, version: string): boolean {
    const own = this.#byKey.get(key);
    if (own === undefined || this.#awaitingEcho.has(key)) return false;
    if (own.last === version) {
      // The cache has caught up with every write: nothing left to recognise.
      this.#byKey.delete(key);
      return true;
    }
    return own.superseded.has(version);
  }

  /** Marks a write of `key` as in flight until the returned function is called with the version it made. */
  protected sending(key: string): (made: string | undefined) => void {
    let settle: (made: string | undefined) => void = () => undefined;
    const flight = new Promise<string | undefined>((resolve) => {
      settle = resolve;
    });
    this.#inFlight.set(key, flight);
    return (made) => {
      if (this.#inFlight.get(key) === flight) this.#inFlight.delete(key);
      settle(made);
    };
  }

  /** Our write moved the object from version `from` to `to` ("unchanged" writes keep the version: no-op). */
  advance(key: string, from: string, to: string): void {
    if (to === from) return;
    const own = this.#byKey.get(key) ?? { superseded: new Set<string>(), last: to };
    own.superseded.add(from);
    own.last = to;
    this.#byKey.set(key, own);
  }

  forget(key: string): void {
    this.#byKey.delete(key);
    this.#awaitingEcho.delete(key);
  }
}

/**
 * Status and finalizer writes through the guarded Kubernetes access that remember what they replaced: a success
 * moves `mr` to the version it made, and `behind()` then recognises a cache that has not caught up.
 */
export class GuardedWrites extends OwnWrites {
  readonly #kube: Pick<KubeAccess, "writeStatus" | "setFinalizer">;
  readonly #fit: ((status: ManagedStatusBase) => string[]) | undefined;

  /** `fit`: fits a status to the CRD in place and names what cannot fit (then nothing is sent: `invalid`). */
  constructor(kube: Pick<KubeAccess, "writeStatus" | "setFinalizer">, fit?: (status: ManagedStatusBase) => string[]) {
    super();
    this.#kube = kube;
    this.#fit = fit;
  }

  async writeStatus(mr: ManagedObject, status: ManagedStatusBase): Promise<WriteResult> {
    const problems = this.#fit?.(status) ?? [];
    if (problems.length > 0) return { type: "invalid", message: problems.join("; ") };
    return this.#tracked(mr, () => this.#kube.writeStatus(mr, status));
  }

  async setFinalizer(mr: ManagedObject, present: boolean): Promise<WriteResult> {
    return this.#tracked(mr, () => this.#kube.setFinalizer(mr, present));
  }

  async #tracked(mr: ManagedObject, write: () => Promise<WriteResult>): Promise<WriteResult> {
    const key = objectKey(mr);
    const settle = this.sending(key);
    let made: string | undefined;
    try {
      const written = await write();
      if (written.type === "written") {
        this.advance(key, mr.metadata.resourceVersion, written.resourceVersion);
        mr.metadata.resourceVersion = written.resourceVersion;
        made = written.resourceVersion;
      }
      return written;
    } finally {
      settle(made);
    }
  }
}
