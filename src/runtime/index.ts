// The runtime's public API (what src/controllers and src/cli use). See docs/runtime.md.
export { type ConfigResult, type OperatorConfig, parseConfig } from "./config.ts";
export { envNameOf, helpText } from "./config-flags.ts";
export {
  type BindAddress,
  ConfigError,
  type LogFormat,
  type LogLevel,
  type LogTimeFormat,
  type OperationPolling,
  parseBindAddress,
} from "./config-values.ts";
export {
  Controller,
  type ControllerOptions,
  InvalidKeyError,
  keyOf,
  type Outcome,
  outcome,
  parseKey,
  type ReconcileContext,
  ReconcilePacer,
  type ReconcileRequest,
  type Reconciler,
} from "./controller.ts";
export type { ControllerRegistration, WatchMapping } from "./controller-registration.ts";
export { type EventInput, EventRecorder, type EventType, REPORTING_CONTROLLER } from "./events.ts";
export {
  type InformerOptions,
  ListTimeoutError,
  missingResourceMessage,
  type ObjectInformer,
  ResilientInformer,
} from "./informer.ts";
export type { InformerEvent, InformerHandler, InformerView, NoteEvent, NoteHandler } from "./informer-cache.ts";
export { KubeClient, type StatusObject } from "./kube.ts";
export { countingInterceptor, instrumentKubeConfig, NO_RESPONSE_CODE } from "./kube-request-metrics.ts";
export { LeaderElector, type LeaderElectorOptions } from "./leader-election.ts";
export { createLogger, formatLogLine, type LoggerOptions, REDACTED_PATHS, textDestination } from "./logging.ts";
export { CacheSyncTimeoutError, defaultConfig, Manager, type ManagerOptions } from "./manager.ts";
export { type CloudOperationsSample, Metrics, type ReconcileResult } from "./metrics.ts";
export { MultiNamespaceInformer } from "./multi-namespace-informer.ts";
export {
  apiVersionOf,
  CONFIG_MAPS,
  collectionPath,
  type KubeResource,
  MalformedResponseError,
  NAMESPACES,
  resourceId,
  SECRETS,
} from "./resource.ts";
export { hashKey, ownsKey, type Shard, shardLeaseName, shardOfKey } from "./sharding.ts";
export type { InformerTuning } from "./shared-informers.ts";
export {
  createMergePatch,
  type JsonValue,
  jsonEqual,
  KubeApiError,
  statusOf,
  type WriteResult,
} from "./status.ts";
export {
  type Clock,
  DurationError,
  formatDuration,
  formatMicroTime,
  jitter,
  parseDuration,
  parseKubeTime,
  sleep,
  syncPeriodOf,
  systemClock,
} from "./time.ts";
export { type Priority, WorkQueue, type WorkQueueObserver, type WorkQueueOptions } from "./workqueue.ts";
