// Leader election on a coordination.k8s.io/v1 Lease, after client-go's leaderelection package: acquire when the
// Lease is free or its holder has not renewed it for leaseDuration (measured on our own clock from when we saw it
// change, so clock skew between nodes does not matter), renew every retryPeriod, and give up leadership when
// renewing has failed for renewDeadline. Writes are replace-with-resourceVersion, so two candidates never both win.
// The fence (`holdsLease`): a leader may act only until renewDeadline after the start of its last successful
// renewal, checked synchronously by every write (runtime/fencing.ts); a standby takes over leaseDuration after it
// last saw the Lease change, so the difference is the margin for a write in flight. A candidate may also be told
// to stand by while a rival holds another Lease (`mayLead`: shard sets of another count, sharding.ts).
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { z } from "zod";
import { kubeRequest } from "./kube-http.ts";
import type { Metrics } from "./metrics.ts";
import { statusOf, toKubeApiError } from "./status.ts";
import { type Clock, formatMicroTime, jitter, parseKubeTime, sleep, systemClock } from "./time.ts";

/** The part of a coordination.k8s.io/v1 Lease the election reads; the rest of metadata is sent back as it was. */
const Lease = z.object({
  metadata: z.looseObject({ resourceVersion: z.string().optional() }).optional(),
  spec: z
    .looseObject({
      holderIdentity: z.string().nullish(),
      leaseDurationSeconds: z.number().nullish(),
      acquireTime: z.string().nullish(),
      renewTime: z.string().nullish(),
      leaseTransitions: z.number().nullish(),
    })
    .optional(),
});
type Lease = z.infer<typeof Lease>;

/**
 * The Lease's three calls as plain JSON requests (kube-http.ts): client-node's generated CoordinationV1Api would
 * load every generated API and model with it (see kube-client-loading.ts).
 */
class LeaseClient {
  readonly #kubeConfig: KubeConfig;
  readonly #path: string;
  readonly #collection: string;

  constructor(kubeConfig: KubeConfig, namespace: string, name: string) {
    this.#kubeConfig = kubeConfig;
    this.#collection = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases`;
    this.#path = `${this.#collection}/${encodeURIComponent(name)}`;
  }

