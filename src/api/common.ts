// What every custom resource shares: its group and version, the annotations, labels, finalizer and Secret
// conventions, the object's metadata, the default cloud name, and the managed spec and status bases every kind's
// schema starts with. The condition vocabulary (reasons.ts) is re-exported here: every status carries it.
import { createHash } from "node:crypto";
import { z } from "zod";
import {
  type CelRule,
  CLOUD_NAME_EXPECTED,
  CLOUD_NAME_PATTERN,
  immutableOnceSet,
  localObjectReference,
  matching,
  text,
  timestamp,
} from "./fields.ts";
import { CONDITION_STATUSES, CONDITION_TYPES, type ConditionType } from "./reasons.ts";

export {
  CONDITION_STATUSES,
  CONDITION_TYPES,
  type ConditionStatus,
  type ConditionType,
  REASON_DESCRIPTIONS,
  REASONS,
  type Reason,
} from "./reasons.ts";

export const GROUP = "gpucloud.dev";
export const VERSION = "v1alpha1";
export const API_VERSION = `${GROUP}/${VERSION}`;
export const CATEGORY = "gpucloud";
export const FINALIZER = "gpucloud.dev/finalizer";

export const ANNOTATIONS = {
  /** `"true"` stops all cloud calls for the object (status shows reason Paused). */
  paused: "gpucloud.dev/paused",
  /** A timestamp; a value newer than status.lastResetRequestedAt asks for one RESET of the VM. */
  resetRequestedAt: "gpucloud.dev/reset-requested-at",
  /** A duration such as `5m`: how often a Ready object is checked for drift. */
  syncPeriod: "gpucloud.dev/sync-period",
  /** `"true"` on a GpuVm of a GpuVmPool: removed first when the pool scales down. */
  deleteFirst: "gpucloud.dev/delete-first",
} as const;
export const SYNC_PERIOD_ANNOTATION = ANNOTATIONS.syncPeriod;
/**
 * The shortest `gpucloud.dev/sync-period` honoured: a tenant's object cannot make the operator list its cloud
 * account more often than this (a shorter value is raised to it and reported in an Event and a log line).
 */
export const MIN_SYNC_PERIOD_MS = 10_000;

/**
 * The label a Secret needs for the operator to read it (credentials, SSH keys and scripts referenced by objects):
 * the Secret cache holds only Secrets with it (and the one --credentials-secret), never every Secret of the
 * cluster. The connection-details Secrets the operator writes carry it too. See docs/adr/0011-rbac-and-secret-cache.md.
 */
export const SECRET_WATCH_LABEL = "gpucloud.dev/watch";
export const SECRET_WATCH_SELECTOR = `${SECRET_WATCH_LABEL}=true`;
/** Said wherever a Secret is not found: an unlabelled Secret is invisible to the operator. */
export const SECRET_WATCH_HINT = `the operator reads only Secrets labelled ${SECRET_WATCH_SELECTOR}`;

/** Labels a GpuVmPool puts on its GpuVms and GpuDisks: the pool's name (its selector) and the template revision. */
export const POOL_LABELS = {
  pool: "gpucloud.dev/pool",
  revision: "gpucloud.dev/pool-revision",
  /** On a pool's GpuDisk: the GpuVm it belongs to. */
  member: "gpucloud.dev/pool-member",
} as const;

/** The Secret a resource uses when spec.credentialsRef is left out. */
export const DEFAULT_CREDENTIALS_SECRET = "gpucloud-credentials";

/** The meaningful part of an object's metadata; unknown fields pass (the operator reads what it needs). */
export const ObjectMeta = z.looseObject({
  name: z.string().min(1),
  namespace: z.string().min(1),
  uid: z.string().optional(),
  generation: z.number().int().optional(),
  resourceVersion: z.string().optional(),
  creationTimestamp: z.string().optional(),
  deletionTimestamp: z.string().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
  finalizers: z.array(z.string()).optional(),
});
export type ObjectMeta = z.infer<typeof ObjectMeta>;

// ---------------------------------------------------------------------------------------------------------
// Cloud names
// ---------------------------------------------------------------------------------------------------------

export const MAX_CLOUD_NAME_LENGTH = 63;

const shortHash = (text: string): string => createHash("sha256").update(text).digest("hex").slice(0, 8);

/** `head` cut so that `-<hash>` fits in 63 characters, without a separator left before the hash. */
function withHash(head: string, hash: string): string {
  return `${head.slice(0, MAX_CLOUD_NAME_LENGTH - hash.length - 1).replace(/[-.]+$/, "")}-${hash}`;
}

