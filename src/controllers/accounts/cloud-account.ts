// Everything the operator keeps per credential: the client, one list snapshot and one OperationTracker per
// family, and short caches of the project read (payment method) and of availability. Operations settle through
// the trackers' one list call per interval; each settlement invalidates its family's snapshot and wakes the
// keys that own the operation. An operation that changes another family as a side effect (a VM create, disk
// update or terminate attaches or detaches data disks) invalidates that family's snapshot too.

import type { Logger } from "pino";
import type { CloudClient } from "../../cloud/client.ts";
import { isCloudError, type OperationOutcome, OperationTracker, TrackerStoppedError } from "../../cloud/index.ts";
import type { Disk, FirewallRule, Operation, OperationFamily, VpcNetwork } from "../../cloud/wire.ts";
import { accountOf } from "./account.ts";
import { observeSettledResource } from "./settled-resources.ts";
import { FamilySnapshot } from "./snapshots.ts";
import { summarizeVm, type VmSummary } from "./vm-summary.ts";

export interface CloudAccountOptions {
  client: CloudClient;
  projectId: string;
  /** The API URL the client talks to (the Secret's apiUrl, or --api-url). */
  apiUrl: string;
  /** Non-secret identity of the credential (credentialKeyOf), for logs and metrics. */
  credentialKey: string;
  snapshotMaxAgeMs: number;
  /**
   * How often each family that is read lists itself in the background to see changes made outside the operator
   * (FamilySnapshot.pollEveryMs); off when undefined.
   */
  pollIntervalMs?: number;
  operationPollMs: number;
  /** How the trackers follow operations (default batched: one list per family per interval). */
  operationPolling?: "batched" | "per-operation";
  /**
   * Wake a key (enqueue it in the family's controller) when an operation it owns settles. `affected` names the
   * other families the operation changed as a side effect (their snapshots are already invalidated), so that
   * the objects related to the owner in those families can be woken too.
   */
  wake(family: OperationFamily, ownerKey: string, affected: readonly OperationFamily[]): void;
  /** Without a `component` binding: the account's lines add "cloud-account", its trackers "operation-tracker". */
  logger: Logger;
  now?: () => number;
  onListCall?(family: OperationFamily): void;
  /**
   * Resources of a family that are gone: deleted by an operation that settled, or missing from a new list.
   * Whoever holds them is woken at once instead of at its next resync.
   */
  onGone?(family: OperationFamily, ids: string[]): void;
  /** Resources of a family a list shows changed since they were last read: whoever holds them looks again. */
  onChanged?(family: OperationFamily, ids: string[]): void;
  onOperationSettled?(family: OperationFamily, name: string, result: string, durationMs: number): void;
  /**
   * Whether the VM snapshot holds the VM of this id when a full list shows it (default: every one). A shard's
   * replica holds its own objects' VMs (and unclaimed ones), and knows the others by name only.
   */
  holdsVm?(id: string): boolean;
}

/**
 * Progress of a cloud operation as the per-credential trackers know it. `vanished`: the server no longer knows
 * the id (taken as done; the resource tells the rest). `unreadable`: this server cannot show operations of the
 * family at all, so the resource itself must show when the operation is over.
 */
export type OperationProgress =
  | { state: "pending" }
  | { state: "settled"; operation: Operation; settledAt: number }
  | { state: "vanished"; settledAt: number }
  | { state: "unreadable"; settledAt: number };

const VM_PAGE_LIMIT = 500;
const PAYMENT_CACHE_MS = 5 * 60_000;
/** A known payment problem is re-read sooner: adding a payment method takes effect at the next retry. */
const PAYMENT_PROBLEM_CACHE_MS = 5_000;
const AVAILABILITY_CACHE_MS = 15_000;

/** The availability endpoint's answer for one (type, location). */
export interface AvailabilityReading {
  available: boolean;
  /** How many more VMs of the type fit now, when the server counts them (an extension; docs/api-contract.md). */
  count?: number;
}
/** Settled operations are remembered this long so that a slow reconcile still finds the result. */
const SETTLED_MEMORY_MS = 30 * 60_000;
/**
 * Once an owner's pass has read a settled result it records it in status; the result is kept a little longer
 * (a pass whose status write conflicted reads it again), not for SETTLED_MEMORY_MS: a burst's operations would
 * otherwise be held for half an hour.
 */
const READ_MEMORY_MS = 60_000;

