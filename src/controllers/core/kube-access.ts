// What a lifecycle needs from Kubernetes for the objects it reconciles: the cached object, guarded status and
// finalizer writes, events. A port (plain fakes in tests).
import type { ManagedObject, ManagedStatusBase } from "./object-model.ts";

/**
 * A guarded write: written, lost to another writer (409: re-read), gone, or refused (the API server rejected it,
 * or a value in it does not fit the CRD and cannot be shortened): `invalid` is a bug to report, never retried.
 */
export type WriteResult =
  | { type: "written"; resourceVersion: string }
  | { type: "conflict" }
  | { type: "gone" }
  | { type: "invalid"; message: string };

/** What the reconciler needs from Kubernetes (adapted onto the runtime in index.ts; plain fakes in tests). */
export interface KubeAccess {
  /** The object from the informer cache, unparsed. */
  get(namespace: string, name: string): unknown;
  writeStatus(mr: ManagedObject, status: ManagedStatusBase): Promise<WriteResult>;
  setFinalizer(mr: ManagedObject, present: boolean): Promise<WriteResult>;
  event(mr: ManagedObject, type: "Normal" | "Warning", reason: string, note: string): void;
}
