// Public entry point of the simulator: `startSimulator(options)` for tests, the CLI and the playground.

import { JsonStateFileWriter, StateFileError } from "../util/json-state-file.ts";
import { ADMIN_PREFIX } from "./admin.ts";
import type { RateLimitOptions } from "./auth.ts";
import { Auth, RateLimiter } from "./auth.ts";
import type { Capacity } from "./catalogue.ts";
import type { Clock } from "./clock.ts";
import { systemClock } from "./clock.ts";
import type { FaultConfigInput } from "./faults.ts";
import { FaultInjector } from "./faults.ts";
import { type NodeJoinOptions, NodeJoins } from "./node-join.ts";
import { profileDefaults, type SimulatorProfile } from "./profiles.ts";
import { newWriteLog } from "./request-log.ts";
import { API_PREFIX } from "./routing.ts";
import { DEFAULT_API_KEY, DEFAULT_ORGANIZATION_ID, DEFAULT_PROJECT_ID, DEFAULT_USER, seedState } from "./seed.ts";
import { buildServer } from "./server.ts";
import type { SimState } from "./state.ts";
import { readStateFile } from "./state-file.ts";
import type { DuplicateNameMode } from "./store.ts";
import { Store } from "./store.ts";
import { DEFAULT_USAGE_REFRESH_DELAY_MS, type UsagePublication } from "./usage-publication.ts";

/** Not 8080 or 8081: those are the operator's /metrics and probe ports, and both run side by side. */
export const DEFAULT_SIMULATOR_PORT = 8070;

export type { RateLimitOptions } from "./auth.ts";
export type { Capacity } from "./catalogue.ts";
export type { Clock, ManualClock } from "./clock.ts";
export { createManualClock, systemClock } from "./clock.ts";
export type { FaultConfig, FaultConfigInput } from "./faults.ts";
export type { NodeJoinOptions, NodeJoinRecord, WorkloadClusterAccess } from "./node-join.ts";
export {
  CONTRACT_ONLY_ROUTES,
  isSimulatorProfile,
  SEED_ONLY_OPERATION_RETENTION_MS,
  SIMULATOR_PROFILES,
  type SimulatorProfile,
} from "./profiles.ts";
export { DEFAULT_API_KEY, DEFAULT_PROJECT_ID, DEFAULT_USER } from "./seed.ts";
export { USAGE_PUBLICATIONS, type UsagePublication } from "./usage-publication.ts";

export interface SimulatorOptions {
  /**
   * `contract` (default): the spec and every endpoint of contract-decisions.md. `seed-only`: only the endpoints
   * the spec shows (the others answer as unknown routes), finished operations vanish after
   * `operationRetentionMs` and then read 403.
   */
  profile?: SimulatorProfile;
  /** How long a finished operation stays listed and readable. Default: kept (contract), 60 s (seed-only). */
  operationRetentionMs?: number;
  /**
   * Whether availability items carry `available_count` (how many more VMs of the type the location takes now),
   * an extension beyond the spec. Default: true (contract), false (seed-only).
   */
  availabilityCounts?: boolean;
  /** 0 picks a free port (tests). Default 8070 (the operator's /metrics and probes default to 8080 and 8081). */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  apiKey?: string;
  projectId?: string;
  user?: { email: string; password: string };
  /** How long an operation stays IN_PROGRESS. Default 2000; 0 settles on the next tick. */
  latencyMs?: number;
  /** `expires_in` of access tokens. Default 3600. */
  tokenTtlSeconds?: number;
  /** Per-credential token bucket; `false` turns it off. Default 20/s, burst 40. */
  rateLimit?: RateLimitOptions | false;
  faults?: FaultConfigInput;
  /** Per location and type, merged over the default capacity. */
  capacity?: Capacity;
  /** Whether the default organization has a valid payment method. Default true. */
  paymentMethodValid?: boolean;
  /** How a duplicate name is answered: 409 (default) or an operation FAILED `already_exists`. */
  duplicateNames?: DuplicateNameMode;
  stateFile?: string;
  stateFileDebounceMs?: number;
  /** Time source for operations, token expiry, rate limiting and usage. Default: the system clock. */
  clock?: Clock;
  /** Randomness for fault rates (tests pass a deterministic one). */
  random?: () => number;
  /** How long after midnight UTC the daily usage refresh publishes the day before. Default 15 minutes. */
  usageRefreshDelayMs?: number;
  /**
   * `daily` (default): usage as the spec has it, each day published once it has ended. `live`: every day as
   * accrued so far, the running one included (the playground: GPU-hours show minutes after a VM starts).
   */
  usagePublication?: UsagePublication;
  /** Fastify request logging. Default off (throughput). */
  logger?: boolean;
  /** Request bodies above this many bytes are refused with 413 (default 1 MiB). */
  maxRequestBytes?: number;
  /**
   * The node-join emulation: the workload clusters a VM booted with a cloud-config's `kubeadm join` may join
   * (docs/simulator.md#node-join-emulation). The admin API adds and removes clusters at run time.
   */
  nodeJoin?: NodeJoinOptions;
}

export interface RunningSimulator {
  /** Base URL of the API, ending in `/v0.1`. */
  url: string;
  /** Base URL of the admin API, ending in `/_sim`. */
  adminUrl: string;
  apiKey: string;
  projectId: string;
  organizationId: string;
  user: { email: string; password: string };
  profile: SimulatorProfile;
  clock: Clock;
  close(): Promise<void>;
}

/**
 * A reloaded state keeps its tenants; the credentials asked for at this start are added if the file lacks them
 * (a new `--api-key` or `--user` must work against an old state file).
 */