/**
 * Operations that change another family as a side effect: a VM created with data disks, an UPDATE of its disks
 * and a terminate attach or detach disks (the disks' `attached_to` changes). An operation that vanished may have
 * been any of them.
 */
const SIDE_EFFECTS: Partial<Record<OperationFamily, { operations: ReadonlySet<string>; affects: OperationFamily[] }>> =
  {
    vm: { operations: new Set(["CREATE", "UPDATE", "DELETE"]), affects: ["disk"] },
  };

export function sideEffectsOf(family: OperationFamily, operationName: string | undefined): OperationFamily[] {
  const effects = SIDE_EFFECTS[family];
  if (effects === undefined) return [];
  return operationName === undefined || effects.operations.has(operationName) ? effects.affects : [];
}

/**
 * A settled operation as it is remembered (up to READ_MEMORY_MS after its owner read it): what the owner reads
 * (state, times, name, the error of a failure), without the request it was asked with nor the resource a success
 * answers with (a whole VM: at 10,000 VMs about a thousand of them are remembered at any moment of a burst).
 */
export function outcomeOf(operation: Operation): Operation {
  const { request: _request, ...metadata } = operation.metadata;
  return { ...operation, metadata, result: operation.state === "FAILED" ? operation.result : null };
}

interface Tracked {
  family: OperationFamily;
  owners: Set<string>;
  startedAt: number;
  progress: OperationProgress;
  /** When it is forgotten once settled (READ_MEMORY_MS after an owner read it, else SETTLED_MEMORY_MS). */
  forgetAt?: number;
}

export class CloudAccount {
  readonly client: CloudClient;
  readonly projectId: string;
  /** The client's base URL, normalised: with projectId, the account its resources are claimed in (managed/claims.ts). */
  readonly apiUrl: string;
  readonly credentialKey: string;
  /** VMs as the controllers read them (summarizeVm): the family may hold 10,000 and more. */
  readonly vms: FamilySnapshot<VmSummary>;
  readonly disks: FamilySnapshot<Disk>;
  readonly networks: FamilySnapshot<VpcNetwork>;
  readonly firewallRules: FamilySnapshot<FirewallRule>;
  readonly #options: CloudAccountOptions;
  /** This account's own lines; its trackers get `options.logger` and name their component themselves. */
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #trackers = new Map<OperationFamily, OperationTracker>();
  readonly #operations = new Map<string, Tracked>();
  /** Operations still pending, per family, with when tracking began: the gauges read these, not every one remembered. */
  readonly #pendingSince = new Map<OperationFamily, Map<string, number>>();
  /**
   * Settled operations in the order they are to be forgotten, one FIFO per memory length (each in time order):
   * forgetting costs O(1) per operation, not a scan of every remembered one at each settlement.
   */
  readonly #forgetQueues = { settled: [] as [string, number][], read: [] as [string, number][] };
  /** Per family, the first free turn of objects following their resources (see nextFollowTurnMs). */
  readonly #nextFollowTurnAt = new Map<OperationFamily, number>();
  #payment: { at: number; problem: string | undefined } | undefined;
  readonly #availability = new Map<string, { at: number; reading: AvailabilityReading }>();
  readonly #availabilityReads = new Map<string, { startedAt: number; read: Promise<AvailabilityReading> }>();
  #paymentRead: Promise<string | undefined> | undefined;

