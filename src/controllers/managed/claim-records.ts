// GpuCloudClaims as Kubernetes objects: the claim store's records (claims.ts) on the runtime's KubeClient, and
// the parse of an informer object into a Claim. Every write is create-only or guarded (uid or resourceVersion).

import type { KubernetesObject, V1ObjectMeta } from "@kubernetes/client-node";
import {
  CLAIM_LABELS,
  claimNameOf,
  GpuCloudClaimSpec,
  gpuCloudClaimKind,
  resourceIdLabel,
} from "../../api/gpu-cloud-claim.ts";
import type { KubeClient, KubeResource, Manager } from "../../runtime/index.ts";
import { isRecord } from "../../util/is-record.ts";
import { sameJson } from "../../util/json-values.ts";
import type { Account } from "../accounts/account.ts";
import { resourceOf } from "../core/kube-access.ts";
import { type Claim, type ClaimRecords, ClaimStore, type ClaimWrite, type Holder } from "./claims.ts";

export const CLAIMS_RESOURCE: KubeResource = resourceOf(gpuCloudClaimKind);

/** An informer object (or an API answer) as a Claim; undefined when it is not a well-formed claim. */
export function claimOfObject(raw: unknown): Claim | undefined {
  if (!isRecord(raw) || !isRecord(raw.metadata)) return undefined;
  const { name, uid, resourceVersion } = raw.metadata;
  if (typeof name !== "string" || typeof uid !== "string" || typeof resourceVersion !== "string") return undefined;
  const spec = GpuCloudClaimSpec.safeParse(raw.spec);
  if (!spec.success) return undefined;
  const { id, holder: parsedHolder, ...slot } = spec.data;
  // A claim whose name is not its slot's was not made by the operator: it reserves nothing.
  if (claimNameOf(slot) !== name) return undefined;
  // The object's own holder where it is exactly the parsed one: the record shares it rather than a copy.
  const rawHolder = (raw.spec as { holder: unknown }).holder;
  const holder = sameJson(rawHolder, parsedHolder) ? (rawHolder as Holder) : parsedHolder;
  return { ...slot, objectName: name, uid, resourceVersion, holder, ...(id !== undefined ? { id } : {}) };
}

/**
 * What the claims informer keeps of a claim object: what claimOfObject reads and what the informer and the
 * sweep's queue need (name, namespace, uid, version, deletion, generation) and the spec. Labels serve the API
 * server's selectors only; every replica caches every claim, one per cloud resource.
 */
export function keepClaimRecord(object: KubernetesObject): void {
  const metadata = object.metadata;
  if (metadata === undefined) return;
  const kept: Record<string, unknown> = {};
  for (const field of CLAIM_METADATA_KEPT) if (metadata[field] !== undefined) kept[field] = metadata[field];
  object.metadata = kept as V1ObjectMeta;
}

const CLAIM_METADATA_KEPT = [
  "name",
  "namespace",
  "uid",
  "resourceVersion",
  "generation",
  "deletionTimestamp",
  "finalizers",
] as const satisfies readonly (keyof V1ObjectMeta)[];

function labelsOf(holder: Holder, id: string | undefined): Record<string, string> {
  return {
    "app.kubernetes.io/managed-by": "gpuvm-operator",
    [CLAIM_LABELS.holderUid]: holder.uid,
    [CLAIM_LABELS.holderNamespace]: holder.namespace,
    ...(id !== undefined ? { [CLAIM_LABELS.resourceId]: resourceIdLabel(id) } : {}),
  };
}

function parsedOrThrow(raw: unknown, what: string): Claim {
  const claim = claimOfObject(raw);
  if (claim === undefined) throw new Error(`the API server answered a malformed GpuCloudClaim to ${what}`);
  return claim;
}

/** The claims of the operator's namespace, read and written through the KubeClient. */
export function kubeClaimRecords(kube: KubeClient, namespace: string): ClaimRecords {
  return {
    async create(slot, holder) {
      const name = claimNameOf(slot);
      const body = {
        apiVersion: gpuCloudClaimKind.apiVersion,
        kind: gpuCloudClaimKind.kind,
        metadata: { name, namespace, labels: labelsOf(holder, undefined) },
        spec: { ...slot, holder },
      };
      const created = await kube.createObject(CLAIMS_RESOURCE, namespace, body);
      if (created.type === "exists") return created;
      return { type: "created", claim: parsedOrThrow(created.object, `the create of ${name}`) };
    },
    async get(objectName) {
      const raw = await kube.getObject(CLAIMS_RESOURCE, namespace, objectName);
      return raw === undefined ? undefined : claimOfObject(raw);
    },
    async setId(claim, id): Promise<ClaimWrite> {
      const patch = {
        metadata: {
          resourceVersion: claim.resourceVersion,
          labels: { [CLAIM_LABELS.resourceId]: id === undefined ? null : resourceIdLabel(id) },
        },
        spec: { id: id ?? null },
      };
      const written = await kube.patchObject(CLAIMS_RESOURCE, namespace, claim.objectName, patch);
      if (written.type === "conflict") return { type: "conflict" };
      if (written.type === "notFound") return { type: "gone" };
      if (written.type === "unchanged") return { type: "written", claim };
      return { type: "written", claim: parsedOrThrow(written.object, `the id write of ${claim.objectName}`) };
    },
    delete(claim) {
      return kube.deleteObject(CLAIMS_RESOURCE, namespace, claim.objectName, claim.uid);
    },
    async listById(kind, account: Account, id) {
      const selector = `${CLAIM_LABELS.resourceId}=${resourceIdLabel(id)}`;
      const items = await kube.listObjects(CLAIMS_RESOURCE, namespace, { labelSelector: selector });
      return items
        .flatMap((raw) => claimOfObject(raw) ?? [])
        .filter(
          (claim) => claim.kind === kind && claim.apiUrl === account.apiUrl && claim.projectId === account.projectId,
        );
    },
  };
}

/**
 * The claim store of the operator's namespace, fed by the claims informer; `wake` is told the keys that stopped on a
 * claim when it changes or goes. The informer holds no claim object: each claim is noted as its parsed Claim, the
 * very object the store holds (every replica keeps every claim, one per cloud resource: one copy, not two).
 */
export function watchClaims(
  manager: Manager,
  namespace: string,
  wake: (kind: string, key: string) => void,
): ClaimStore {
  const claims = new ClaimStore(kubeClaimRecords(manager.kube, namespace), { wake });
  manager.setTransform(CLAIMS_RESOURCE, keepClaimRecord);
  manager.setView(CLAIMS_RESOURCE, { keep: () => false, note: (object) => claimOfObject(object) ?? null });
  manager.informerFor(CLAIMS_RESOURCE, [namespace]).onNote((event) => {
    if (event.type === "delete") claims.remove(event.name);
    else if (event.note !== null && event.note !== undefined) claims.upsert(event.note as Claim);
  });
  return claims;
}
