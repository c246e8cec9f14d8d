// The condition vocabulary of every status: the condition types (kstatus' three and the operator's two), their
// statuses, and the fixed set of reasons with what each means for the user (rendered into docs/crd-reference.md).

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
  NotPaused: "NotPaused",
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
  Paused:
    "The gpucloud.dev/paused annotation is set; the operator makes no cloud calls for this object. On a GpuCluster " +
    "or GpuMachine (condition Paused=True): its Cluster's spec.paused or its cluster.x-k8s.io/paused annotation " +
    "stops it, and the operator objects it owns are paused too.",
  NotPaused:
    "Paused=False on a GpuCluster or GpuMachine: it is reconciled (Cluster API's reason), or it waits for what it " +
    "owns to finish a create before it pauses.",
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
