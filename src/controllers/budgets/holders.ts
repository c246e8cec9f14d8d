// What the budget reconciler (admission/budget-reconciler.ts) asks the controllers: what the cached GpuVms and
// GpuDisks bill (SpendInventory: positive evidence, counted as Used), and whether an object the ledger holds
// something for still needs it (HolderCheck), from a live read, never a cache. An entry is released only when its
// object is gone (its finalizer lets it go only once its resource is deleted or orphaned), or shows neither an
// intent, an operation in flight, nor a resource that bills; anything unclear keeps it (the safe side: it counts).
import type { KubernetesObject } from "@kubernetes/client-node";
import type { CheckVerdict, HolderCheck, InventoryItem, SpendInventory } from "../../admission/budget-reconciler.ts";
import type { PriceTable } from "../../admission/prices.ts";
import type { BudgetedKind, LedgerEntry } from "../../api/gpu-budget.ts";
import type { KubeClient, KubeResource } from "../../runtime/index.ts";
import { isRecord } from "../../util/is-record.ts";
import type { ManagedObject } from "../core/object-model.ts";
import type { ManagedCaches } from "../managed/caches.ts";
import { type ClaimStore, claimedKind } from "../managed/claims.ts";

const STOPPED = "STATE_STOPPED";

/** What an object's status says it bills now (undefined: nothing, or nothing known). */
export function billingOf(kind: BudgetedKind, status: Record<string, unknown>, prices: PriceTable) {
  if (typeof status.id !== "string") return undefined;
  if (kind === "GpuDisk") {
    return typeof status.sizeBytes === "number"
      ? { ...prices.disk(status.sizeBytes), purpose: "Running" as const }
      : undefined;
  }
  // A VM bills from its create to its deletion, but while it is stopped.
  if (typeof status.state !== "string" || status.state === STOPPED || typeof status.type !== "string") return undefined;
  const spend = prices.vm(status.type);
  return spend === undefined ? undefined : { ...spend, purpose: "Running" as const };
}

/** The namespace's GpuVms and GpuDisks as the caches show them, with what each bills. */
export function spendInventory(caches: ManagedCaches, prices: () => PriceTable): SpendInventory {
  const kinds: BudgetedKind[] = ["GpuVm", "GpuDisk"];
  return {
    objects(namespace) {
      if (!kinds.every((kind) => caches.informer(kind)?.hasSynced() ?? false)) return undefined;
      const table = prices();
      return kinds.flatMap((kind) =>
        caches.list(kind, namespace).map((object) => inventoryItemOf(kind, object, table)),
      );
    },
  };
}

export interface HolderCheckOptions {
  kube: Pick<KubeClient, "listObjects">;
  resources: Record<BudgetedKind, KubeResource>;
  claims: Pick<ClaimStore, "heldBy">;
}

/** The answers of live reads, by the rules in the header. */
export function holderCheck(options: HolderCheckOptions): HolderCheck {
  const { kube, resources, claims } = options;
  const read = async (kind: BudgetedKind, namespace: string, name: string, uid: string) => {
    // A list by name: the operator may list its kinds, not get them (deploy/rbac.yaml).
    const items = await kube.listObjects(resources[kind], namespace, { fieldSelector: `metadata.name=${name}` });
    return (items as KubernetesObject[]).find((item) => item.metadata?.uid === uid);
  };
  return {
    async entry(namespace, uid, entry) {
      let object: KubernetesObject | undefined;
      try {
        object = await read(entry.kind, namespace, entry.name, uid);
      } catch {
        return "unsure";
      }
      if (object === undefined) return "release";
      return needsEntry(entry, object, claims.heldBy(claimedKind(entry.kind), uid)?.id) ? "keep" : "release";
    },
    async waiter(namespace, uid, waiter) {
      try {
        return (await read(waiter.kind, namespace, waiter.name, uid)) === undefined ? "release" : "keep";
      } catch {
        return "unsure" satisfies CheckVerdict;
      }
    },
  };
}

/** Whether the live object still needs what its entry holds: an intent, an operation, a resource that bills. */
function needsEntry(entry: LedgerEntry, object: KubernetesObject, claimedId: string | undefined): boolean {
  const status = isRecord((object as { status?: unknown }).status)
    ? (object as { status: Record<string, unknown> }).status
    : {};
  if (status.createPending !== undefined || status.actionPending !== undefined) return true;
  if (isRecord(status.operation) && status.operation.state === "IN_PROGRESS") return true;
  const id = typeof status.id === "string" ? status.id : claimedId;
  if (id === undefined) return false;
  // A VM known stopped bills nothing; any other state (or none read yet) may bill.
  return !(entry.kind === "GpuVm" && status.state === STOPPED);
}

/**
 * An object as the inventory sees it. One being deleted shows no billing: its status stops being written while its
 * resource goes, and its entry is released when it is let go; counting its last status would bring it back.
 */
export function inventoryItemOf(kind: BudgetedKind, object: ManagedObject, prices: PriceTable): InventoryItem {
  const deleting = object.metadata.deletionTimestamp !== undefined;
  return {
    kind,
    name: object.metadata.name,
    uid: object.metadata.uid,
    labels: object.metadata.labels,
    billing: deleting ? undefined : billingOf(kind, object.status, prices),
  };
}
