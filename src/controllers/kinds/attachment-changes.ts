// What a GpuDisk reads of its attachments (the account's disk list) changes when a VM attaches or detaches it.
// The shard that reconciles the VM learns it from the operation's settlement: it invalidates its own disk
// snapshot and wakes its own disks. A disk of another shard hears of it only through the GpuVm object, whose
// status.attachedDisks the VM's shard writes once the cloud shows the change. That status change is the
// evidence this file reads: the disks it names (before and after) are woken, and the disk list of their account
// is read afresh, so that ATTACHED converges as fast across shards as within one.
import { keyOf, type ObjectInformer } from "../../runtime/index.ts";
import { isRecord } from "../../util/is-record.ts";
import type { CloudAccount } from "../accounts/cloud-account.ts";
import { type CredentialStore, credentialsRefNameOf } from "../accounts/credentials.ts";
import type { ClaimStore } from "../managed/claims.ts";

export interface AttachmentChange {
  projectId: string;
  /** Disk ids attached before or after the change, but not both. */
  diskIds: string[];
}

/** The data disks a GpuVm's status says are attached, by id, and the project they belong to. */
function attachedOf(object: unknown): { projectId: string | undefined; ids: Set<string> } {
  const status = isRecord(object) && isRecord(object.status) ? object.status : undefined;
  const projectId = typeof status?.projectId === "string" ? status.projectId : undefined;
  const ids = new Set<string>();
  if (Array.isArray(status?.attachedDisks)) {
    for (const disk of status.attachedDisks) if (isRecord(disk) && typeof disk.id === "string") ids.add(disk.id);
  }
  return { projectId, ids };
}

/**
 * The disks whose attachment to this GpuVm changed between two versions of it (`current` undefined: it was
 * deleted); undefined when none did.
 */
export function attachmentChange(previous: unknown, current: unknown): AttachmentChange | undefined {
  const before = attachedOf(previous);
  const after = attachedOf(current);
  const projectId = after.projectId ?? before.projectId;
  if (projectId === undefined) return undefined;
  const diskIds = [...before.ids, ...after.ids].filter((id) => before.ids.has(id) !== after.ids.has(id));
  return diskIds.length === 0 ? undefined : { projectId, diskIds };
}

/**
 * Watches the GpuVms of other shards (`informer`, all GpuVms): a change of their attached disks invalidates the
 * account's disk list and wakes the GpuDisks that hold those disks (`wakeDisk`, by key). Our own GpuVms'
 * settlements do both already.
 */
export function watchForeignAttachments(options: {
  informer: ObjectInformer;
  /** Whether a key is this replica's shard's (runtime ownsKey). */
  ownsKey(key: string): boolean;
  credentials: CredentialStore<CloudAccount>;
  claims: Pick<ClaimStore, "ofId">;
  wakeDisk(key: string): void;
}): void {
  const { credentials, claims } = options;
  options.informer.on((event) => {
    const namespace = event.object.metadata?.namespace ?? "";
    if (options.ownsKey(keyOf(namespace, event.object.metadata?.name ?? ""))) return;
    const deleted = event.type === "delete";
    const change = attachmentChange(deleted ? event.object : event.previous, deleted ? undefined : event.object);
    if (change === undefined) return;
    const resolved = credentials.resolve(namespace, credentialsRefNameOf(event.object));
    if (resolved.type !== "ok" || resolved.handle.account.projectId !== change.projectId) return;
    const account = resolved.handle.account;
    account.disks.invalidate();
    for (const id of change.diskIds) {
      const holder = claims.ofId("GpuDisk", account, id)?.holder;
      if (holder !== undefined) options.wakeDisk(keyOf(holder.namespace, holder.name));
    }
  });
}