  constructor(options: CloudAccountOptions) {
    this.#options = options;
    this.#logger = options.logger.child({ component: "cloud-account" });
    this.#now = options.now ?? Date.now;
    this.client = options.client;
    this.projectId = options.projectId;
    this.apiUrl = accountOf(options.apiUrl, options.projectId).apiUrl;
    this.credentialKey = options.credentialKey;
    const { client, projectId } = options;
    const common = {
      maxAgeMs: options.snapshotMaxAgeMs,
      now: this.#now,
      ...(options.pollIntervalMs !== undefined ? { pollEveryMs: options.pollIntervalMs } : {}),
      onPollError: (error: unknown) => options.logger.debug({ err: error }, "background list failed"),
    };
    const changes = (family: OperationFamily) => (ids: string[]) => options.onChanged?.(family, ids);
    this.vms = new FamilySnapshot<VmSummary>({
      ...common,
      list: async function* (signal) {
        for await (const vm of client.vms.listAll(projectId, { limit: VM_PAGE_LIMIT }, { signal })) {
          yield summarizeVm(vm);
        }
      },
      listIds: async (ids, signal) =>
        (await client.vms.list(projectId, { ids, limit: ids.length }, { signal })).items.map(summarizeVm),
      idOf: (vm) => vm.id,
      nameOf: (vm) => vm.name,
      ...(options.holdsVm !== undefined ? { holds: (vm: VmSummary) => options.holdsVm?.(vm.id) !== false } : {}),
      onRefresh: () => options.onListCall?.("vm"),
      onVanished: (ids) => options.onGone?.("vm", ids),
      onChanged: changes("vm"),
    });
    this.disks = new FamilySnapshot<Disk>({
      ...common,
      list: (signal) => client.disks.list(projectId, { signal }),
      idOf: (disk) => disk.id,
      nameOf: (disk) => disk.name,
      onRefresh: () => options.onListCall?.("disk"),
      onVanished: (ids) => options.onGone?.("disk", ids),
      onChanged: changes("disk"),
    });
    this.networks = new FamilySnapshot<VpcNetwork>({
      ...common,
      list: (signal) => client.networks.list(projectId, { signal }),
      idOf: (network) => network.id,
      nameOf: (network) => network.name,
      onRefresh: () => options.onListCall?.("network"),
      onVanished: (ids) => options.onGone?.("network", ids),
      onChanged: changes("network"),
    });
    this.firewallRules = new FamilySnapshot<FirewallRule>({
      ...common,
      list: (signal) => client.firewallRules.list(projectId, { signal }),
      idOf: (rule) => rule.id,
      nameOf: (rule) => rule.name,
      onRefresh: () => options.onListCall?.("firewall-rule"),
      onVanished: (ids) => options.onGone?.("firewall-rule", ids),
      onChanged: changes("firewall-rule"),
    });
  }

  snapshotOf(family: OperationFamily): { invalidate(at?: number): void; settled(at: number): void } {
    switch (family) {
      case "vm":
        return this.vms;
      case "disk":
        return this.disks;
      case "network":
        return this.networks;
      case "firewall-rule":
        return this.firewallRules;
    }
  }

  /**
   * Where an operation stands; tracks it (one batched poll per family) and remembers who to wake. `startedAt`:
   * its `started_at` as the server gave it, when known (the settling list then reaches back seconds, not a minute).
   */
  operation(family: OperationFamily, operationId: string, ownerKey: string, startedAt?: string): OperationProgress {
    const known = this.#operations.get(operationId);
    if (known !== undefined) {
      known.owners.add(ownerKey);
      if (known.progress.state !== "pending") this.#forgetLater(operationId, known, "read");
      this.#forgetOldOperations();
      return known.progress;
    }
    const tracked: Tracked = {
      family,
      owners: new Set([ownerKey]),
      startedAt: this.#now(),
      progress: { state: "pending" },
    };
    this.#operations.set(operationId, tracked);
    const pendingSince = this.#pendingSince.get(family) ?? new Map<string, number>();
    this.#pendingSince.set(family, pendingSince);
    pendingSince.set(operationId, tracked.startedAt);
    const settled = (): boolean => pendingSince.delete(operationId);
    this.#trackerFor(family)
      .track(operationId, startedAt)
      .then(
        (outcome) => {
          settled();
          this.#settled(operationId, tracked, outcome);
        },
        (error: unknown) => {
          // Stopped tracker (credentials rotated, shutdown): forget it; the next reconcile tracks it again.
          settled();
          this.#operations.delete(operationId);
          if (!(error instanceof TrackerStoppedError))
            this.#logger.warn({ err: error, operationId }, "tracking failed");
        },
      );
    return tracked.progress;
  }

