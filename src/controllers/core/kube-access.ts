// What a lifecycle needs from Kubernetes for the objects it reconciles: the cached object, guarded status and
// finalizer writes, events. A port (plain fakes in tests), and its adapter onto the runtime's KubeClient.

import { FINALIZER } from "../../api/common.ts";
import type { KindInfo } from "../../api/kind-info.ts";
import { KubeApiError, type KubeResource, type Manager } from "../../runtime/index.ts";
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

/** What the reconciler needs from Kubernetes (adapted onto the runtime by kubeAccessFor; plain fakes in tests). */
export interface KubeAccess {
  /** The object from the informer cache, unparsed. */
  get(namespace: string, name: string): unknown;
  writeStatus(mr: ManagedObject, status: ManagedStatusBase): Promise<WriteResult>;
  setFinalizer(mr: ManagedObject, present: boolean): Promise<WriteResult>;
  event(mr: ManagedObject, type: "Normal" | "Warning", reason: string, note: string): void;
}

/** The Kubernetes resource of a kind, as its descriptor in src/api names it. */
export function resourceOf(info: Pick<KindInfo, "group" | "version" | "plural" | "kind">): KubeResource {
  return { group: info.group, version: info.version, plural: info.plural, kind: info.kind, namespaced: true };
}

type PatchResult = Awaited<ReturnType<Manager["kube"]["patchStatus"]>>;

/** The result of a guarded patch as a WriteResult ("unchanged" keeps the version the object had). */
function writeResultOf(mr: ManagedObject, result: PatchResult): WriteResult {
  switch (result.type) {
    case "written":
      return {
        type: "written",
        resourceVersion: result.object.metadata?.resourceVersion ?? mr.metadata.resourceVersion,
      };
    case "unchanged":
      return { type: "written", resourceVersion: mr.metadata.resourceVersion };
    case "conflict":
      return { type: "conflict" };
    case "notFound":
      return { type: "gone" };
  }
}

/** KubeAccess for the objects of `resource` on the runtime: writes guarded by resourceVersion, Events recorded. */
export function kubeAccessFor(
  manager: Manager,
  resource: KubeResource,
  get: (namespace: string, name: string) => unknown,
): KubeAccess {
  const envelope = (mr: ManagedObject) => ({
    apiVersion: mr.apiVersion || `${resource.group}/${resource.version}`,
    kind: mr.kind || resource.kind,
    metadata: {
      namespace: mr.metadata.namespace,
      name: mr.metadata.name,
      uid: mr.metadata.uid,
      resourceVersion: mr.metadata.resourceVersion,
      finalizers: mr.metadata.finalizers,
    },
    status: mr.status,
  });
  return {
    get,
    writeStatus: async (mr, status) => {
      try {
        return writeResultOf(mr, await manager.kube.patchStatus(resource, envelope(mr), status));
      } catch (error) {
        // 422 (or 400): the API server refused the status. A bug on our side; the reconciler stalls loudly.
        if (error instanceof KubeApiError && (error.status === 422 || error.status === 400)) {
          return { type: "invalid", message: error.message };
        }
        throw error;
      }
    },
    setFinalizer: async (mr, present) =>
      writeResultOf(
        mr,
        present
          ? await manager.kube.addFinalizer(resource, envelope(mr), FINALIZER)
          : await manager.kube.removeFinalizer(resource, envelope(mr), FINALIZER),
      ),
    event: (mr, type, reason, note) =>
      manager.events.record(envelope(mr), { type, reason, note, action: type === "Warning" ? "Reconcile" : reason }),
  };
}
