// Shared pieces of the custom resources: group/version, annotations, condition vocabulary, the managed
// spec and status bases, and the small zod helpers every kind file uses so that each field carries a
// description (kubectl explain and docs/crd-reference.md read them) and a length bound (CEL cost estimation).
import { createHash } from "node:crypto";
import { z } from "zod";

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

/**
 * Condition types. Ready, Reconciling and Stalled are kstatus' (kubectl wait, Argo CD and Flux read them);
 * Synced (is the cloud resource in step with the spec?) and UpToDate (were its create-only values applied?) are
 * informational: kstatus and the Argo CD health check ignore them (docs/adr/0012-what-kubectl-shows.md).
 */
export const CONDITION_TYPES = ["Ready", "Reconciling", "Stalled", "Synced", "UpToDate"] as const;
export type ConditionType = (typeof CONDITION_TYPES)[number];
export const CONDITION_STATUSES = ["True", "False", "Unknown"] as const;
export type ConditionStatus = (typeof CONDITION_STATUSES)[number];

/** The fixed set of condition and event reasons. */
export const REASONS = {
  Creating: "Creating",
  Updating: "Updating",
  Deleting: "Deleting",
  Scaling: "Scaling",
  RollingUpdate: "RollingUpdate",
  ReplicaFailure: "ReplicaFailure",
  Adopted: "Adopted",
  WaitingForOperation: "WaitingForOperation",
  WaitingForDependency: "WaitingForDependency",
  WaitingForOwner: "WaitingForOwner",
  CapacityUnavailable: "CapacityUnavailable",
  PaymentMethodRequired: "PaymentMethodRequired",
  CredentialsMissing: "CredentialsMissing",
  CredentialsInvalid: "CredentialsInvalid",
  ApiUrlNotAllowed: "ApiUrlNotAllowed",
  InvalidSpec: "InvalidSpec",
  ImmutableFieldChanged: "ImmutableFieldChanged",
  NameConflict: "NameConflict",
  AccountChanged: "AccountChanged",
  NotPermitted: "NotPermitted",
  RateLimited: "RateLimited",
  ApiUnavailable: "ApiUnavailable",
  NotSupported: "NotSupported",
  OperationFailed: "OperationFailed",
  Paused: "Paused",
  Observed: "Observed",
  Available: "Available",
  StatusRejected: "StatusRejected",
  CreateOnlyFieldChanged: "CreateOnlyFieldChanged",
  CreateOnlyFieldsApplied: "CreateOnlyFieldsApplied",
  ReferenceNotFound: "ReferenceNotFound",
  ReferenceDeleting: "ReferenceDeleting",
  InUse: "InUse",
  InternalError: "InternalError",
  BudgetExceeded: "BudgetExceeded",
  WithinLimit: "WithinLimit",
  OverLimit: "OverLimit",
} as const;
export type Reason = (typeof REASONS)[keyof typeof REASONS];