/**
 * The cloud name of an object without spec.cloudName, lowercase, at most 63 characters, never the same for two
 * objects: `<namespace>-<name>` when the namespace has no `-` (a namespace cannot hold a `.`, so the first `-`
 * separates namespace and name: nothing else maps to the same text) and it fits. Otherwise the readable
 * `<namespace>-<name>` (cut to fit) gets `-<8 hex digits of sha256("<namespace>/<name>")>`: `default/reset-vm`
 * is `default-reset-vm`, `default-reset/vm` is `default-reset-vm-2e0de793`. Stable, so a re-created object or a
 * restarted operator finds the same cloud resource again.
 */
export function defaultCloudName(namespace: string, name: string): string {
  if (namespace === "" || name === "") throw new Error("defaultCloudName needs a namespace and a name");
  const full = `${namespace}-${name}`.toLowerCase();
  if (namespace.includes("-")) return withHash(full, shortHash(`${namespace}/${name}`.toLowerCase()));
  return full.length <= MAX_CLOUD_NAME_LENGTH ? full : withHash(full, shortHash(full));
}

// ---------------------------------------------------------------------------------------------------------
// Managed spec base
// ---------------------------------------------------------------------------------------------------------

export const DELETION_POLICIES = ["Delete", "Orphan"] as const;
export const MANAGEMENT_POLICIES = ["Manage", "Observe"] as const;

export const CredentialsRef = localObjectReference(
  "The Secret in the same namespace that holds the cloud credentials: key apiKey (or keys email and password), " +
    "key projectId, and optionally apiUrl (one the operator's --allowed-api-urls allows; else its --api-url). It " +
    `must carry the label ${SECRET_WATCH_SELECTOR}. Defaults to ${DEFAULT_CREDENTIALS_SECRET} (or the operator's ` +
    "--credentials-secret when this namespace has none). A change of the Secret is picked up at once.",
  "Name of the Secret.",
);

/** Fields every kind's spec starts with. Spread into each kind's z.object. */
export const managedSpecShape = {
  cloudName: matching(z.string().min(1).max(MAX_CLOUD_NAME_LENGTH), CLOUD_NAME_PATTERN, CLOUD_NAME_EXPECTED)
    .optional()
    .meta({
      description:
        "Name of the resource in the cloud. Defaults to <namespace>-<name> (lowercase), with a hash suffix " +
        "when the namespace holds a '-' or the name is longer than 63 characters, so that no two objects share " +
        "a default name. Cannot change once set.",
    }),
  credentialsRef: CredentialsRef.default({ name: DEFAULT_CREDENTIALS_SECRET }),
  deletionPolicy: z.enum(DELETION_POLICIES).default("Delete").meta({
    description: "What happens to the cloud resource when this object is deleted: Delete it, or Orphan (keep) it.",
  }),
  managementPolicy: z
    .enum(MANAGEMENT_POLICIES)
    .default("Manage")
    .meta({
      description:
        "Manage: create, change and delete the cloud resource. Observe: only read it into status (needs id or " +
        "an existing resource with the cloud name).",
    }),
  id: z.string().min(1).max(128).optional().meta({
    description: "Id of an existing cloud resource to adopt instead of creating one. Cannot change once set.",
  }),
};

/** Spec-level rules every kind carries. */
export const managedSpecRules: readonly CelRule[] = [immutableOnceSet("cloudName"), immutableOnceSet("id")];

// ---------------------------------------------------------------------------------------------------------
// Status base
// ---------------------------------------------------------------------------------------------------------

export const Condition = z
  .object({
    type: z
      .string()
      .min(1)
      .max(316)
      .meta({ description: `Condition type: ${CONDITION_TYPES.join(", ")}.` }),
    status: z.enum(CONDITION_STATUSES).meta({ description: "True, False or Unknown." }),
    reason: matching(
      z.string().min(1).max(1024),
      /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/,
      "must be a CamelCase reason such as Available",
    ).meta({ description: "One of the fixed reasons (CamelCase), see docs/crd-reference.md." }),
    message: z.string().max(32768).optional().meta({ description: "Human-readable detail." }),
    lastTransitionTime: timestamp("When the status of this condition last changed."),
    observedGeneration: z
      .int()
      .min(0)
      .optional()
      .meta({ description: "metadata.generation the condition was computed from." }),
  })
  .meta({ description: "An observation of the object's state (kstatus-compatible)." });
export type Condition = z.infer<typeof Condition>;

/** At most this many status fields ride with an action (its intent, then its operation). */
export const MAX_ACTION_FIELDS = 4;

