// The operator under test, for real: the API simulator (latency 0) and the Kubernetes API test double over HTTP,
// a Manager with the four controllers, and helpers to apply objects, wait for conditions and read the cloud.

import { fileURLToPath } from "node:url";
import {
  CoreV1Api,
  CustomObjectsApi,
  EventsV1Api,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { type Logger, pino } from "pino";
import { GROUP, VERSION } from "../../src/api/common.ts";
import { kindInfo } from "../../src/api/kinds.ts";
import type { ReconcileTiming } from "../../src/controllers/core/lifecycle.ts";
import { type OperatorControllers, registerControllers } from "../../src/controllers/index.ts";
import { type RunningKubeDouble, startKubeDouble } from "../../src/kube-double/index.ts";
import { defaultConfig, Manager, type OperatorConfig } from "../../src/runtime/index.ts";
import { type RunningSimulator, type SimulatorOptions, startSimulator } from "../../src/simulator/index.ts";

export const NAMESPACE = "default";
/** The label every Secret the operator should read carries (its Secret cache holds only those). */
export const WATCHED: Record<string, string> = { "gpucloud.dev/watch": "true" };
const CRD_DIR = fileURLToPath(new URL("../../crds", import.meta.url));
/** The plural of a kind, as its descriptor in src/api names it. */
function pluralOf(kind: string): string {
  const info = kindInfo(kind);
  if (info === undefined) throw new Error(`no kind ${kind} in src/api`);
  return info.plural;
}

export interface Condition {
  type: string;
  status: string;
  reason: string;
  message?: string;
}

export interface ManagedView {
  metadata: {
    name: string;
    generation?: number;
    finalizers?: string[];
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
    resourceVersion?: string;
    deletionTimestamp?: string;
    ownerReferences?: { kind: string; name: string; uid: string; controller?: boolean }[];
  };
  spec: Record<string, unknown>;
  status?: Record<string, unknown> & { conditions?: Condition[]; id?: string; observedGeneration?: number };
}

export function condition(object: ManagedView | undefined, type: string): Condition | undefined {
  return object?.status?.conditions?.find((c) => c.type === type);
}

/** The reason of the object's Ready condition. */
export const reasonOf = (object: ManagedView | undefined): string | undefined => condition(object, "Ready")?.reason;

export interface Env {
  sim: RunningSimulator;
  double: RunningKubeDouble;
  kubeConfig: KubeConfig;
  custom: CustomObjectsApi;
  core: CoreV1Api;
  manager: Manager;
  controllers: OperatorControllers;
  apply(kind: string, name: string, spec: Record<string, unknown>, annotations?: Record<string, string>): Promise<void>;
  patchSpec(kind: string, name: string, spec: Record<string, unknown>): Promise<void>;
  annotate(kind: string, name: string, annotations: Record<string, string | null>): Promise<void>;
  get(kind: string, name: string): Promise<ManagedView | undefined>;
  remove(kind: string, name: string): Promise<void>;
  waitFor(
    kind: string,
    name: string,
    check: (o: ManagedView | undefined) => boolean,
    timeoutMs?: number,
  ): Promise<ManagedView | undefined>;
  waitReady(kind: string, name: string, timeoutMs?: number): Promise<ManagedView>;
  cloud<T>(path: string): Promise<T>;
  admin(method: string, path: string, body?: unknown): Promise<unknown>;
  startOperator(): Promise<void>;
  stopOperator(): Promise<void>;
  close(): Promise<void>;
}

export const SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ0ZXN0a2V5Zm9ydGhlb3BlcmF0b3J0ZXN0cw test@example";

export interface EnvOptions {
  simulator?: SimulatorOptions;
  config?: Partial<OperatorConfig>;
  /** Do not create the default credentials Secret. */
  withoutCredentials?: boolean;
  /** Start the operator at once (default true). */
  start?: boolean;
  /** Reconciler timings over the harness's short ones (e.g. a long dependencyMs to see that a wake-up, not a requeue, moved an object). */
  timing?: Partial<ReconcileTiming>;
  /** The operator's logger (default: silent, or TEST_LOG_LEVEL). */
  logger?: Logger;
  /** More CRDs for the test double to serve (Cluster API's, for the provider's controllers). */
  crds?: unknown[];
  /** Register the Cluster API provider's controllers (the double must serve Cluster API's CRDs). */
  clusterApi?: boolean;
}

export async function startEnv(options: EnvOptions = {}): Promise<Env> {
  const sim = await startSimulator({ port: 0, latencyMs: 0, rateLimit: false, ...options.simulator });
  const double = await startKubeDouble({ port: 0, crdDir: CRD_DIR, ...(options.crds ? { crds: options.crds } : {}) });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromString(double.kubeconfigYaml());
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: NAMESPACE } } }).catch(() => undefined);
  if (!options.withoutCredentials) {
    await core.createNamespacedSecret({
      namespace: NAMESPACE,
      body: {
        metadata: { name: "gpucloud-credentials", labels: WATCHED },
        stringData: { apiKey: sim.apiKey, projectId: sim.projectId, apiUrl: sim.url },
      },
    });
  }
  const ref = (kind: string, name: string) => ({
    group: GROUP,
    version: VERSION,
    plural: pluralOf(kind),
    namespace: NAMESPACE,
    name,
  });
  let manager: Manager | undefined;
  let controllers: OperatorControllers | undefined;

  const env: Env = {
    sim,
    double,
    kubeConfig,
    custom,
    core,
    get manager(): Manager {
      if (manager === undefined) throw new Error("operator not started");
      return manager;
    },
    get controllers(): OperatorControllers {
      if (controllers === undefined) throw new Error("operator not started");
      return controllers;
    },
    async apply(kind, name, spec, annotations) {
      await custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        plural: pluralOf(kind),
        namespace: NAMESPACE,
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind,
          metadata: { name, namespace: NAMESPACE, ...(annotations ? { annotations } : {}) },
          spec,
        },
      });
    },
    async patchSpec(kind, name, spec) {
      await custom.patchNamespacedCustomObject({ ...ref(kind, name), body: { spec } }, MERGE);
    },
    async annotate(kind, name, annotations) {
      await custom.patchNamespacedCustomObject({ ...ref(kind, name), body: { metadata: { annotations } } }, MERGE);
    },
    async get(kind, name) {
      try {
        return (await custom.getNamespacedCustomObject(ref(kind, name))) as ManagedView;
      } catch {
        return undefined;
      }
    },
    async remove(kind, name) {
      await custom.deleteNamespacedCustomObject(ref(kind, name));
    },
    async waitFor(kind, name, check, timeoutMs = 8000) {
      const deadline = Date.now() + timeoutMs;
      let last: ManagedView | undefined;
      while (Date.now() < deadline) {
        last = await env.get(kind, name);
        if (check(last)) return last;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error(`timed out waiting for ${kind} ${name}; last seen: ${JSON.stringify(last?.status ?? last)}`);
    },
    async waitReady(kind, name, timeoutMs) {
      const object = await env.waitFor(kind, name, (o) => condition(o, "Ready")?.status === "True", timeoutMs);
      if (object === undefined) throw new Error("unreachable");
      return object;
    },
    async cloud<T>(path: string) {
      const response = await fetch(`${sim.url}/projects/${sim.projectId}/${path}`, {
        headers: { authorization: `Bearer ${sim.apiKey}` },
      });
      if (!response.ok) throw new Error(`cloud GET ${path}: ${response.status}`);
      return (await response.json()) as T;
    },
    async admin(method, path, body) {
      const response = await fetch(`${sim.adminUrl}${path}`, {
        method,
        ...(body !== undefined ? { body: JSON.stringify(body), headers: { "content-type": "application/json" } } : {}),
      });
      if (!response.ok) throw new Error(`admin ${method} ${path}: ${response.status} ${await response.text()}`);
      const text = await response.text();
      return text ? (JSON.parse(text) as unknown) : undefined;
    },
    async startOperator() {
      const config = defaultConfig({
        metricsBindAddress: undefined,
        healthProbeBindAddress: undefined,
        syncPeriodMs: 30_000,
        operationPollIntervalMs: 50,
        gracefulShutdownTimeoutMs: 2000,
        ...options.config,
        // The simulator is always allowed; a test adds the URLs of its other tenants.
        allowedApiUrls: [sim.url, ...(options.config?.allowedApiUrls ?? [])],
      });
      const logger = options.logger ?? pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" });
      manager = new Manager({ kubeConfig, config, logger });
      controllers = registerControllers(manager, {
        ...(options.clusterApi ? { clusterApi: true } : {}),
        timing: {
          operationFallbackMs: 1000,
          shortMs: 100,
          dependencyMs: 300,
          createGraceMs: 1000,
          terminalRetryMs: 60_000,
          // A vanished VM is created again 2 s after the first read that misses it (2 minutes by default).
          goneConfirmMs: 2000,
          ...options.timing,
        },
      });
      await manager.start();
    },
    async stopOperator() {
      await manager?.stop();
      controllers?.stop();
      manager = undefined;
      controllers = undefined;
    },
    async close() {
      await env.stopOperator();
      await double.close();
      await sim.close();
    },
  };
  if (options.start !== false) await env.startOperator();
  return env;
}

