// The Leases of every shard set of one leader election, as this replica sees them (one list of the election
// namespace's Leases per look): which are held, and for which shard count. A Lease counts as held while it names
// a holder and has changed within its own duration, measured on our clock from when we first saw it at that
// version (as the elector measures expiry: clock skew between nodes does not matter; a Lease first seen counts
// as held for a whole duration). It answers two questions:
// - why this replica must stand by: a Lease of another shard count is held, i.e. another set divides the objects
//   differently (a `helm upgrade` of the shard count starts the new set beside the old one); the elector asks
//   before and right after acquiring, so two sets never both lead (sharding.ts, leader-election.ts `mayLead`);
// - whether an object has an owner: some held set's Lease covers its shard (gpucloud_operator_objects_without_owner),
//   and which shards of this set have had no leader for a while (their objects' stale Synced is corrected).
import type { KubeConfig } from "@kubernetes/client-node";
import { z } from "zod";
import { kubeRequest } from "./kube-http.ts";
import { type Shard, shardOfKey, shardOfLease } from "./sharding.ts";
import { type Clock, systemClock } from "./time.ts";

const LeaseList = z.object({
  items: z.array(
    z.object({
      metadata: z.looseObject({ name: z.string(), resourceVersion: z.string().optional() }),
      spec: z
        .looseObject({ holderIdentity: z.string().nullish(), leaseDurationSeconds: z.number().nullish() })
        .optional(),
    }),
  ),
});

/** A Lease of this election that is held now. `count` undefined: named by a version without the count. */
export interface HeldShardLease {
  name: string;
  holder: string;
  index: number;
  count: number | undefined;
}

export interface ShardLeasesOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  leaderElectionId: string;
  /** This replica's shard (count 1 without sharding). */
  shard: Shard;
  clock?: Clock;
}

const DEFAULT_LEASE_SECONDS = 15;

export class ShardLeases {
  readonly #options: ShardLeasesOptions;
  readonly #clock: Clock;
  readonly #path: string;
  /** Lease name → the version last seen and when it was first seen at that version. */
  readonly #seen = new Map<string, { version: string; since: number }>();
  #held: HeldShardLease[] | undefined;
  /** Shard index of this replica's count → since when no held Lease has covered it. */
  readonly #leaderlessSince = new Map<number, number>();

  constructor(options: ShardLeasesOptions) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#path = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(options.namespace)}/leases`;
  }

  /** Lists the namespace's Leases and keeps those of this election that are held. */
  async refresh(signal?: AbortSignal): Promise<void> {
    const answer = LeaseList.parse(
      await kubeRequest(this.#options.kubeConfig, "GET", this.#path, signal ? { signal } : {}),
    );
    const now = this.#clock.now();
    const held: HeldShardLease[] = [];
    const names = new Set<string>();
    for (const lease of answer.items) {
      const name = lease.metadata.name;
      const shard = shardOfLease(this.#options.leaderElectionId, name);
      if (shard === undefined) continue;
      names.add(name);
      const version = lease.metadata.resourceVersion ?? "";
      let seen = this.#seen.get(name);
      if (seen?.version !== version) {
        seen = { version, since: now };
        this.#seen.set(name, seen);
      }
      const holder = lease.spec?.holderIdentity ?? "";
      const durationMs = (lease.spec?.leaseDurationSeconds ?? DEFAULT_LEASE_SECONDS) * 1000;
      if (holder !== "" && now - seen.since < durationMs)
        held.push({ name, holder, index: shard.index, count: shard.count });
    }
    for (const name of this.#seen.keys()) if (!names.has(name)) this.#seen.delete(name);
    this.#held = held;
    const { count } = this.#options.shard;
    for (let index = 0; index < count; index++) {
      const led = held.some((lease) => lease.count === count && lease.index === index);
      if (led) this.#leaderlessSince.delete(index);
      else if (!this.#leaderlessSince.has(index)) this.#leaderlessSince.set(index, now);
    }
  }

  /** Shards of this replica's count whose Lease nobody has held for at least `ms` (as of the last refresh). */
  leaderlessFor(ms: number): number[] {
    const now = this.#clock.now();
    return [...this.#leaderlessSince].filter(([, since]) => now - since >= ms).map(([index]) => index);
  }

  /** The lowest shard of this replica's count whose Lease is held: its leader speaks for the set. */
  lowestLedShard(): number | undefined {
    const count = this.#options.shard.count;
    const led = (this.#held ?? []).filter((lease) => lease.count === count).map((lease) => lease.index);
    return led.length === 0 ? undefined : Math.min(...led);
  }

  /** The held Leases as of the last refresh (undefined before the first). */
  get held(): readonly HeldShardLease[] | undefined {
    return this.#held;
  }

  /** Held Leases of another shard count (or of a version that did not name the count). */
  rivals(): HeldShardLease[] {
    const count = this.#options.shard.count;
    return (this.#held ?? []).filter((lease) => lease.count !== count);
  }

  /** Looks again; why this replica must stand by (another shard set holds a Lease), or undefined. */
  async rivalReason(signal?: AbortSignal): Promise<string | undefined> {
    await this.refresh(signal);
    const rivals = this.rivals();
    if (rivals.length === 0) return undefined;
    const { index, count } = this.#options.shard;
    const named = rivals.map((lease) => `${lease.name} (held by ${lease.holder})`).join(", ");
    return `another shard set holds ${named}; this replica (shard ${index} of ${count}) waits until that set has stopped: two sets of different counts would both own some objects`;
  }

  /**
   * Whether some held set's Lease covers the key's shard in that set (every set counts: during a hand-over the
   * old set still owns its objects). Undefined before the first refresh.
   */
  isOwned(key: string): boolean | undefined {
    const held = this.#held;
    if (held === undefined) return undefined;
    const legacyCount = 1 + Math.max(-1, ...held.filter((lease) => lease.count === undefined).map((l) => l.index));
    for (const lease of held) {
      const count = lease.count ?? legacyCount;
      if (shardOfKey(key, count) === lease.index) return true;
    }
    return false;
  }
}