  /** An operation tracked for `tracked`'s owners ended: what they read, the snapshots it changed, who wakes. */
  #settled(operationId: string, tracked: Tracked, outcome: OperationOutcome): void {
    const family = tracked.family;
    // The operation was over when the call that showed it started: anything read after that shows it.
    const settledAt = outcome.vanished ? this.#now() : outcome.observedAt;
    // The server cannot show this family's operations: the owners follow their resources instead.
    const unreadable = outcome.vanished && outcome.reason === "unsupported";
    tracked.progress = !outcome.vanished
      ? { state: "settled", operation: outcomeOf(outcome.operation), settledAt }
      : { state: unreadable ? "unreadable" : "vanished", settledAt };
    this.#forgetLater(operationId, tracked, "settled");
    const name = outcome.vanished ? "UNKNOWN" : outcome.operation.metadata.operation_name;
    const result = !outcome.vanished ? outcome.operation.state : unreadable ? "unreadable" : "vanished";
    this.#options.onOperationSettled?.(family, name, result, settledAt - tracked.startedAt);
    // The owner asks for its resource as fresh as the settlement (notBefore): the operation's answer shows it
    // when it carries the resource (no list at all); else a large family that refreshes single resources by id
    // needs no full list for it (FamilySnapshot.settled).
    if (outcome.vanished || !observeSettledResource(this, family, outcome.operation, this.#now())) {
      this.snapshotOf(family).settled(settledAt);
    }
    const affected = sideEffectsOf(family, outcome.vanished ? undefined : name);
    // Coalesced: the next read of each affected snapshot lists once for every key that asks meanwhile.
    for (const other of affected) this.snapshotOf(other).invalidate(settledAt);
    for (const owner of tracked.owners) this.#options.wake(family, owner, affected);
    if (!outcome.vanished && name === "DELETE" && outcome.operation.state === "SUCCEEDED") {
      this.#options.onGone?.(family, [outcome.operation.metadata.id]);
    }
    this.#forgetOldOperations();
  }

  /**
   * The wait until the next turn of an object following an operation this server cannot show: turns are one
   * poll interval apart per family, so any number of waiting objects cost one read per interval per family.
   */
  nextFollowTurnMs(family: OperationFamily): number {
    const now = this.#now();
    const interval = this.#options.operationPollMs;
    const turn = Math.max(now + interval, this.#nextFollowTurnAt.get(family) ?? 0);
    this.#nextFollowTurnAt.set(family, turn + interval);
    return turn - now;
  }

  /**
   * The operations `name` the cloud lists for a resource (since `sinceMs` when given: whole seconds, so from one
   * second before), newest first. Empty when none is listed, or when this server cannot list the family's
   * operations.
   */
  async findOperations(
    family: OperationFamily,
    resourceId: string,
    name: string,
    sinceMs: number | undefined,
    signal?: AbortSignal,
  ): Promise<Operation[]> {
    const bound =
      sinceMs === undefined
        ? undefined
        : new Date(Math.floor(sinceMs / 1000) * 1000 - 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
    try {
      const operations = await this.client.operations.list(
        this.projectId,
        family,
        { resource_id: resourceId, ...(bound !== undefined ? { lower_time_bound: bound } : {}) },
        signal ? { signal } : {},
      );
      return operations
        .filter((op) => op.metadata.operation_name === name && op.metadata.id === resourceId)
        .sort((a, b) => Date.parse(b.started_at) - Date.parse(a.started_at));
    } catch (error) {
      if (isCloudError(error) && (error.status === 403 || error.status === 404 || error.kind === "unsupported")) {
        return [];
      }
      throw error;
    }
  }

  inFlight(family: OperationFamily): number {
    return this.#trackers.get(family)?.inFlight() ?? 0;
  }

  /** When this account began tracking its oldest operation of `family` still pending; undefined when none. */
  oldestInFlightSince(family: OperationFamily): number | undefined {
    let oldest: number | undefined;
    for (const startedAt of this.#pendingSince.get(family)?.values() ?? []) {
      if (oldest === undefined || startedAt < oldest) oldest = startedAt;
    }
    return oldest;
  }

  /**
   * A message with the billing link when the organization has no valid payment method; cached a while
   * (`fresh` skips the cache, e.g. after the cloud refused a create with 403).
   */
  async paymentProblem(signal: AbortSignal, options: { fresh?: boolean } = {}): Promise<string | undefined> {
    const cached = this.#payment;
    if (cached !== undefined && options.fresh !== true) {
      const ttl = cached.problem === undefined ? PAYMENT_CACHE_MS : PAYMENT_PROBLEM_CACHE_MS;
      if (this.#now() - cached.at < ttl) return cached.problem;
    }
    // Many keys asking at once share one project read.
    this.#paymentRead ??= this.#readPayment(signal).finally(() => {
      this.#paymentRead = undefined;
    });
    return this.#paymentRead;
  }

  async #readPayment(signal: AbortSignal): Promise<string | undefined> {
    const project = await this.client.projects.get(this.projectId, { signal });
    let problem: string | undefined;
    if (project.organization.hasValidPaymentMethod === false) {
      const organization = project.organization;
      let link = "";
      try {
        link = (await this.client.organizations.billingLink(organization.id, { signal })).url;
      } catch (error) {
        if (!isCloudError(error)) throw error;
        this.#logger.debug({ err: error }, "billing link unavailable");
      }
      problem = `organization ${organization.name} has no valid payment method${link ? `: add one at ${link}` : ""}`;
    }
    this.#payment = { at: this.#now(), problem };
    return problem;
  }