/** One line per reason: what it means for the user. Rendered into docs/crd-reference.md. */
export const REASON_DESCRIPTIONS: Readonly<Record<Reason, string>> = {
  Creating: "The cloud resource is being created (create requested or its operation in progress).",
  Updating: "The cloud resource is being changed to match the spec (type, disks, power state, rules, size).",
  Deleting: "The object is being deleted and the cloud resource is being removed (or orphaned).",
  Scaling: "GpuVmPool: replicas are being created or removed to reach spec.replicas.",
  RollingUpdate:
    "GpuVmPool: replicas are being replaced (create-only template fields changed) or changed in place, within " +
    "maxUnavailable and maxSurge.",
  ReplicaFailure: "GpuVmPool: a replica is Stalled for a reason other than capacity; its GpuVm says why.",
  Adopted: "GpuVmPool: a GpuVm (or GpuDisk) matching the pool's selector without an owner was taken over.",
  WaitingForOperation: "A cloud operation is in progress; the operator polls it before doing anything else.",
  WaitingForDependency:
    "A referenced object (GpuDisk, GpuNetwork, GpuVm) is not Ready yet, or one being deleted still holds this " +
    "object (a VM detaching a disk); resolves itself.",
  WaitingForOwner:
    "Synced=False: sharded operator, and no replica of this object's shard has held its Lease for a while, so a " +
    "spec change (metadata.generation above status.observedGeneration) waits; written by another shard's leader " +
    "(gpucloud_operator_objects_without_owner counts such objects).",
  CapacityUnavailable:
    "No location in the list has capacity for the VM type right now; retried with backoff. On a GpuVmPool: some " +
    "replicas cannot be placed in any of spec.placement.locations; the others run.",
  PaymentMethodRequired: "The organization has no valid payment method; resources cannot be created until it does.",
  CredentialsMissing: "The credentials Secret, or a key in it, does not exist.",
  CredentialsInvalid: "The cloud API rejected the credentials (401/403); fixed by updating the Secret.",
  ApiUrlNotAllowed:
    "The credentials Secret names an apiUrl the operator may not call (--allowed-api-urls); no request is sent. " +
    "Fix the Secret, or have the operator's administrator allow the URL.",
  InvalidSpec:
    "The spec is invalid for the cloud (refused with 400, 413 too large, 422 or another 4xx it would answer " +
    "again, or unknown type, image or location); the message says what to change.",
  ImmutableFieldChanged: "A field that cannot change after creation was changed; revert it or recreate the object.",
  NameConflict:
    "A name is taken by something this object does not own: a cloud resource another object manages or this " +
    "object did not create (set spec.id to adopt it), or a Secret/ConfigMap for connection details it did not write.",
  AccountChanged:
    "The credentials Secret now names another project (or API URL) than the one holding this object's cloud " +
    "resource: nothing is created in the new one. Restore the Secret, or release the resource (deletionPolicy " +
    "Orphan) and adopt it anew.",
  NotPermitted:
    "The operator's configuration does not allow what this object asks: observing a cloud resource that an " +
    "object of another namespace manages (--allow-cross-namespace-observe).",
  RateLimited: "The cloud API answered 429; the operator waits for Retry-After before trying again.",
  ApiUnavailable: "The cloud API is unreachable or failing (network error, timeout, 5xx); retried with backoff.",
  NotSupported:
    "The cloud API does not offer an endpoint this change needs (404/405 on that route), or refuses the form of the operator's request (415 and the like): the message says what to do instead (deletionPolicy: Orphan to let a resource the server cannot delete go).",
  OperationFailed: "A cloud operation ended FAILED; the message carries the cloud's code and text.",
  Paused: "The gpucloud.dev/paused annotation is set; the operator makes no cloud calls for this object.",
  Observed: "managementPolicy is Observe: the cloud resource is read into status but never changed.",
  Available: "The cloud resource exists and matches the spec.",
  StatusRejected:
    "The status could not be written (a value does not fit the CRD, or the API server refused it): a bug to " +
    "report. Nothing more is sent for the object until its spec changes or 10 minutes pass.",
  CreateOnlyFieldChanged:
    "UpToDate=False: a value the cloud takes only at creation (a GpuVm's SSH key or a script from a Secret or " +
    "ConfigMap) changed after the resource was created; it is not applied. Restore it, or re-create the object.",
  CreateOnlyFieldsApplied: "UpToDate=True: the resource was created with the current create-only values.",
  ReferenceNotFound:
    "Stalled: a referenced object (GpuDisk, GpuNetwork, GpuVm, Secret, ConfigMap) or a key in it does not exist. " +
    "Create it or correct the reference; the object proceeds by itself once it exists.",
  ReferenceDeleting:
    "Stalled: a referenced object is being deleted while this object still refers to it. Remove the reference " +
    "from this object's spec (or delete this object too).",
  InUse:
    "Stalled: the object is being deleted but something its owner still declares uses it (a GpuVm whose " +
    "spec.disks lists the disk, a VM no GpuVm manages, a GpuFirewallRule on the network). Remove that use; the " +
    "deletion proceeds by itself then.",
  InternalError:
    "The operator met an unexpected error of its own (a bug, logged at error level with its stack); retried " +
    "with backoff.",
  BudgetExceeded:
    "The action (a create, a START, a larger type, a disk create or growth) waits for room in a GpuBudget: the " +
    "message says how much is missing, in which budget, and what uses it. It proceeds by itself when room frees " +
    "(higher priority first, then the one waiting longer), or when the budget's limit is raised.",
  WithinLimit: "GpuBudget: what the objects it covers use and reserve is within its limits.",
  OverLimit:
    "GpuBudget (Stalled): what the covered objects use is above the limit (it was lowered, or resources were found " +
    "billing); nothing is deleted, new spend waits until the use is below the limit. The message says by how much.",
};

// ---------------------------------------------------------------------------------------------------------
// zod helpers: every field gets a description; strings get length bounds
// ---------------------------------------------------------------------------------------------------------

/** A Kubernetes object name (DNS subdomain) in the same namespace. */
export const OBJECT_NAME_PATTERN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
export const OBJECT_NAME_EXPECTED =
  "must be an object name such as my-disk: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit";
/** A key in a Secret or ConfigMap. */
export const DATA_KEY_PATTERN = /^[-._a-zA-Z0-9]+$/;
export const DATA_KEY_EXPECTED =
  "must be a Secret or ConfigMap key such as id_ed25519.pub: letters, digits, '-', '_' and '.'";
/** A cloud location identifier such as `us-east1-a`. */
export const LOCATION_PATTERN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const LOCATION_EXPECTED =
  "must be a location such as us-east1-a: lowercase letters, digits and '-', starting and ending with a letter or digit";