const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

/** Events about one object of the test namespace, as `Type Reason: note`. */
export async function eventsAbout(env: Env, name: string): Promise<string[]> {
  const events = env.kubeConfig.makeApiClient(EventsV1Api);
  return (await events.listNamespacedEvent({ namespace: NAMESPACE })).items
    .filter((e) => e.regarding?.name === name)
    .map((e) => `${e.type} ${e.reason}: ${e.note}`);
}

/** Create an object of `kind` in any namespace (the Env's own helpers work in the test namespace). */
export async function createIn(
  env: Env,
  namespace: string,
  kind: string,
  name: string,
  spec: Record<string, unknown>,
  annotations?: Record<string, string>,
): Promise<void> {
  await env.custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    plural: pluralOf(kind),
    namespace,
    body: {
      apiVersion: `${GROUP}/${VERSION}`,
      kind,
      metadata: { name, namespace, ...(annotations ? { annotations } : {}) },
      spec,
    },
  });
}

/** An object of `kind` in any namespace, or undefined. */
export async function readIn(
  env: Env,
  namespace: string,
  kind: string,
  name: string,
): Promise<ManagedView | undefined> {
  const ref = { group: GROUP, version: VERSION, plural: pluralOf(kind), namespace, name };
  return env.custom.getNamespacedCustomObject(ref).then(
    (object) => object as ManagedView,
    () => undefined,
  );
}