  /** Whether the location can take a VM of this type now (cached briefly; concurrent askers share one read). */
  async isAvailable(type: string, location: string, signal: AbortSignal): Promise<boolean> {
    return (await this.availability(type, location, signal)).available;
  }

  /**
   * What the availability endpoint says of (type, location): yes or no, and how many more VMs fit when the server
   * counts them. Cached briefly; concurrent askers share one read. `notBefore` (ms): only a reading started at or
   * after it will do (a pool that placed replicas there since needs one that sees them).
   */
  async availability(type: string, location: string, signal: AbortSignal, notBefore = 0): Promise<AvailabilityReading> {
    const key = `${type}@${location}`;
    const cached = this.#availability.get(key);
    if (cached !== undefined && cached.at >= notBefore && this.#now() - cached.at < AVAILABILITY_CACHE_MS)
      return cached.reading;
    const inFlight = this.#availabilityReads.get(key);
    if (inFlight !== undefined && inFlight.startedAt >= notBefore) return inFlight.read;
    const startedAt = this.#now();
    const read = this.#readAvailability(type, location, startedAt, signal).finally(() => {
      if (this.#availabilityReads.get(key)?.read === read) this.#availabilityReads.delete(key);
    });
    this.#availabilityReads.set(key, { startedAt, read });
    return read;
  }

  async #readAvailability(
    type: string,
    location: string,
    startedAt: number,
    signal: AbortSignal,
  ): Promise<AvailabilityReading> {
    const items = await this.client.catalogue.availabilities(
      this.projectId,
      { product_name: type, location },
      { signal },
    );
    const matching = items.filter((item) => item.type === type && item.location === location);
    // A server that answers nothing for the pair is not trusted to mean "unavailable": try the create.
    const available = matching.length === 0 || matching.some((item) => item.available);
    // A count is believed only when it agrees with the yes/no (a "yes" with 0 free says nothing usable).
    const counts = matching.flatMap((item) =>
      item.available && item.available_count !== undefined && item.available_count > 0 ? [item.available_count] : [],
    );
    const reading: AvailabilityReading =
      available && counts.length > 0 ? { available, count: Math.max(...counts) } : { available };
    // The cache keeps the time the read started: what was created after it may not be counted in it.
    const cached = this.#availability.get(`${type}@${location}`);
    if (cached === undefined || cached.at <= startedAt)
      this.#availability.set(`${type}@${location}`, { at: startedAt, reading });
    return reading;
  }

  /** Forget a cached "available" after a create failed out_of_stock there. */
  forgetAvailability(type: string, location: string): void {
    this.#availability.delete(`${type}@${location}`);
  }

  stop(): void {
    for (const tracker of this.#trackers.values()) tracker.stop();
    this.#trackers.clear();
    for (const snapshot of [this.vms, this.disks, this.networks, this.firewallRules]) snapshot.stop();
  }

  #trackerFor(family: OperationFamily): OperationTracker {
    let tracker = this.#trackers.get(family);
    if (tracker === undefined) {
      tracker = new OperationTracker({
        client: this.client,
        projectId: this.projectId,
        family,
        intervalMs: this.#options.operationPollMs,
        ...(this.#options.operationPolling ? { mode: this.#options.operationPolling } : {}),
        logger: this.#options.logger,
      });
      this.#trackers.set(family, tracker);
    }
    return tracker;
  }

  #forgetLater(operationId: string, tracked: Tracked, why: "settled" | "read"): void {
    const at = this.#now() + (why === "read" ? READ_MEMORY_MS : SETTLED_MEMORY_MS);
    if (tracked.forgetAt !== undefined && tracked.forgetAt <= at) return;
    tracked.forgetAt = at;
    this.#forgetQueues[why].push([operationId, at]);
  }

  #forgetOldOperations(): void {
    const now = this.#now();
    for (const queue of [this.#forgetQueues.settled, this.#forgetQueues.read]) {
      let expired = 0;
      for (const [id, at] of queue) {
        if (at > now) break;
        expired++;
        // A later entry (read after settling) or a new tracking of the same id decides for itself.
        const tracked = this.#operations.get(id);
        if (tracked?.forgetAt === at && tracked.progress.state !== "pending") this.#operations.delete(id);
      }
      if (expired > 0) queue.splice(0, expired);
    }
  }
}
