// Claims whose holder is gone are released. A holder lets its claim go when it is released (core/lifecycle.ts), but an
// object can go without us: its finalizer removed by hand, its namespace deleted while the operator was down.
// Such a claim would keep its cloud name (and resource) from everyone for ever. A claim is released only after
// the API server itself says its holder is gone (a live read: not found, or an object of that name with another
// uid), never because a cache lacks it.
import {
  type KubeClient,
  type KubeResource,
  keyOf,
  type Manager,
  type ObjectInformer,
  type Reconciler,
} from "../../runtime/index.ts";
import { CLAIMS_RESOURCE } from "./claim-records.ts";
import type { ClaimStore } from "./claims.ts";
import type { ManagedNote } from "./shard-view.ts";

export interface ClaimSweepOptions {
  claims: ClaimStore;
  claimsNamespace: string;
  /** The resource of each claimed kind, and its cache (a holder found there with its uid needs no read). */
  kinds: ReadonlyMap<
    string,
    { resource: KubeResource; cachedUid(namespace: string, name: string): string | undefined }
  >;
  kube: Pick<KubeClient, "listObjects">;
  /** Namespaces the operator watches (empty: all): a holder elsewhere is not ours to judge. */
  watchNamespaces: readonly string[];
}

export function claimSweepReconciler(options: ClaimSweepOptions): Reconciler {
  const { claims, kinds, kube, watchNamespaces } = options;
  return {
    async reconcile(request, ctx) {
      const claim = claims.get(request.name);
      if (claim === undefined) return { type: "done" };
      const { namespace, name, uid } = claim.holder;
      const kind = kinds.get(claim.kind);
      if (kind === undefined) return { type: "done" };
      if (watchNamespaces.length > 0 && !watchNamespaces.includes(namespace)) return { type: "done" };
      if (kind.cachedUid(namespace, name) === uid) return { type: "done" };
      // A list by name: the operator may list its kinds, not get them (deploy/rbac.yaml).
      const live = (await kube.listObjects(kind.resource, namespace, { fieldSelector: `metadata.name=${name}` })) as {
        metadata?: { uid?: string };
      }[];
      if (live.some((object) => object.metadata?.uid === uid)) return { type: "done" };
      await claims.release(claim);
      ctx.logger.info(
        { claim: claim.objectName, holder: `${namespace}/${name}`, id: claim.id, cloudName: claim.cloudName },
        "claim released: the object that held it is gone (its cloud resource, if any, is nobody's now)",
      );
      return { type: "done" };
    },
  };
}

/**
 * The sweep as a controller over the claims namespace (one worker: claims seldom need it), over the informers of
 * the claimed kinds (`kind` → its informer).
 */
export function registerClaimSweep(
  manager: Manager,
  claims: ClaimStore,
  informers: readonly { kind: string; informer: ObjectInformer }[],
): void {
  const config = manager.config;
  const kinds = new Map(
    informers.map(({ kind, informer }) => [
      kind,
      {
        resource: informer.resource,
        // Held, or (another shard's) only noted with its uid.
        cachedUid: (namespace: string, name: string) =>
          informer.get(namespace, name)?.metadata?.uid ??
          (informer.noteOf(namespace, name) as ManagedNote | undefined)?.uid,
      },
    ]),
  );
  const options = {
    claims,
    claimsNamespace: config.claimsNamespace,
    kinds,
    kube: manager.kube,
    watchNamespaces: config.watchNamespaces,
  };
  const controller = manager.addController({
    name: "gpucloudclaim",
    resource: CLAIMS_RESOURCE,
    namespaces: [config.claimsNamespace],
    reconciler: claimSweepReconciler(options),
    workers: 1,
    // No periodic look per claim (a queue deadline each, in every replica, for every cloud resource): every claim
    // is looked at when the operator starts (its informer's first list) and whenever it changes, and the claims of
    // a holder when the holder goes from a cache (held, or noted by another shard's view).
    syncPeriodMs: 0,
  });
  // The claims informer only notes its claims (claim-records.ts): their changes come as notes.
  manager.informerFor(CLAIMS_RESOURCE, [config.claimsNamespace]).onNote((event) => {
    controller.enqueue(keyOf(event.namespace, event.name));
  });
  const sweepHeldBy = (uid: string | undefined): void => {
    if (uid === undefined) return;
    for (const claim of claims.allHeldBy(uid)) controller.enqueue(keyOf(config.claimsNamespace, claim.objectName));
  };
  for (const { informer } of informers) {
    informer.on((event) => {
      if (event.type === "delete") sweepHeldBy(event.object.metadata?.uid);
    });
    informer.onNote((event) => {
      if (event.type === "delete") sweepHeldBy((event.previous as ManagedNote | undefined)?.uid);
    });
  }
}
