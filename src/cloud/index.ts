// Public surface of the cloud client: import from here outside src/cloud.
export type { Credentials, SessionCredentials, SessionTokens, TokenSession } from "./auth.ts";
export {
  AccountBulkhead,
  type AccountHealth,
  type Admission,
  type BulkheadOptions,
  type BulkheadReport,
  DEFAULT_BULKHEAD,
  sharedBulkheadFor,
} from "./bulkhead.ts";
export {
  CAPABILITIES,
  CAPABILITY_NAMES,
  type Capability,
  CapabilityRegistry,
  type CapabilityReport,
  type CapabilityState,
  capabilityOf,
  operationsCapabilitiesOf,
} from "./capabilities.ts";
export { type CloudClient, type CloudClientOptions, createCloudClient, DEFAULT_RATE_LIMIT } from "./client.ts";
export type { CallOptions } from "./endpoints/shared.ts";
export {
  CloudError,
  type CloudErrorKind,
  isAuthError,
  isCloudError,
  isConflict,
  isNotFound,
  isOperationGone,
  isRateLimited,
  isUnsupported,
} from "./errors.ts";
export {
  isFinalOperation,
  type OperationOutcome,
  OperationTracker,
  type OperationTrackerOptions,
  operationTrackerFor,
  TrackerStoppedError,
  type TrackerTimers,
} from "./operations.ts";
export { credentialKeyOf, sharedBucketFor, TokenBucket, type TokenBucketOptions } from "./rate-limit.ts";
export { compareSizes, formatSize, InvalidSizeError, parseSize, sizesEqual } from "./sizes.ts";
export {
  DEFAULT_MAX_RESPONSE_BYTES,
  type RequestEvent,
  type RequestObserver,
} from "./transport.ts";