/** A name as the cloud accepts it: lowercase letters, digits, `-` and `.`, at most 63 characters. */
export const CLOUD_NAME_PATTERN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
export const CLOUD_NAME_EXPECTED =
  "must be a cloud name such as team-a-trainer: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit";

/** A CEL string literal (single-quoted) holding `text`. */
export function celString(text: string): string {
  return `'${text.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
}

/** The CEL rule that `self` matches `pattern`; `expected` is what the API server says instead of the expression. */
export function matchesRule(pattern: RegExp, expected: string): CelRule {
  return { rule: `self.matches(${celString(pattern.source)})`, message: expected };
}

/**
 * `schema` constrained to `pattern`, said in words: zod reports `expected`, and the CRD carries a CEL rule with
 * `expected` as its message instead of an OpenAPI `pattern` (the API server would print the raw expression). The
 * generator refuses a `pattern` without such a rule (src/api/crd.ts). `rules` are further rules on the same field,
 * which should hold only for a value that matches (guard them with the pattern, so that one mistake is one error).
 */
export function matching(schema: z.ZodString, pattern: RegExp, expected: string, rules: readonly CelRule[] = []) {
  return schema
    .regex(pattern, expected)
    .meta({ "x-kubernetes-validations": [matchesRule(pattern, expected), ...rules] });
}

/** `rule`, evaluated only when `expr` matches `pattern` (a malformed value has its own error already). */
export function whenMatching(expr: string, pattern: RegExp, rule: string): string {
  return `!${expr}.matches(${celString(pattern.source)}) || (${rule})`;
}

/** A bounded string with a description. */
export function text(description: string, maxLength = 253) {
  return z.string().max(maxLength).meta({ description });
}

/** A reference to another object of the same namespace by name. */
export function localObjectReference(description: string, nameDescription: string) {
  return z
    .object({
      name: matching(z.string().min(1).max(253), OBJECT_NAME_PATTERN, OBJECT_NAME_EXPECTED).meta({
        description: nameDescription,
      }),
    })
    .meta({ description });
}

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

export interface CelRule {
  rule: string;
  message: string;
  /** A CEL expression for the message (may name the value, e.g. the corrected CIDR); `message` is its fallback. */
  messageExpression?: string;
  /** Optional: the field the error is reported on (relative to the node carrying the rule). */
  fieldPath?: string;
  reason?: "FieldValueInvalid" | "FieldValueForbidden" | "FieldValueRequired" | "FieldValueDuplicate";
}

/** `field` cannot change once set, and cannot be removed (spec-level transition rule). */
export function immutableOnceSet(field: string): CelRule {
  return {
    rule: `!has(oldSelf.${field}) || (has(self.${field}) && self.${field} == oldSelf.${field})`,
    message: `${field} cannot change once set`,
    fieldPath: `.${field}`,
  };
}

/** `field` cannot change, be added or be removed after creation; `instead` says what to do instead. */
export function immutable(field: string, instead?: string): CelRule {
  return {
    rule: `has(self.${field}) == has(oldSelf.${field}) && (!has(self.${field}) || self.${field} == oldSelf.${field})`,
    message: instead === undefined ? `${field} is immutable` : `${field} is immutable: ${instead}`,
    fieldPath: `.${field}`,
  };
}

/** Exactly one of the fields is set. */
export function exactlyOneOf(fields: readonly string[], message: string): CelRule {
  return { rule: `[${fields.map((f) => `has(self.${f})`).join(", ")}].filter(x, x).size() == 1`, message };
}

/** At most one of the fields is set. */
export function atMostOneOf(fields: readonly string[], message: string): CelRule {
  return { rule: `[${fields.map((f) => `has(self.${f})`).join(", ")}].filter(x, x).size() <= 1`, message };
}

/** Spec-level rules every kind carries. */
export const managedSpecRules: readonly CelRule[] = [immutableOnceSet("cloudName"), immutableOnceSet("id")];

/** zod mirror of exactlyOneOf/atMostOneOf, for superRefine. */
export function countSet(value: Record<string, unknown>, fields: readonly string[]): number {
  return fields.filter((field) => value[field] !== undefined).length;
}

// ---------------------------------------------------------------------------------------------------------
// Status base
// ---------------------------------------------------------------------------------------------------------

/** A Kubernetes timestamp (RFC 3339). Enforced by the API server; read tolerantly. */
export function timestamp(description: string) {
  return z.string().max(64).meta({ description, format: "date-time" });
}

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

// ---------------------------------------------------------------------------------------------------------
// Kind descriptors
// ---------------------------------------------------------------------------------------------------------

export interface PrinterColumn {
  name: string;
  type: "string" | "integer" | "number" | "boolean" | "date";
  jsonPath: string;
  description: string;
  priority?: number;
}

export const READY_COLUMN: PrinterColumn = {
  name: "Ready",
  type: "string",
  jsonPath: '.status.conditions[?(@.type=="Ready")].status',
  description: "Status of the Ready condition.",
};
export const REASON_COLUMN: PrinterColumn = {
  name: "Reason",
  type: "string",
  jsonPath: '.status.conditions[?(@.type=="Ready")].reason',
  description: "Reason of the Ready condition.",
};
export const AGE_COLUMN: PrinterColumn = {
  name: "Age",
  type: "date",
  jsonPath: ".metadata.creationTimestamp",
  description: "Time since the object was created.",
};
export const ID_COLUMN: PrinterColumn = {
  name: "ID",
  type: "string",
  jsonPath: ".status.id",
  description: "Id of the cloud resource.",
  priority: 1,
};

export const SYNCED_COLUMN: PrinterColumn = {
  name: "Synced",
  type: "string",
  jsonPath: '.status.conditions[?(@.type=="Synced")].status',
  description: "Status of the Synced condition: whether the cloud resource is in step with the spec.",
};

/** The columns every managed kind ends with (after its own): Ready, Synced, Reason, ID, Age. */
export const MANAGED_COLUMNS: readonly PrinterColumn[] = [
  READY_COLUMN,
  SYNCED_COLUMN,
  REASON_COLUMN,
  ID_COLUMN,
  AGE_COLUMN,
];

export interface KindInfo<
  Schema extends z.ZodType = z.ZodType,
  SpecSchema extends z.ZodType = z.ZodType,
  StatusSchema extends z.ZodType = z.ZodType,
> {
  /** API group and version: gpucloud.dev/v1alpha1 unless the kind implements another project's contract. */
  group: string;
  version: string;
  /** `<group>/<version>`, the objects' apiVersion. */
  apiVersion: string;
  /** Labels of the CRD beyond the project's own (Cluster API's contract label, for instance). */
  crdLabels: Readonly<Record<string, string>>;
  kind: string;
  plural: string;
  singular: string;
  shortNames: readonly string[];
  listKind: string;
  categories: readonly string[];
  /** One paragraph: the CRD's top-level description (kubectl explain <kind>). */
  description: string;
  schema: Schema;
  specSchema: SpecSchema;
  statusSchema: StatusSchema;
  printerColumns: readonly PrinterColumn[];
  /** The scale subresource (kubectl scale, HorizontalPodAutoscaler), for kinds that have replicas. */
  scale?: ScaleSubresource;
}

/** JSON paths of the scale subresource: `.spec.replicas`, `.status.replicas` and a label-selector string. */
export interface ScaleSubresource {
  specReplicasPath: string;
  statusReplicasPath: string;
  labelSelectorPath?: string;
}

/** The apiVersion/kind/metadata envelope of a kind's object schema. */
export function objectEnvelope<K extends string>(kind: K, apiVersion: string = API_VERSION) {
  return {
    apiVersion: z.literal(apiVersion).default(apiVersion),
    kind: z.literal(kind).default(kind),
    metadata: ObjectMeta,
  };
}

/**
 * A kind's descriptor: its object schema (the envelope, `spec`, an optional `status`), its names (`GpuDisk` →
 * plural `gpudisks`, singular `gpudisk`, `GpuDiskList`) and the `gpucloud` category.
 */
export function defineKind<K extends string, Spec extends z.ZodType, Status extends z.ZodType>(options: {
  /** Default: gpucloud.dev. */
  group?: string;
  /** Default: v1alpha1. */
  version?: string;
  crdLabels?: Readonly<Record<string, string>>;
  kind: K;
  shortNames: readonly string[];
  description: string;
  spec: Spec;
  status: Status;
  printerColumns: readonly PrinterColumn[];
  scale?: ScaleSubresource;
  /** Default: the `gpucloud` category (`kubectl get gpucloud`). */
  categories?: readonly string[];
}) {
  const { kind, shortNames, description, spec, status, printerColumns, scale } = options;
  const group = options.group ?? GROUP;
  const version = options.version ?? VERSION;
  const apiVersion = `${group}/${version}`;
  const schema = z.object({ ...objectEnvelope(kind, apiVersion), spec, status: status.optional() });
  const singular = kind.toLowerCase();
  const info: KindInfo<typeof schema, Spec, Status> = {
    group,
    version,
    apiVersion,
    crdLabels: options.crdLabels ?? {},
    kind,
    plural: `${singular}s`,
    singular,
    shortNames,
    listKind: `${kind}List`,
    categories: options.categories ?? [CATEGORY],
    description,
    schema,
    specSchema: spec,
    statusSchema: status,
    printerColumns,
    ...(scale !== undefined ? { scale } : {}),
  };
  return info;
}