export const OperationRecord = z
  .object({
    id: text("Cloud operation id.", 128),
    name: text("Operation name: CREATE, UPDATE, DELETE, START, STOP, RESET or RESIZE.", 32),
    state: text(
      "IN_PROGRESS, SUCCEEDED or FAILED; UNKNOWN when its end was not seen: the operation left the cloud's lists " +
        "(the resource is read to decide), or the server cannot show it and its resource did not show the change in time.",
      32,
    ),
    startedAt: text("When the operation started (cloud timestamp).", 64).optional(),
    completedAt: text("When the operation finished (cloud timestamp); empty while in progress.", 64).optional(),
    fields: z
      .record(z.string().max(63), z.string().max(64).meta({ description: "The value to set." }))
      .optional()
      .meta({
        description: "Status fields set when the operation succeeds (e.g. lastResetRequestedAt of a RESET).",
        maxProperties: MAX_ACTION_FIELDS,
      }),
  })
  .meta({ description: "A cloud operation started for this object." });
export type OperationRecord = z.infer<typeof OperationRecord>;

export const MAX_OPERATION_HISTORY = 10;

export const CreatePending = z
  .object({
    cloudName: text("Cloud name the create was requested with.", MAX_CLOUD_NAME_LENGTH),
    location: text("Location the create was requested in (empty for kinds without location).", 63).optional(),
    requestedAt: timestamp("When the create was requested."),
  })
  .meta({
    description:
      "Recorded before a create is sent, so that after a crash the operator looks the resource up by name " +
      "instead of creating a second one.",
  });
export type CreatePending = z.infer<typeof CreatePending>;

export const ActionPending = z
  .object({
    name: text("Operation name of the action: START, STOP, RESET, UPDATE, RESIZE, PATCH or DELETE.", 32),
    id: text("Id of the cloud resource it is sent to.", 128),
    requestedAt: timestamp("When the action was recorded, before it was sent."),
    resourceUpdatedAt: text(
      "The resource's updated_at (the cloud's clock) as observed before the action was sent: a later one shows " +
        "the action carried out when its operation cannot be found.",
      64,
    ).optional(),
    fields: z
      .record(z.string().max(63), z.string().max(64).meta({ description: "The value to set." }))
      .optional()
      .meta({
        description: "Status fields set once the action is confirmed (e.g. lastResetRequestedAt).",
        maxProperties: MAX_ACTION_FIELDS,
      }),
  })
  .meta({
    description:
      "A change that is not idempotent (START, STOP, RESET, UPDATE, RESIZE, PATCH, DELETE), recorded before it " +
      "is sent: after a crash or a failed status write the operator looks its operation up instead of sending " +
      "it again.",
  });
export type ActionPending = z.infer<typeof ActionPending>;

/** Fields every kind's status starts with. Spread into each kind's z.object. */
export const managedStatusShape = {
  observedGeneration: z
    .int()
    .min(0)
    .optional()
    .meta({ description: "metadata.generation the status was last computed from." }),
  conditions: z
    .array(Condition)
    .max(8)
    .optional()
    .meta({
      description: `Conditions: ${CONDITION_TYPES.join(", ")} (see docs/crd-reference.md).`,
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["type"],
    }),
  id: text("Id of the cloud resource.", 128).optional(),
  cloudName: text("Name of the resource in the cloud.", MAX_CLOUD_NAME_LENGTH).optional(),
  projectId: text("Cloud project the resource lives in.", 128).optional(),
  operation: OperationRecord.optional(),
  operations: z
    .array(OperationRecord)
    .max(MAX_OPERATION_HISTORY)
    .optional()
    .meta({ description: `Recent cloud operations, newest first (at most ${MAX_OPERATION_HISTORY}).` }),
  lastError: text(
    "The message of the last stall (Stalled=True); removed once the object is Ready with reason Available.",
    4096,
  ).optional(),
  createPending: CreatePending.optional(),
  actionPending: ActionPending.optional(),
  createOnlyDigests: z
    .record(z.string().max(63), z.string().max(16).meta({ description: "First 16 hex digits of its sha256." }))
    .optional()
    .meta({
      description:
        "Digests of the create-only values the resource was created with (a GpuVm's image, SSH key and " +
        "scripts, inline or from a Secret/ConfigMap): a later change shows as UpToDate=False.",
      maxProperties: 8,
    }),
  locationIndex: z
    .int()
    .min(0)
    .max(64)
    .optional()
    .meta({ description: "Position in the location fallback list currently being tried." }),
};

/** The managed part of every kind, for code that handles all kinds alike (the generic reconciler). */
export const ManagedSpec = z.object(managedSpecShape);
export type ManagedSpec = z.infer<typeof ManagedSpec>;
export const ManagedStatus = z.object(managedStatusShape);
export type ManagedStatus = z.infer<typeof ManagedStatus>;

/** What every parsed GpuVm, GpuDisk, GpuNetwork and GpuFirewallRule is assignable to. */
export interface ManagedResource {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec: ManagedSpec;
  status?: ManagedStatus;
}

/** The condition of the given type, if present. */
export function findCondition(
  conditions: readonly Condition[] | undefined,
  type: ConditionType,
): Condition | undefined {
  return conditions?.find((condition) => condition.type === type);
}
