// What our own writes did to each object: every resourceVersion they replaced and the one the last write made.
// A pass can write several times (finalizer, intent, final status), and the watch event of each write wakes the
// key; a cache still at any replaced version has not seen all of our writes yet, and acting on it would repeat
// work. Shared by the managed reconciler and the GpuVmPool reconciler.
import type { ManagedObject, ManagedStatusBase } from "./external.ts";
import type { KubeAccess, WriteResult } from "./reconcile-pass.ts";

interface Written {
  superseded: Set<string>;
  last: string;
}

export class OwnWrites {
  readonly #byKey = new Map<string, Written>();

  /**
   * The version our last write made when the cache shows one our writes replaced (the cache is behind); else
   * undefined, and the key is forgotten: at our last version, or at a later one somebody else wrote (our writes
   * are guarded by resourceVersion, so no foreign version falls between them), the cache has caught up.
   */
  behind(key: string, cachedVersion: string): string | undefined {
    const own = this.#byKey.get(key);
    if (own?.superseded.has(cachedVersion)) return own.last;
    this.#byKey.delete(key);
    return undefined;
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
    const written = await this.#kube.writeStatus(mr, status);
    if (written.type === "written") this.#moved(mr, written.resourceVersion);
    return written;
  }

  async setFinalizer(mr: ManagedObject, present: boolean): Promise<WriteResult> {
    const written = await this.#kube.setFinalizer(mr, present);
    if (written.type === "written") this.#moved(mr, written.resourceVersion);
    return written;
  }

  #moved(mr: ManagedObject, version: string): void {
    this.advance(`${mr.metadata.namespace}/${mr.metadata.name}`, mr.metadata.resourceVersion, version);
    mr.metadata.resourceVersion = version;
  }
}