function adoptCredentials(
  state: SimState,
  wanted: { apiKey: string; projectId: string; user: { email: string; password: string } },
): void {
  if (!state.projects.some((p) => p.id === wanted.projectId)) {
    const organizationId = state.organizations[0]?.id ?? DEFAULT_ORGANIZATION_ID;
    state.projects.push({ id: wanted.projectId, name: "default", organization_id: organizationId });
  }
  if (!state.apiKeys.some((k) => k.key === wanted.apiKey)) {
    state.apiKeys.push({ key: wanted.apiKey, projectId: wanted.projectId });
  }
  const user = state.users.find((u) => u.email === wanted.user.email);
  if (user === undefined) state.users.push({ ...wanted.user, projectIds: [wanted.projectId] });
  else if (!user.projectIds.includes(wanted.projectId)) user.projectIds.push(wanted.projectId);
}

/** A state file's cloud, for this profile only (a seed-only server must not show what a contract one made). */
async function loadedState(
  stateFile: string,
  profile: SimulatorProfile,
  credentials: Parameters<typeof adoptCredentials>[1],
): Promise<SimState | undefined> {
  const loaded = await readStateFile(stateFile);
  if (loaded === undefined) return undefined;
  if (loaded.profile !== undefined && loaded.profile !== profile) {
    throw new StateFileError(
      `${stateFile} holds the cloud of a simulator of profile ${loaded.profile}, not ${profile}: start it with --profile ${loaded.profile}, or give another state file (the playground: another --state-dir)`,
    );
  }
  loaded.profile = profile;
  adoptCredentials(loaded, credentials);
  return loaded;
}

export async function startSimulator(options: SimulatorOptions = {}): Promise<RunningSimulator> {
  const clock = options.clock ?? systemClock;
  const apiKey = options.apiKey ?? DEFAULT_API_KEY;
  const projectId = options.projectId ?? DEFAULT_PROJECT_ID;
  const user = options.user ?? { ...DEFAULT_USER };
  const profile = options.profile ?? "contract";
  const seed = (): SimState => ({
    ...seedState({
      apiKey,
      projectId,
      user,
      paymentMethodValid: options.paymentMethodValid ?? true,
      capacity: options.capacity,
    }),
    profile,
  });
  const loaded =
    options.stateFile === undefined
      ? undefined
      : await loadedState(options.stateFile, profile, { apiKey, projectId, user });

  const faults = new FaultInjector(options.faults, options.random);
  const nodeJoins = new NodeJoins(clock, options.nodeJoin);
  let writer: JsonStateFileWriter | undefined;
  const defaults = profileDefaults(profile);
  const store = new Store(loaded ?? seed(), {
    clock,
    faults,
    latencyMs: options.latencyMs ?? 2000,
    duplicateNames: options.duplicateNames ?? "conflict",
    unknownOperationStatus: defaults.unknownOperationStatus,
    operationRetentionMs: options.operationRetentionMs ?? defaults.operationRetentionMs,
    availabilityCounts: options.availabilityCounts ?? defaults.availabilityCounts,
    onChange: () => writer?.markDirty(),
    vmObserver: nodeJoins,
  });
  store.networks.ensureDefault(projectId);
  const auth = new Auth(() => store.state, clock, options.tokenTtlSeconds ?? 3600);
  const rateLimiter = new RateLimiter(options.rateLimit ?? { ratePerSec: 20, burst: 40 }, clock);
  const requestCounts = new Map<string, number>();
  const writeLog = newWriteLog();

  const app = buildServer({
    store,
    auth,
    faults,
    rateLimiter,
    requestCounts,
    writeLog,
    nodeJoins,
    profile,
    logger: options.logger ?? false,
    maxRequestBytes: options.maxRequestBytes ?? 1024 * 1024,
    usageRefreshDelayMs: options.usageRefreshDelayMs ?? DEFAULT_USAGE_REFRESH_DELAY_MS,
    usagePublication: options.usagePublication ?? "daily",
    reset: () => {
      store.load(seed());
      store.networks.ensureDefault(projectId);
      auth.reset();
      rateLimiter.reset();
      faults.clear();
      requestCounts.clear();
      writeLog.clear();
      nodeJoins.reset();
      writer?.markDirty();
    },
  });
  if (options.stateFile !== undefined) {
    writer = new JsonStateFileWriter({
      path: options.stateFile,
      snapshot: () => store.snapshot(),
      debounceMs: options.stateFileDebounceMs ?? 200,
      onError: (error) => app.log.error({ err: error }, "cannot write the state file"),
    });
    // Mutating requests that change state outside the store's operations (tenants, passwords) are saved too.
    const stateWriter = writer;
    app.addHook("onResponse", async (request) => {
      if (request.method !== "GET") stateWriter.markDirty();
    });
  }

  const address = await app.listen({ port: options.port ?? DEFAULT_SIMULATOR_PORT, host: options.host ?? "127.0.0.1" });
  const base = address.replace("[::1]", "127.0.0.1");
  let closed = false;
  return {
    url: `${base}${API_PREFIX}`,
    adminUrl: `${base}${ADMIN_PREFIX}`,
    apiKey,
    projectId,
    organizationId: store.state.projects.find((p) => p.id === projectId)?.organization_id ?? DEFAULT_ORGANIZATION_ID,
    user,
    profile,
    clock,
    async close() {
      if (closed) return;
      closed = true;
      nodeJoins.close();
      store.close();
      await app.close();
      await writer?.flush();
    },
  };
}