/** Poll an object of `kind` in any namespace until `check` holds (the last view is in the error otherwise). */
export async function waitIn(
  env: Env,
  namespace: string,
  kind: string,
  name: string,
  check: (o: ManagedView | undefined) => boolean,
  timeoutMs = 10_000,
): Promise<ManagedView | undefined> {
  const deadline = Date.now() + timeoutMs;
  let last: ManagedView | undefined;
  while (Date.now() < deadline) {
    last = await readIn(env, namespace, kind, name);
    if (check(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`timed out waiting for ${kind} ${namespace}/${name}; last seen: ${JSON.stringify(last?.status)}`);
}

export function vmSpec(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { type: "a100.1x", location: "us-east1-a", image: "ubuntu22.04", sshPublicKey: SSH_KEY, ...extra };
}

/** Another replica on the same servers as `env`: shard `index` of `count` (env runs the other one), started. */
export async function startOtherShard(
  env: Env,
  shard: { index: number; count: number },
  syncPeriodMs: number,
): Promise<{ manager: Manager; controllers: OperatorControllers; stop(): Promise<void> }> {
  const config = defaultConfig({
    metricsBindAddress: undefined,
    healthProbeBindAddress: undefined,
    syncPeriodMs,
    operationPollIntervalMs: 50,
    gracefulShutdownTimeoutMs: 2000,
    allowedApiUrls: [env.sim.url],
    shard,
  });
  const manager = new Manager({ kubeConfig: env.kubeConfig, config, logger: pino({ level: "silent" }) });
  const controllers = registerControllers(manager, {
    timing: { operationFallbackMs: 1000, shortMs: 100, dependencyMs: 300, createGraceMs: 1000 },
  });
  await manager.start();
  return {
    manager,
    controllers,
    stop: async () => {
      await manager.stop();
      controllers.stop();
    },
  };
}