  async read(): Promise<Lease> {
    return Lease.parse(await kubeRequest(this.#kubeConfig, "GET", this.#path));
  }

  async create(body: object): Promise<Lease> {
    return Lease.parse(await kubeRequest(this.#kubeConfig, "POST", this.#collection, { body }));
  }

  async replace(body: object): Promise<Lease> {
    return Lease.parse(await kubeRequest(this.#kubeConfig, "PUT", this.#path, { body }));
  }
}

const microTime = (ms: number): string => formatMicroTime(new Date(ms));

export interface LeaderElectorOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  /** Lease name (--leader-election-id). */
  name: string;
  /** This candidate's identity, unique per process (hostname + random suffix). */
  identity: string;
  logger: Logger;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  clock?: Clock;
  metrics?: Metrics;
  /**
   * Asked before each attempt to acquire the Lease and again right after one succeeded, before leading: a reason
   * to stand by (a rival holds another Lease), or undefined. Refused after acquiring, the Lease is released.
   */
  mayLead?: () => Promise<string | undefined>;
  /** Called once each time this candidate becomes leader. */
  onStartedLeading: () => void;
  /** Called once each time leadership is lost or released. Must stop work at once. */
  onStoppedLeading: () => void;
  onNewLeader?: (identity: string) => void;
}

type Attempt = "leading" | "held-by-other" | "failed";

export class LeaderElector {
  readonly #options: LeaderElectorOptions;
  readonly #api: LeaseClient;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #leaseDurationMs: number;
  readonly #renewDeadlineMs: number;
  readonly #retryPeriodMs: number;
  #leading = false;
  /** Until when (clock ms) this leader may act: renewDeadline after the start of its last successful renewal. */
  #actUntil = 0;
  /** Set while releasing the Lease at stop: nothing may be written any more. */
  #releasing = false;
  #standingByFor: string | undefined;
  #observedVersion: string | undefined;
  #observedAt = 0;
  #lastHolder: string | undefined;
  #stop = new AbortController();
  #loop: Promise<void> | undefined;

  constructor(options: LeaderElectorOptions) {
    this.#options = options;
    this.#api = new LeaseClient(options.kubeConfig, options.namespace, options.name);
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger.child({ lease: `${options.namespace}/${options.name}`, identity: options.identity });
    this.#leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.#renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.#retryPeriodMs = options.retryPeriodMs ?? 2_000;
    if (!(this.#leaseDurationMs > this.#renewDeadlineMs && this.#renewDeadlineMs > this.#retryPeriodMs)) {
      throw new RangeError("leader election needs leaseDuration > renewDeadline > retryPeriod");
    }
    options.metrics?.leaderElectionMasterStatus.set({ name: options.name }, 0);
  }

  get identity(): string {
    return this.#options.identity;
  }

  isLeader(): boolean {
    return this.#leading;
  }

  /**
   * The fence, checked synchronously before a write leaves: leading, and the last successful renewal started
   * less than renewDeadline ago (a process frozen past it may have been replaced: its writes must not leave even
   * before its renew loop gets a turn to notice).
   */
  holdsLease(): boolean {
    return this.#leading && !this.#releasing && this.#clock.now() < this.#actUntil;
  }

  /** Starts campaigning in the background; after losing the lease the candidate campaigns again. */
  start(): void {
    if (this.#loop !== undefined) return;
    this.#releasing = false;
    this.#stop = new AbortController();
    this.#loop = this.#run(this.#stop.signal).catch((error: unknown) => {
      this.#logger.error({ err: error }, "leader election loop failed");
    });
  }

  /** Stops campaigning and, if leading, releases the Lease so a standby takes over at once. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#loop;
    this.#loop = undefined;
    if (this.#leading) {
      this.#releasing = true;
      await this.#bounded(this.#release(), this.#renewDeadlineMs, undefined);
      this.#setLeading(false);
    }
  }

  async #run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      // Candidate: try every retryPeriod (jittered so candidates do not collide).
      // A hung request must not hang the campaign (or stop()): bound each attempt.
      const attempt = await this.#campaign();
      if (signal.aborted) return;
      if (attempt !== "leading") {
        await sleep(jitter(this.#retryPeriodMs, 0.2), signal, this.#clock);
        continue;
      }
      this.#setLeading(true);
      await this.#renewUntilLost(signal);
      if (signal.aborted) return; // stop() releases
      this.#setLeading(false);
    }
  }

  /**
   * One attempt to become leader: stands by while `mayLead` names a rival, then acquires, then asks `mayLead`
   * again (a rival that acquired meanwhile sees our Lease, or we see its: never both lead); refused then, the
   * Lease just acquired is released.
   */
  async #campaign(): Promise<Attempt> {
    if ((await this.#standBy()) !== undefined) return "failed";
    const attempt = await this.#bounded(this.#tryAcquireOrRenew(), this.#renewDeadlineMs, "failed");
    if (attempt !== "leading") return attempt;
    if ((await this.#standBy()) === undefined) return "leading";
    this.#actUntil = 0;
    await this.#bounded(this.#release(), this.#renewDeadlineMs, undefined);
    return "failed";
  }

  /** Why this candidate must stand by now (mayLead), logged once per reason; a failing check stands by too. */
  async #standBy(): Promise<string | undefined> {
    const mayLead = this.#options.mayLead;
    if (mayLead === undefined) return undefined;
    let reason: string | undefined;
    try {
      reason = await this.#bounded(mayLead(), this.#renewDeadlineMs, "the check for rival Leases did not answer");
    } catch (error) {
      reason = `the check for rival Leases failed: ${error instanceof Error ? error.message : String(error)}`;
    }
    if (reason !== this.#standingByFor) {
      if (reason !== undefined) this.#logger.warn({ reason }, "standing by");
      else if (this.#standingByFor !== undefined) this.#logger.info("no rival Lease any more: campaigning");
      this.#standingByFor = reason;
    }
    return reason;
  }

  /**
   * Renews every retryPeriod; returns when the fence passed (renewing failed until renewDeadline after the last
   * successful renewal began) or another holder took the Lease. Once past it, nothing is sent: the Lease may
   * already belong to another replica, which a late renewal must not take back.
   */
  async #renewUntilLost(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await sleep(this.#retryPeriodMs, signal, this.#clock);
      if (signal.aborted) return;
      const remaining = this.#actUntil - this.#clock.now();
      if (remaining <= 0) {
        this.#logger.warn({ renewDeadlineMs: this.#renewDeadlineMs }, "could not renew the lease in time");
        return;
      }
      const attempt = await this.#bounded(this.#tryAcquireOrRenew(), remaining, "failed");
      if (signal.aborted) return;
      if (attempt === "leading") continue;
      if (attempt === "held-by-other") {
        this.#logger.warn("lease taken by another candidate");
        return;
      }
    }
  }

  /** Resolves with `fallback` when `work` takes longer than `ms` (the request itself cannot be aborted). */
  async #bounded<T>(work: Promise<T>, ms: number, fallback: T): Promise<T> {
    let timer: ReturnType<Clock["setTimeout"]> | undefined;
    const timeout = new Promise<T>((resolve) => {
      timer = this.#clock.setTimeout(() => resolve(fallback), ms);
    });
    try {
      return await Promise.race([work, timeout]);
    } finally {
      if (timer !== undefined) this.#clock.clearTimeout(timer);
    }
  }

  #setLeading(leading: boolean): void {
    if (this.#leading === leading) return;
    this.#leading = leading;
    if (!leading) this.#actUntil = 0;
    this.#options.metrics?.leaderElectionMasterStatus.set({ name: this.#options.name }, leading ? 1 : 0);
    this.#logger.info(leading ? "became leader" : "stopped leading");
    try {
      if (leading) this.#options.onStartedLeading();
      else this.#options.onStoppedLeading();
    } catch (error) {
      this.#logger.error({ err: error }, "leadership callback threw");
    }
  }

  async #tryAcquireOrRenew(): Promise<Attempt> {
    const { namespace, name, identity } = this.#options;
    const now = this.#clock.now();
    const desiredSpec = {
      holderIdentity: identity,
      leaseDurationSeconds: Math.ceil(this.#leaseDurationMs / 1000),
      renewTime: microTime(now),
    };
    let current: Lease;
    try {
      current = await this.#api.read();
    } catch (error) {
      if (statusOf(error) !== 404) {
        this.#logger.warn({ err: toKubeApiError(error, "read lease") }, "lease read failed");
        return "failed";
      }
      try {
        await this.#api.create({
          apiVersion: "coordination.k8s.io/v1",
          kind: "Lease",
          metadata: { name, namespace },
          spec: { ...desiredSpec, acquireTime: microTime(now), leaseTransitions: 0 },
        });
        this.#actUntil = now + this.#renewDeadlineMs;
        return "leading";
      } catch (createError) {
        if (statusOf(createError) !== 409) {
          this.#logger.warn({ err: toKubeApiError(createError, "create lease") }, "lease create failed");
        }
        return "failed";
      }
    }
    const spec = current.spec ?? {};
    const holder = spec.holderIdentity ?? "";
    const version = current.metadata?.resourceVersion;
    if (version !== this.#observedVersion) {
      this.#observedVersion = version;
      this.#observedAt = now;
    }
    if (holder !== this.#lastHolder) {
      this.#lastHolder = holder;
      if (holder !== "") this.#options.onNewLeader?.(holder);
    }
    const durationMs = (spec.leaseDurationSeconds ?? Math.ceil(this.#leaseDurationMs / 1000)) * 1000;
    const heldByOther = holder !== "" && holder !== identity;
    if (heldByOther && this.#observedAt + durationMs > now) return "held-by-other";
    const renewing = holder === identity;
    try {
      const replaced = await this.#api.replace({
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { ...current.metadata, name, namespace, resourceVersion: version },
        spec: {
          ...desiredSpec,
          acquireTime: renewing && spec.acquireTime ? toMicroTime(spec.acquireTime, now) : microTime(now),
          leaseTransitions: (spec.leaseTransitions ?? 0) + (renewing ? 0 : 1),
        },
      });
      this.#observedVersion = replaced.metadata?.resourceVersion;
      this.#observedAt = now;
      // `now` was taken before the read: the Lease was renewed no earlier, so others wait leaseDuration from then.
      this.#actUntil = now + this.#renewDeadlineMs;
      return "leading";
    } catch (error) {
      if (statusOf(error) !== 409)
        this.#logger.warn({ err: toKubeApiError(error, "update lease") }, "lease update failed");
      return "failed";
    }
  }

  /** Clears the holder and shortens the Lease to 1 s, so a standby does not wait out the full duration. */
  async #release(): Promise<void> {
    const { namespace, name, identity } = this.#options;
    try {
      const current = await this.#api.read();
      if (current.spec?.holderIdentity !== identity) return;
      const now = this.#clock.now();
      await this.#api.replace({
        ...current,
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { ...current.metadata, name, namespace },
        spec: {
          ...current.spec,
          holderIdentity: "",
          leaseDurationSeconds: 1,
          acquireTime: microTime(now),
          renewTime: microTime(now),
        },
      });
      this.#logger.info("lease released");
    } catch (error) {
      this.#logger.warn({ err: toKubeApiError(error, "release lease") }, "could not release the lease");
    }
  }
}

function toMicroTime(value: unknown, fallback: number): string {
  return microTime(parseKubeTime(value) ?? fallback);
}
