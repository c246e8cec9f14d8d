// Who looks again when something outside an object's own events changed: the holder of a resource a list showed
// gone or changed, the owner of a settled operation (first, in the `high` lane) and the objects its side effects
// touched (a VM attaching or detaching disks), found through the claims and the dependency index. Every wake only
// enqueues a key in its kind's controller.
import type { OperationFamily } from "../../cloud/wire.ts";
import { type Controller, keyOf, parseKey } from "../../runtime/index.ts";
import { isRecord } from "../../util/is-record.ts";
import type { Account } from "../accounts/account.ts";
import type { AccountWakes } from "../accounts/account-store.ts";
import type { ManagedSpecBase } from "../core/object-model.ts";
import type { ManagedCaches } from "./caches.ts";
import { type ClaimStore, claimedKind } from "./claims.ts";
import type { DependencyIndex } from "./dependency-index.ts";
import type { KindDefinition } from "./external.ts";

/** Whether an object's status records a cloud operation still in progress (its settlement wakes the object). */
function operationInFlight(object: unknown): boolean {
  const status = isRecord(object) && isRecord(object.status) ? object.status : undefined;
  return isRecord(status?.operation) && status.operation.state === "IN_PROGRESS";
}

export class ManagedWakes implements AccountWakes {
  readonly #controllers: ReadonlyMap<string, Controller>;
  readonly #caches: ManagedCaches;
  readonly #claims: ClaimStore;
  readonly #dependencies: DependencyIndex;
  readonly #kindOfFamily: ReadonlyMap<OperationFamily, string>;

  /** `controllers`: by kind, filled as they are registered (a wake before that enqueues nothing). */
  constructor(options: {
    kinds: readonly Pick<KindDefinition<ManagedSpecBase>, "info" | "family">[];
    controllers: ReadonlyMap<string, Controller>;
    caches: ManagedCaches;
    claims: ClaimStore;
    dependencies: DependencyIndex;
  }) {
    this.#controllers = options.controllers;
    this.#caches = options.caches;
    this.#claims = options.claims;
    this.#dependencies = options.dependencies;
    this.#kindOfFamily = new Map(options.kinds.map((kind) => [kind.family, kind.info.kind]));
  }

  #enqueue(kind: string, key: string, priority?: "high" | "normal"): void {
    this.#controllers.get(kind)?.enqueue(key, priority);
  }

  /**
   * The objects holding cloud resources that a list showed gone or changed look again now. One with an
   * operation in flight is left to the operation's settlement, which wakes it (a list during a burst shows many
   * resources moving through their own operations).
   */
  holders(family: OperationFamily, account: Account, ids: string[], priority: "high" | "normal"): void {
    const kind = this.#kindOfFamily.get(family);
    const informer = kind === undefined ? undefined : this.#caches.informer(kind);
    if (kind === undefined || informer === undefined) return;
    for (const id of ids) {
      const holder = this.#claims.ofId(claimedKind(kind), account, id)?.holder;
      if (holder === undefined) continue;
      if (priority === "normal" && operationInFlight(informer.get(holder.namespace, holder.name))) continue;
      this.#enqueue(kind, keyOf(holder.namespace, holder.name), priority);
    }
  }

  /**
   * An operation finished: the key that owns it goes first (fair progress under a backlog of creates). A side
   * effect on another family (a VM attached or detached its disks): the owner's targets of that kind, now and
   * before, refresh their status from the invalidated snapshot instead of at the resync.
   */
  settled(family: OperationFamily, ownerKey: string, affected: readonly OperationFamily[]): void {
    const kind = this.#kindOfFamily.get(family);
    if (kind === undefined) return;
    this.#enqueue(kind, ownerKey, "high");
    const { namespace, name } = parseKey(ownerKey);
    for (const other of affected) {
      const otherKind = this.#kindOfFamily.get(other);
      if (otherKind === undefined) continue;
      for (const key of this.#dependencies.targets(kind, namespace, name, otherKind)) this.#enqueue(otherKind, key);
    }
  }

  /**
   * Every object whose credentials are `secret` (found by `secretFor`, the credential store's rule) looks again:
   * the default Secret changed, and its users live in other namespaces, which the per-namespace dependency index
   * does not connect to it.
   */
  usersOfSecret(
    secret: { namespace: string; name: string },
    secretFor: (namespace: string, refName: string | undefined) => { namespace: string; name: string } | undefined,
  ): void {
    for (const kind of this.#kindOfFamily.values()) {
      for (const object of this.#caches.list(kind)) {
        const used = secretFor(object.metadata.namespace, object.spec.credentialsRef?.name);
        if (used?.namespace === secret.namespace && used.name === secret.name) {
          this.#enqueue(kind, keyOf(object.metadata.namespace, object.metadata.name));
        }
      }
    }
  }
}
