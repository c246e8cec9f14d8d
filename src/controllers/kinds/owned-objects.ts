// The Secrets and ConfigMaps an object writes (a GpuVm's connection details, spec.connectionDetails): created or
// updated only where the object owns them (its owner reference), and deleted with it. One that exists without the
// object's owner reference (someone's database password, say) is never written: the object stalls and says so.
import { API_VERSION, SECRET_WATCH_LABEL } from "../../api/common.ts";
import type { Manager } from "../../runtime/index.ts";
import type { ManagedObject } from "../core/object-model.ts";
import type { OwnedObject } from "../managed/external.ts";

/**
 * The labels on every Secret/ConfigMap the operator writes; the watch label keeps them in the (label-selected)
 * Secret cache, so that an unchanged value costs no request.
 */
const MANAGED_BY = { "app.kubernetes.io/managed-by": "gpuvm-operator", [SECRET_WATCH_LABEL]: "true" };

/** What the operator reads of a Secret or ConfigMap it may have written. */
export interface OwnableObject {
  metadata?: { uid?: string; ownerReferences?: { uid?: string }[]; labels?: Record<string, string> };
  data?: Record<string, string>;
}

/** Written by this object: it carries an owner reference to it (the label alone could be copied). */
function ownedBy(object: OwnableObject, owner: ManagedObject): boolean {
  return (object.metadata?.ownerReferences ?? []).some((reference) => reference.uid === owner.metadata.uid);
}

/**
 * Create or update the Secret/ConfigMap holding a VM's connection details, owned by the GpuVm (owner reference
 * and label). One that exists without our owner reference (someone's database password, say) is never written:
 * the answer says so and the GpuVm stalls.
 */
export async function publishConnectionDetails(
  manager: Manager,
  kind: "Secret" | "ConfigMap",
  owner: ManagedObject,
  name: string,
  data: Record<string, string>,
  cached: OwnableObject | undefined,
): Promise<string | undefined> {
  const namespace = owner.metadata.namespace;
  const ownerReferences = [
    {
      apiVersion: owner.apiVersion || API_VERSION,
      kind: owner.kind || "GpuVm",
      name: owner.metadata.name,
      uid: owner.metadata.uid,
      controller: true,
      blockOwnerDeletion: false,
    },
  ];
  const metadata = { name, namespace, ownerReferences, labels: MANAGED_BY };
  const wanted =
    kind === "Secret"
      ? Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString("base64")]))
      : data;
  // The informer cache answers "unchanged" without a request; a cache miss reads once before creating.
  if (cached !== undefined && ownedBy(cached, owner) && sameData(cached.data, wanted)) return undefined;
  const existing =
    cached ??
    (kind === "Secret"
      ? await manager.kube.getSecret(namespace, name)
      : await manager.kube.getConfigMap(namespace, name));
  if (existing !== undefined && !ownedBy(existing, owner)) {
    const field = kind === "Secret" ? "secretName" : "configMapName";
    return `${kind} ${namespace}/${name} exists and was not written by this GpuVm: it is left as it is. Choose another spec.connectionDetails.${field}, or delete that ${kind} if it is not needed`;
  }
  if (existing === undefined) {
    if (kind === "Secret") await manager.kube.createSecret(namespace, { metadata, data: wanted, type: "Opaque" });
    else await manager.kube.createConfigMap(namespace, { metadata, data: wanted });
  } else if (!sameData(existing.data, wanted) || existing.metadata?.labels?.[SECRET_WATCH_LABEL] !== "true") {
    // Written before the watch label existed: the label comes with the next write.
    const patch = { metadata: { labels: MANAGED_BY }, data: wanted };
    if (kind === "Secret") await manager.kube.patchSecret(namespace, name, patch);
    else await manager.kube.patchConfigMap(namespace, name, patch);
  }
  return undefined;
}

/** Delete what an object wrote (when it still carries the object's owner reference). */
export async function deleteOwnedObjects(
  manager: Manager,
  owner: ManagedObject,
  objects: readonly OwnedObject[],
  cachedOf: (kind: "Secret" | "ConfigMap", namespace: string, name: string) => OwnableObject | undefined,
): Promise<void> {
  const namespace = owner.metadata.namespace;
  for (const { kind, name } of objects) {
    const existing =
      cachedOf(kind, namespace, name) ??
      (kind === "Secret"
        ? await manager.kube.getSecret(namespace, name)
        : await manager.kube.getConfigMap(namespace, name));
    const uid = existing?.metadata?.uid;
    if (existing === undefined || uid === undefined || !ownedBy(existing, owner)) continue;
    await manager.kube.deleteOwned(kind, namespace, name, uid);
  }
}

function sameData(a: Record<string, string> | undefined, b: Record<string, string>): boolean {
  const left = a ?? {};
  return Object.keys(b).length === Object.keys(left).length && Object.entries(b).every(([k, v]) => left[k] === v);
}
