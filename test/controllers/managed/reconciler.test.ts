// Table tests of the generic lifecycle against plain fake ExternalClients (object literals that record calls).

import pino from "pino";
import { describe, expect, it } from "vitest";
import { FINALIZER } from "../../../src/api/common.ts";
import { CloudError } from "../../../src/cloud/errors.ts";
import type { Operation } from "../../../src/cloud/wire.ts";
import type { OperationProgress } from "../../../src/controllers/accounts/cloud-account.ts";
import type { KubeAccess } from "../../../src/controllers/core/kube-access.ts";
import type { ReconcileTiming } from "../../../src/controllers/core/lifecycle.ts";
import type { ManagedObject, ManagedSpecBase, ManagedStatusBase } from "../../../src/controllers/core/object-model.ts";
import type {
  CreateAnswer,
  ExternalClient,
  FoundResource,
  Observation,
  UpdateAnswer,
} from "../../../src/controllers/managed/external.ts";
import type { CloudConnection } from "../../../src/controllers/managed/pass.ts";
import { ManagedReconciler } from "../../../src/controllers/managed/reconciler.ts";
import { memoryClaims } from "../memory-claims.ts";

interface TestSpec extends ManagedSpecBase {
  locations?: string[];
}

const NOW = Date.parse("2026-11-21T12:00:00Z");
const ACCOUNT = { apiUrl: "https://cloud.test/v0.1", projectId: "project-1" };
const slot = (cloudName: string, projectId = "project-1") => ({
  kind: "GpuVm" as const,
  ...ACCOUNT,
  projectId,
  cloudName,
});

/**
 * The claims as they stand when a pass starts: by default the object holds one for what its status shows (the id it
 * created or adopted, or the name its create intent is under); `seed: false` for an object that holds none.
 */
function claimsHeldFor(
  given: ManagedObject<TestSpec>,
  seed?: { id?: string; cloudName?: string; projectId?: string } | false,
) {
  const claims = memoryClaims();
  if (seed === false) return claims;
  const id = seed?.id ?? given.status.id;
  const cloudName = seed?.cloudName ?? given.status.createPending?.cloudName ?? "ns-thing";
  if (id !== undefined || seed !== undefined || given.status.createPending !== undefined) {
    const holder = { namespace: given.metadata.namespace, name: given.metadata.name, uid: given.metadata.uid };
    claims.records.seed(slot(cloudName, seed?.projectId), holder, id);
  }
  return claims;
}
/** The wait the account gives an object following an operation the server cannot show. */
const FOLLOW_TURN_MS = 1234;

/** Good credentials, no operation in flight, nothing to find: all a pass needs besides the kind's client. */
function plainConnection(external: ExternalClient<TestSpec>): CloudConnection<TestSpec> {
  return {
    external,
    projectId: "project-1",
    account: ACCOUNT,
    usingCachedCredentials: false,
    paymentProblem: async () => undefined,
    operation: () => ({ state: "pending" }),
    nextFollowTurnMs: () => FOLLOW_TURN_MS,
    findOperations: async () => [],
  };
}

function operation(name: string, state = "IN_PROGRESS", result: unknown = null): Operation {
  return {
    operation_id: `op-${name.toLowerCase()}`,
    state,
    metadata: { operation_name: name, id: "res-1", type: "vm" },
    result,
    started_at: "2026-11-21T12:00:00Z",
    completed_at: state === "IN_PROGRESS" ? "" : "2026-11-21T12:00:01Z",
  };
}

function object(overrides: {
  spec?: Partial<TestSpec>;
  status?: ManagedStatusBase;
  finalizers?: string[];
  deleting?: boolean;
  annotations?: Record<string, string>;
}): ManagedObject<TestSpec> {
  return {
    apiVersion: "gpucloud.dev/v1alpha1",
    kind: "GpuVm",
    metadata: {
      namespace: "ns",
      name: "thing",
      uid: "uid-1",
      generation: 1,
      resourceVersion: "1",
      finalizers: overrides.finalizers ?? [],
      annotations: overrides.annotations ?? {},
      labels: {},
      ...(overrides.deleting ? { deletionTimestamp: "2026-11-21T11:00:00Z" } : {}),
    },
    spec: { deletionPolicy: "Delete", managementPolicy: "Manage", ...overrides.spec },
    status: overrides.status ?? {},
  };
}

interface Harness {
  calls: string[];
  /** Status writes and sent requests, in order. */
  sequence: string[];
  /** Messages logged at error level. */
  errors: string[];
  statuses: ManagedStatusBase[];
  finalizerWrites: boolean[];
  events: string[];
  claimWrites: string[];
}

interface Row {
  reason: string;
  given: ManagedObject<TestSpec>;
  observe?: Observation;
  /** What observe answers from its second call on (default: the same as the first). */
  observeAfter?: Observation;
  create?: () => Promise<CreateAnswer>;
  update?: UpdateAnswer;
  /** What the DELETE request does when sent (default: an operation in progress). */
  deleteSend?: () => Promise<Operation>;
  /** One answer for every lookup, or one per lookup in order. */
  findByName?: FoundResource | (FoundResource | undefined)[];
  progress?: OperationProgress;
  /** The claim this object holds (default: what its status shows, see claimsHeldFor); false: none. */
  claim?: { id?: string; cloudName?: string; projectId?: string } | false;
  /** Claims other objects hold. */
  otherClaims?: { namespace: string; name: string; cloudName: string; id?: string }[];
  /** The reconciler's timing over the defaults. */
  timing?: Partial<ReconcileTiming>;
  /** The API server refuses status writes for which this answers a message (a 422). */
  refuseWrite?: (status: ManagedStatusBase) => string | undefined;
  /** What the cloud lists for a recorded action (newest first). */
  foundOperations?: Operation[];
  credentialsMissing?: boolean;
  /** The credentials Secret is being deleted or gone: its last credentials are in use. */
  cachedCredentials?: boolean;
  paymentProblem?: string;
  /** The clock (default NOW). */
  now?: number;
  want: {
    outcome: string;
    /** The wait of a requeueAfter outcome, when the row cares. */
    afterMs?: number;
    calls: string[];
    /** The claim writes, in order (`create <name>`, `id <name> <id|->`, `delete <name>`). */
    claimWrites?: string[];
    ready?: string;
    stalled?: string;
    reconciling?: string;
    upToDate?: string;
    /** Fields the last status must not have (nothing of a resource this object does not own). */
    absent?: string[];
    conditionReason?: string;
    finalizerWrites?: boolean[];
    firstStatus?: Record<string, unknown>;
    lastStatus?: Record<string, unknown>;
    eventIncludes?: string;
    /** Status writes and sent requests, in order. */
    sequence?: string[];
    errorLogged?: boolean;
  };
}

/** An object whose operation `name` (started a minute before NOW unless told) is in flight. */
function withOperation(
  name: string,
  extra: { deleting?: boolean; startedAt?: string; status?: ManagedStatusBase } = {},
): ManagedObject<TestSpec> {
  const startedAt = extra.startedAt ?? "2026-11-21T11:59:00Z";
  return object({
    finalizers: [FINALIZER],
    ...(extra.deleting ? { deleting: true } : {}),
    status: {
      id: "res-1",
      ...extra.status,
      operation: { id: `op-${name.toLowerCase()}`, name, state: "IN_PROGRESS", startedAt },
    },
  });
}

/** A RESET recorded 5 s ago (by another replica, or before a restart) whose operation shows nowhere. */
const resetRecordedJustNow = (): ManagedObject<TestSpec> =>
  object({
    finalizers: [FINALIZER],
    status: {
      id: "res-1",
      actionPending: {
        name: "RESET",
        id: "res-1",
        requestedAt: "2026-11-21T11:59:55.000Z",
        resourceUpdatedAt: "2026-11-21T11:50:00Z",
        fields: { lastResetRequestedAt: "now" },
      },
    },
  });

const available: Observation = {
  exists: true,
  id: "res-1",
  name: "ns-thing",
  ready: true,
  upToDate: true,
  atProvider: { state: "ok" },
};

function run(row: Row): Promise<{ outcome: string; afterMs: number | undefined; harness: Harness }> {
  const harness: Harness = {
    calls: [],
    statuses: [],
    finalizerWrites: [],
    events: [],
    sequence: [],
    errors: [],
    claimWrites: [],
  };
  const stored = structuredClone(row.given);
  const kube: KubeAccess = {
    get: () => stored,
    writeStatus: async (_mr, status) => {
      harness.statuses.push(structuredClone(status));
      harness.sequence.push(`write${status.actionPending ? ` intent ${status.actionPending.name}` : ""}`);
      const refusal = row.refuseWrite?.(status);
      if (refusal !== undefined) return { type: "invalid", message: refusal };
      return { type: "written", resourceVersion: String(harness.statuses.length + 1) };
    },
    setFinalizer: async (_mr, present) => {
      harness.finalizerWrites.push(present);
      return { type: "written", resourceVersion: "9" };
    },
    event: (_mr, type, reason, note) => harness.events.push(`${type} ${reason} ${note}`),
  };
  const external: ExternalClient<TestSpec> = {
    resolve: async () => ({ type: "ready", resolved: undefined }),
    observe: async () => {
      harness.calls.push("observe");
      const first = harness.calls.filter((call) => call === "observe").length === 1;
      return (first ? row.observe : (row.observeAfter ?? row.observe)) ?? { exists: false };
    },
    findByName: async () => {
      harness.calls.push("findByName");
      const answers = row.findByName;
      if (!Array.isArray(answers)) return answers;
      return answers[harness.calls.filter((call) => call === "findByName").length - 1];
    },
    create: async () => {
      harness.calls.push("create");
      return row.create ? row.create() : { type: "started", operation: operation("CREATE") };
    },
    update: async () => {
      harness.calls.push("update");
      const update = row.update ?? { type: "unchanged" };
      if (update.type !== "action") return update;
      return {
        ...update,
        send: () => {
          harness.sequence.push(`send ${update.action}`);
          return update.send();
        },
      };
    },
    delete: async () => {
      harness.calls.push("delete");
      return {
        type: "action",
        action: "DELETE",
        send: async () => {
          harness.calls.push("send DELETE");
          return row.deleteSend ? row.deleteSend() : operation("DELETE");
        },
      };
    },
  };
  const connection: CloudConnection<TestSpec> = {
    external,
    projectId: "project-1",
    account: ACCOUNT,
    usingCachedCredentials: row.cachedCredentials ?? false,
    credentialsSource: "Secret ns/gpucloud-credentials (key apiKey)",
    paymentProblem: async () => row.paymentProblem,
    operation: () => row.progress ?? { state: "pending" },
    nextFollowTurnMs: () => FOLLOW_TURN_MS,
    findOperations: async (_id, name) => {
      harness.calls.push(`findOperation ${name}`);
      return row.foundOperations ?? [];
    },
  };
  const claims = claimsHeldFor(row.given, row.claim);
  for (const other of row.otherClaims ?? []) {
    const holder = { namespace: other.namespace, name: other.name, uid: `uid-${other.namespace}-${other.name}` };
    claims.records.seed(slot(other.cloudName), holder, other.id);
  }
  harness.claimWrites = claims.records.writes;
  const reconciler = new ManagedReconciler<TestSpec>({
    kind: "GpuVm",
    parse: (raw) => ({ ok: true, object: structuredClone(raw as ManagedObject<TestSpec>) }),
    locations: (spec) => spec.locations ?? [],
    kube,
    claims: claims.store,
    claimNamespace: "gpuvm-system",
    ...(row.timing ? { timing: row.timing } : {}),
    connect: async () =>
      row.credentialsMissing
        ? { type: "missing", message: "Secret ns/gpucloud-credentials not found" }
        : { type: "connected", connection },
    now: () => row.now ?? NOW,
  });
  const logger = pino(
    { level: "error" },
    { write: (line: string) => void harness.errors.push(String((JSON.parse(line) as { msg?: unknown }).msg)) },
  );
  return reconciler
    .reconcile(
      { namespace: "ns", name: "thing" },
      { signal: new AbortController().signal, logger, reconcileId: "test", priority: "normal" },
    )
    .then((outcome) => ({
      outcome: outcome.type,
      afterMs: outcome.type === "requeueAfter" ? outcome.ms : undefined,
      harness,
    }));
}

const conflict = () =>
  Promise.reject(new CloudError({ kind: "http", status: 409, message: "name used", method: "POST", route: "/x" }));
const notFound = () =>
  Promise.reject(new CloudError({ kind: "http", status: 404, message: "gone", method: "DELETE", route: "/x" }));

/** An endpoint beyond the spec that this server lacks (the network delete). */
const unsupported = () =>
  Promise.reject(
    new CloudError({
      kind: "unsupported",
      status: 404,
      message: "DELETE /projects/:projectId/vpc/networks/:networkId is not supported by this server (HTTP 404)",
      method: "DELETE",
      route: "/projects/:projectId/vpc/networks/:networkId",
    }),
  );

/** A create in flight under an intent recorded a minute ago. */
const createInFlight = (status: ManagedStatusBase = {}) =>
  object({
    finalizers: [FINALIZER],
    status: {
      ...status,
      createPending: { cloudName: "ns-thing", requestedAt: "2026-11-21T11:59:00Z" },
      operation: { id: "op-create", name: "CREATE", state: "IN_PROGRESS" },
    },
  });

const createFailed = (code: string, message: string): OperationProgress => ({
  state: "settled",
  operation: operation("CREATE", "FAILED", { code, message }),
  settledAt: NOW,
});

/** An object of another namespace whose claim records res-1 (under its own cloud name). */
const otherHolder = { namespace: "other", name: "first", cloudName: "other-first", id: "res-1" };

const rows: Row[] = [
  {
    reason: "first reconcile adds the finalizer, records the intent before the POST, then records the operation",
    given: object({}),
    want: {
      outcome: "requeueAfter",
      calls: ["observe", "create"],
      ready: "False",
      conditionReason: "Creating",
      finalizerWrites: [true],
      firstStatus: { createPending: { cloudName: "ns-thing", requestedAt: "2026-11-21T12:00:00.000Z" } },
      lastStatus: {
        id: "res-1",
        operation: { id: "op-create", name: "CREATE", state: "IN_PROGRESS", startedAt: "2026-11-21T12:00:00Z" },
      },
      // The name's claim before the intent; the id once the cloud gave it.
      claimWrites: ["create ns-thing", "id ns-thing res-1"],
    },
  },
  {
    reason: "missing credentials stall before any finalizer is added",
    given: object({}),
    credentialsMissing: true,
    want: {
      outcome: "requeueAfter",
      calls: [],
      ready: "False",
      conditionReason: "CredentialsMissing",
      finalizerWrites: [],
    },
  },
  {
    reason: "cached credentials (the Secret is being deleted or gone) create nothing: CredentialsMissing",
    given: object({}),
    cachedCredentials: true,
    want: {
      outcome: "requeueAfter",
      calls: [],
      conditionReason: "CredentialsMissing",
      eventIncludes: "Secret ns/gpucloud-credentials (key apiKey) is being deleted, gone or unreadable",
      finalizerWrites: [],
    },
  },
  {
    reason: "cached credentials still delete what was created with them",
    given: object({ finalizers: [FINALIZER], deleting: true, status: { id: "res-1" } }),
    cachedCredentials: true,
    observe: available,
    want: { outcome: "requeueAfter", calls: ["observe", "delete", "send DELETE"], conditionReason: "Deleting" },
  },
  {
    reason: "an operation in flight ends the pass without touching the cloud",
    given: object({
      finalizers: [FINALIZER],
      status: { id: "res-1", operation: { id: "op-create", name: "CREATE", state: "IN_PROGRESS" } },
    }),
    want: { outcome: "requeueAfter", calls: [], conditionReason: "WaitingForOperation" },
  },
  {
    reason: "an existing, matching resource is Ready",
    given: object({ finalizers: [FINALIZER], status: { id: "res-1" } }),
    observe: available,
    want: {
      outcome: "done",
      calls: ["observe"],
      ready: "True",
      conditionReason: "Available",
      lastStatus: { state: "ok" },
    },
  },
  {
    reason: "an action is sent only after its intent is recorded, and the operation replaces the intent",
    given: object({ finalizers: [FINALIZER], status: { id: "res-1" } }),
    observe: { ...available, upToDate: false, updatedAt: "2026-11-21T11:50:00Z" },
    update: {
      type: "action",
      action: "RESET",
      send: async () => operation("RESET"),
      intentFields: { lastResetRequestedAt: "now" },
    },
    want: {
      outcome: "requeueAfter",
      calls: ["observe", "update"],
      sequence: ["write intent RESET", "send RESET", "write"],
      // With the resource's updated_at as seen before sending: a later one shows the action carried out.
      firstStatus: {
        actionPending: {
          name: "RESET",
          id: "res-1",
          resourceUpdatedAt: "2026-11-21T11:50:00Z",
          fields: { lastResetRequestedAt: "now" },
        },
      },
      lastStatus: {
        operation: { id: "op-reset", name: "RESET", state: "IN_PROGRESS", fields: { lastResetRequestedAt: "now" } },
      },
      // Set once the RESET succeeded, not before: a failed one is asked for again.
      absent: ["actionPending", "lastResetRequestedAt"],
    },
  },
  {
    reason: "an intent the API server refuses (422) is never sent: Stalled StatusRejected, an Event, an error log",
    given: object({ finalizers: [FINALIZER], status: { id: "res-1" } }),
    observe: { ...available, upToDate: false },
    update: { type: "action", action: "RESET", send: async () => operation("RESET") },
    refuseWrite: (status) =>
      status.actionPending ? "status.lastResetRequestedAt: Too long: may not be longer than 64" : undefined,
    want: {
      outcome: "requeueAfter",
      calls: ["observe", "update"],
      sequence: ["write intent RESET", "write"],
      conditionReason: "StatusRejected",
      stalled: "True",
      eventIncludes: "Warning StatusRejected",
      errorLogged: true,
    },
  },
  {
    reason: "a final status write the API server refuses stalls StatusRejected on the last accepted status",
    given: object({ finalizers: [FINALIZER], status: { id: "res-1" } }),
    observe: { ...available, atProvider: { state: "weird" } },
    refuseWrite: (status) => (status.state === "weird" ? "status.state: Unsupported value" : undefined),
    want: {
      outcome: "requeueAfter",
      calls: ["observe"],
      sequence: ["write", "write"],
      conditionReason: "StatusRejected",
      stalled: "True",
      absent: ["state"],
      eventIncludes: "the Kubernetes API refused the status update",
      errorLogged: true,
    },
  },
  {
    reason: "a recorded action without its operation is looked up and recorded, not sent again",
    given: object({
      finalizers: [FINALIZER],
      status: {
        id: "res-1",
        actionPending: {
          name: "RESET",
          id: "res-1",
          requestedAt: "2026-11-21T11:59:00.000Z",
          fields: { lastResetRequestedAt: "now" },
        },
      },
    }),
    foundOperations: [operation("RESET")],
    observe: { ...available, upToDate: false },
    update: { type: "action", action: "RESET", send: async () => operation("RESET") },
    want: {
      outcome: "requeueAfter",
      calls: ["findOperation RESET"],
      sequence: ["write"],
      conditionReason: "WaitingForOperation",
      lastStatus: { operation: { id: "op-reset", name: "RESET", fields: { lastResetRequestedAt: "now" } } },
      absent: ["actionPending"],
    },
  },
  {
    reason: "a RESET that succeeded sets what it served (lastResetRequestedAt)",
    given: object({
      finalizers: [FINALIZER],
      status: {
        id: "res-1",
        operation: { id: "op-reset", name: "RESET", state: "IN_PROGRESS", fields: { lastResetRequestedAt: "now" } },
      },
    }),
    progress: { state: "settled", operation: operation("RESET", "SUCCEEDED"), settledAt: NOW },
    observe: available,
    want: {
      outcome: "done",
      calls: ["observe"],
      lastStatus: { lastResetRequestedAt: "now", operation: { name: "RESET", state: "SUCCEEDED" } },
    },
  },
  {
    reason: "a RESET that failed leaves the reset asked for (it is sent again), and retries",
    given: object({
      finalizers: [FINALIZER],
      status: {
        id: "res-1",
        operation: { id: "op-reset", name: "RESET", state: "IN_PROGRESS", fields: { lastResetRequestedAt: "now" } },
      },
    }),
    progress: {
      state: "settled",
      operation: operation("RESET", "FAILED", { code: "internal_error", message: "x" }),
      settledAt: NOW,
    },
    want: {
      outcome: "retry",
      calls: [],
      conditionReason: "OperationFailed",
      absent: ["lastResetRequestedAt"],
    },
  },
  {
    reason: "the lookup of a recorded action skips an earlier attempt this object knows (a RESET that failed)",
    given: object({
      finalizers: [FINALIZER],
      status: {
        id: "res-1",
        operations: [{ id: "op-reset-failed", name: "RESET", state: "FAILED" }],
        actionPending: { name: "RESET", id: "res-1", requestedAt: "2026-11-21T12:00:00.000Z" },
      },
    }),
    foundOperations: [
      { ...operation("RESET"), operation_id: "op-reset-2" },
      { ...operation("RESET", "FAILED"), operation_id: "op-reset-failed" },
    ],
    observe: { ...available, upToDate: false },
    update: { type: "action", action: "RESET", send: async () => operation("RESET") },
    want: {
      outcome: "requeueAfter",
      calls: ["findOperation RESET"],
      sequence: ["write"],
      lastStatus: { operation: { id: "op-reset-2", name: "RESET" } },
    },
  },
  {
    reason: "a recorded action the cloud never saw is dropped and decided afresh",
    given: object({
      finalizers: [FINALIZER],
      status: {
        id: "res-1",
        actionPending: { name: "START", id: "res-1", requestedAt: "2026-11-21T11:59:00.000Z" },
      },
    }),
    observe: { ...available, upToDate: false },
    update: { type: "action", action: "START", send: async () => operation("START") },
    want: {
      outcome: "requeueAfter",
      // A minute old: its writer can no longer send it. The resource is looked at once before deciding.
      calls: ["findOperation START", "observe", "observe", "update"],
      sequence: ["write intent START", "send START", "write"],
      conditionReason: "Updating",
    },
  },
  {
    reason:
      "a recorded action younger than its writer's hold, with no operation and no change of its resource, is held: never sent again",
    given: resetRecordedJustNow(),
    observe: { ...available, upToDate: false, updatedAt: "2026-11-21T11:50:00Z" },
    update: { type: "action", action: "RESET", send: async () => operation("RESET") },
    want: {
      outcome: "requeueAfter",
      calls: ["findOperation RESET", "observe"],
      // The wait is said in status, the intent kept; nothing is sent.
      sequence: ["write intent RESET"],
      conditionReason: "WaitingForOperation",
      reconciling: "True",
      lastStatus: { actionPending: { name: "RESET", requestedAt: "2026-11-21T11:59:55.000Z" } },
    },
  },
  {
    reason:
      "a recorded action whose operation the cloud forgot, but whose resource changed after it, is taken as carried out: not sent again",
    given: resetRecordedJustNow(),
    observe: { ...available, updatedAt: "2026-11-21T11:59:57Z" },
    update: { type: "action", action: "RESET", send: async () => operation("RESET") },
    want: {
      outcome: "done",
      calls: ["findOperation RESET", "observe", "observe"],
      sequence: ["write"],
      conditionReason: "Available",
      lastStatus: { lastResetRequestedAt: "now" },
      absent: ["actionPending"],
    },
  },
  {
    reason: "a create-only value changed since creation is UpToDate=False with an Event; Ready stays True",
    given: object({
      finalizers: [FINALIZER],
      status: { id: "res-1", createOnlyDigests: { sshPublicKey: "aaaa", image: "bbbb" } },
    }),
    observe: {
      ...available,
      createOnly: {
        sshPublicKey: { digest: "cccc", source: "Secret ns/keys key id" },
        image: { digest: "bbbb", source: "spec.image" },
      },
    },
    want: {
      outcome: "done",
      calls: ["observe"],
      ready: "True",
      conditionReason: "Available",
      upToDate: "False",
      eventIncludes: "Warning CreateOnlyFieldChanged sshPublicKey (Secret ns/keys key id) changed",
      lastStatus: { createOnlyDigests: { sshPublicKey: "aaaa", image: "bbbb" } },
    },
  },
  {
    reason: "a resource without recorded create-only values (an older version made it) records the current ones",
    given: object({ finalizers: [FINALIZER], status: { id: "res-1" } }),
    observe: { ...available, createOnly: { image: { digest: "bbbb", source: "spec.image" } } },
    want: {
      outcome: "done",
      calls: ["observe"],
      upToDate: "True",
      lastStatus: { createOnlyDigests: { image: "bbbb" } },
    },
  },
  {
    reason: "drift is corrected through update",
    given: object({ finalizers: [FINALIZER], status: { id: "res-1" } }),
    observe: { ...available, upToDate: false },
    update: {
      type: "action",
      action: "START",
      send: async () => operation("START"),
      note: "START to match powerState",
    },
    want: {
      outcome: "requeueAfter",
      calls: ["observe", "update"],
      conditionReason: "Updating",
      eventIncludes: "START to match",
    },
  },
  {
    reason: "a create conflict on the first POST of an intent is NameConflict: that POST created nothing",
    given: object({ finalizers: [FINALIZER] }),
    create: conflict,
    findByName: { id: "res-9", createdAt: "2026-11-21T12:00:00.400Z" },
    want: {
      outcome: "requeueAfter",
      calls: ["observe", "create", "findByName"],
      conditionReason: "NameConflict",
      absent: ["id", "createPending"],
    },
  },
  {
    reason: "a create conflict after an earlier POST of the intent adopts what the intent proves we made",
    given: object({
      finalizers: [FINALIZER],
      status: { createPending: { cloudName: "ns-thing", requestedAt: "2026-11-21T11:59:00Z" } },
    }),
    create: conflict,
    // Not readable yet when looked up before the POST; readable after the 409.
    findByName: [undefined, { id: "res-9", createdAt: "2026-11-21T11:59:00.400Z" }],
    want: {
      outcome: "requeueAfter",
      calls: ["observe", "findByName", "create", "findByName"],
      lastStatus: { id: "res-9" },
    },
  },
  {
    reason: "a create conflict with a resource older than the intent is NameConflict, not adopted",
    given: object({ finalizers: [FINALIZER] }),
    create: conflict,
    findByName: { id: "res-9", createdAt: "2026-11-20T08:00:00Z" },
    want: {
      outcome: "requeueAfter",
      calls: ["observe", "create", "findByName"],
      conditionReason: "NameConflict",
      eventIncludes: "set spec.id: res-9",
      absent: ["id"],
    },
  },
  {
    reason: "an intent without id looks the name up first and adopts (crash after the POST)",
    given: object({
      finalizers: [FINALIZER],
      status: {
        projectId: "project-1",
        createPending: { cloudName: "ns-thing", requestedAt: "2026-11-21T11:59:00Z" },
      },
    }),
    findByName: { id: "res-7", createdAt: "2026-11-21T11:59:01Z" },
    want: { outcome: "requeueAfter", calls: ["observe", "findByName"], lastStatus: { id: "res-7" } },
  },
  {
    reason: "a resource found by its name without an intent of ours is NameConflict and never touched",
    given: object({ finalizers: [FINALIZER] }),
    observe: { ...available, upToDate: false, createdAt: "2026-11-20T08:00:00Z" },
    want: {
      outcome: "requeueAfter",
      calls: ["observe"],
      ready: "False",
      conditionReason: "NameConflict",
      eventIncludes: "did not create",
      absent: ["id", "state"],
    },
  },
  {
    reason: "a resource found by name that our intent proves we made is adopted and reconciled",
    given: object({
      finalizers: [FINALIZER],
      status: { createPending: { cloudName: "ns-thing", requestedAt: "2026-11-21T11:59:00Z" } },
    }),
    observe: { ...available, createdAt: "2026-11-21T11:59:02Z" },
    want: { outcome: "done", calls: ["observe"], conditionReason: "Available", lastStatus: { id: "res-1" } },
  },
  {
    reason: "a status.id edited to another object's resource is not acted on: that object's claim holds it",
    given: object({ finalizers: [FINALIZER], status: { id: "res-1", projectId: "project-1" } }),
    claim: false,
    otherClaims: [otherHolder],
    observe: { ...available, upToDate: false },
    want: {
      outcome: "requeueAfter",
      calls: ["observe"],
      conditionReason: "NameConflict",
      eventIncludes: "a GpuVm in another namespace (GpuCloudClaim gpuvm-system/gpuvm-",
      absent: ["id", "state"],
      claimWrites: [],
    },
  },
  {
    reason: "a status.id edited away from the resource this object holds is put back from its claim",
    given: object({ finalizers: [FINALIZER], status: { id: "res-other" } }),
    claim: { id: "res-1" },
    observe: available,
    want: {
      outcome: "done",
      calls: ["observe"],
      conditionReason: "Available",
      lastStatus: { id: "res-1" },
      eventIncludes: "status.id res-other is not the resource this object manages: res-1",
    },
  },
  {
    reason: "deleting an object whose status names another object's resource releases it without deleting that",
    given: object({ finalizers: [FINALIZER], deleting: true, status: { id: "res-1", projectId: "project-1" } }),
    claim: false,
    otherClaims: [otherHolder],
    observe: available,
    want: { outcome: "done", calls: ["observe"], finalizerWrites: [false], eventIncludes: "left as is" },
  },
  {
    reason: "credentials that now name another project stall AccountChanged: nothing is created in the new one",
    given: object({ finalizers: [FINALIZER], status: { id: "res-1" } }),
    claim: { id: "res-1", projectId: "project-0" },
    want: {
      outcome: "requeueAfter",
      calls: [],
      conditionReason: "AccountChanged",
      stalled: "True",
      eventIncludes: "is in project project-0 at https://cloud.test/v0.1, but its credentials",
      claimWrites: [],
    },
  },
  {
    reason: "spec.id takes a resource nobody claims: the claim of its cloud name records it",
    given: object({ spec: { id: "res-1" }, finalizers: [FINALIZER] }),
    observe: { ...available, name: "somebody-s-vm" },
    want: {
      outcome: "done",
      calls: ["observe"],
      conditionReason: "Available",
      lastStatus: { id: "res-1" },
      claimWrites: ["create somebody-s-vm", "id somebody-s-vm res-1"],
    },
  },
  {
    reason: "spec.id naming a resource another object's claim holds is NameConflict, and nothing is claimed",
    given: object({ spec: { id: "res-1" }, finalizers: [FINALIZER] }),
    otherClaims: [{ namespace: "ns", name: "first", cloudName: "ns-first", id: "res-1" }],
    observe: { ...available, name: "ns-first", upToDate: false },
    want: {
      outcome: "requeueAfter",
      calls: ["observe"],
      conditionReason: "NameConflict",
      eventIncludes: "GpuVm ns/first manages cloud resource res-1",
      claimWrites: [],
    },
  },
  {
    reason: "a resource this object holds that no read shows is not created again at once: its absence is confirmed",
    given: object({ finalizers: [FINALIZER], status: { id: "res-1" } }),
    want: {
      outcome: "requeueAfter",
      afterMs: 10_000,
      calls: ["observe"],
      conditionReason: "WaitingForOperation",
      eventIncludes: "cloud resource res-1 is not found since 2026-11-21T12:00:00.000Z",
      claimWrites: [],
    },
  },
  {
    reason: "deleting an object whose resource no read shows waits before letting it go (a slow read is no proof)",
    given: object({ finalizers: [FINALIZER], deleting: true, status: { id: "res-1" } }),
    want: {
      outcome: "requeueAfter",
      calls: ["observe"],
      conditionReason: "WaitingForOperation",
      finalizerWrites: [],
      claimWrites: [],
    },
  },
  {
    reason: "deleting an object whose own DELETE succeeded lets it go and gives up its claim",
    given: object({
      finalizers: [FINALIZER],
      deleting: true,
      status: { id: "res-1", operations: [{ id: "op-delete", name: "DELETE", state: "SUCCEEDED" }] },
    }),
    want: { outcome: "done", calls: ["observe"], finalizerWrites: [false], claimWrites: ["delete ns-thing"] },
  },
  {
    reason: "deleting an object that never created anything leaves a foreign resource with its name alone",
    given: object({ finalizers: [FINALIZER], deleting: true }),
    observe: { ...available, createdAt: "2026-11-20T08:00:00Z" },
    want: { outcome: "done", calls: ["observe"], finalizerWrites: [false], eventIncludes: "did not create" },
  },
  {
    reason: "a name another object claims is NameConflict before any intent is written",
    given: object({ finalizers: [FINALIZER], status: { projectId: "project-1" } }),
    otherClaims: [{ namespace: "ns-other", name: "first", cloudName: "ns-thing" }],
    want: {
      outcome: "requeueAfter",
      calls: ["observe"],
      conditionReason: "NameConflict",
      eventIncludes: "a GpuVm in another namespace (GpuCloudClaim gpuvm-system/gpuvm-",
      absent: ["createPending"],
      claimWrites: [],
    },
  },
  {
    reason: "an operation that vanished is recorded with an unknown outcome, and the resource is read to decide",
    given: createInFlight({ id: "res-1" }),
    progress: { state: "vanished", settledAt: NOW },
    observe: available,
    want: {
      outcome: "done",
      calls: ["observe"],
      conditionReason: "Available",
      lastStatus: { operation: { id: "op-create", name: "CREATE", state: "UNKNOWN" } },
    },
  },
  {
    reason: "a vanished create whose resource is not readable yet is waited for, not created again",
    given: createInFlight({ id: "res-1" }),
    progress: { state: "vanished", settledAt: NOW },
    want: {
      outcome: "requeueAfter",
      calls: ["observe"],
      conditionReason: "Creating",
      lastStatus: {
        createPending: { cloudName: "ns-thing" },
        operation: { name: "CREATE", state: "UNKNOWN" },
      },
    },
  },
  {
    reason: "out_of_stock moves to the next location",
    given: object({
      spec: { locations: ["a", "b"] },
      finalizers: [FINALIZER],
      status: { id: "res-1", operation: { id: "op-create", name: "CREATE", state: "IN_PROGRESS" } },
    }),
    progress: {
      state: "settled",
      operation: operation("CREATE", "FAILED", { code: "out_of_stock", message: "no a100" }),
      settledAt: NOW,
    },
    want: {
      outcome: "requeueAfter",
      calls: [],
      conditionReason: "CapacityUnavailable",
      lastStatus: { locationIndex: 1 },
    },
  },
  {
    reason: "out_of_stock in the last location stalls and retries on a timer",
    given: object({
      spec: { locations: ["a", "b"] },
      finalizers: [FINALIZER],
      status: { locationIndex: 1, id: "res-1", operation: { id: "op-create", name: "CREATE", state: "IN_PROGRESS" } },
    }),
    progress: {
      state: "settled",
      operation: operation("CREATE", "FAILED", { code: "out_of_stock", message: "no a100" }),
      settledAt: NOW,
    },
    want: {
      outcome: "requeueAfter",
      calls: [],
      conditionReason: "CapacityUnavailable",
      lastStatus: { locationIndex: 0 },
    },
  },
  {
    reason: "already_exists adopts by name what the intent proves is ours",
    given: createInFlight(),
    progress: createFailed("already_exists", "dup"),
    findByName: { id: "res-5", createdAt: "2026-11-21T11:59:00.300Z" },
    want: { outcome: "requeueAfter", calls: ["findByName"], lastStatus: { id: "res-5" } },
  },
  {
    reason: "already_exists with a resource older than the intent is NameConflict",
    given: createInFlight(),
    progress: createFailed("already_exists", "dup"),
    findByName: { id: "res-5", createdAt: "2026-01-01T00:00:00Z" },
    want: {
      outcome: "requeueAfter",
      calls: ["findByName"],
      conditionReason: "NameConflict",
      absent: ["id"],
    },
  },
  {
    reason: "a transient operation failure (internal_error) retries with backoff: Reconciling, not Stalled",
    given: createInFlight(),
    progress: createFailed("internal_error", "try again"),
    want: {
      outcome: "retry",
      calls: [],
      conditionReason: "OperationFailed",
      stalled: "False",
      reconciling: "True",
      lastStatus: { createPending: { cloudName: "ns-thing", requestedAt: "2026-11-21T11:59:00Z" } },
    },
  },
  {
    reason: "other operation failures stall with the API's message",
    given: object({
      finalizers: [FINALIZER],
      status: { operation: { id: "op-create", name: "CREATE", state: "IN_PROGRESS" } },
    }),
    progress: {
      state: "settled",
      operation: operation("CREATE", "FAILED", { code: "quota_exceeded", message: "too many GPUs" }),
      settledAt: NOW,
    },
    want: {
      outcome: "requeueAfter",
      calls: [],
      conditionReason: "OperationFailed",
      stalled: "True",
      eventIncludes: "too many GPUs",
    },
  },
  {
    reason: "no payment method stalls before create",
    given: object({ finalizers: [FINALIZER] }),
    paymentProblem: "add a payment method at https://billing.example/x",
    want: {
      outcome: "requeueAfter",
      calls: ["observe"],
      conditionReason: "PaymentMethodRequired",
      eventIncludes: "https://billing",
    },
  },
  {
    reason: "delete requests the deletion and keeps the finalizer",
    given: object({ finalizers: [FINALIZER], deleting: true, status: { id: "res-1" } }),
    observe: available,
    want: {
      outcome: "requeueAfter",
      calls: ["observe", "delete", "send DELETE"],
      conditionReason: "Deleting",
      finalizerWrites: [],
    },
  },
  {
    // A cloud whose reads lag its creates answers 404 for a VM its operation just made: no proof it is gone.
    reason: "delete answered 404 and a fresh read agrees: the finalizer stays until the absence is confirmed",
    given: object({ finalizers: [FINALIZER], deleting: true, status: { id: "res-1" } }),
    observe: available,
    observeAfter: { exists: false },
    deleteSend: notFound,
    want: {
      outcome: "requeueAfter",
      calls: ["observe", "delete", "send DELETE", "observe"],
      finalizerWrites: [],
      conditionReason: "WaitingForOperation",
    },
  },
  {
    reason: "delete answered 404 while the resource is still there: the server cannot delete it (NotSupported)",
    given: object({ finalizers: [FINALIZER], deleting: true, status: { id: "res-1" } }),
    observe: available,
    deleteSend: notFound,
    want: {
      outcome: "requeueAfter",
      calls: ["observe", "delete", "send DELETE", "observe"],
      finalizerWrites: [],
      conditionReason: "NotSupported",
      eventIncludes: "deletionPolicy: Orphan",
    },
  },
  {
    reason: "a CREATE the server cannot show is followed through the resource: absent, wait for the next turn",
    given: withOperation("CREATE"),
    progress: { state: "unreadable", settledAt: NOW },
    want: {
      outcome: "requeueAfter",
      afterMs: FOLLOW_TURN_MS,
      calls: ["observe"],
      ready: "False",
      conditionReason: "Creating",
      lastStatus: {
        operation: { id: "op-create", name: "CREATE", state: "IN_PROGRESS", startedAt: "2026-11-21T11:59:00Z" },
      },
    },
  },
  {
    reason: "a CREATE the server cannot show is over when the resource appears: SUCCEEDED in history, Ready",
    given: withOperation("CREATE", {
      status: { createPending: { cloudName: "ns-thing", requestedAt: "2026-11-21T11:58:00Z" } },
    }),
    progress: { state: "unreadable", settledAt: NOW },
    observe: available,
    want: {
      outcome: "done",
      calls: ["observe"],
      ready: "True",
      conditionReason: "Available",
      lastStatus: {
        operation: {
          id: "op-create",
          name: "CREATE",
          state: "SUCCEEDED",
          startedAt: "2026-11-21T11:59:00Z",
          completedAt: "2026-11-21T12:00:00Z",
        },
      },
    },
  },
  {
    reason:
      "a CREATE the server cannot show that never appears is given up after followTimeoutMs (UNKNOWN: one create grace, then made again)",
    given: object({
      finalizers: [FINALIZER],
      status: {
        id: "res-1",
        operation: { id: "op-old", name: "CREATE", state: "IN_PROGRESS", startedAt: "2026-11-21T11:40:00Z" },
      },
    }),
    progress: { state: "unreadable", settledAt: NOW },
    want: {
      outcome: "requeueAfter",
      calls: ["observe"],
      lastStatus: { operation: { id: "op-old", name: "CREATE", state: "UNKNOWN" } },
      conditionReason: "Creating",
      eventIncludes: "did not show in the cloud resource within 15 min",
    },
  },
  {
    reason: "a DELETE the server cannot show waits while the resource is there, without deleting again",
    given: withOperation("DELETE", { deleting: true }),
    progress: { state: "unreadable", settledAt: NOW },
    observe: available,
    want: { outcome: "requeueAfter", afterMs: FOLLOW_TURN_MS, calls: ["observe"], conditionReason: "Deleting" },
  },
  {
    reason: "a DELETE the server cannot show is over when the resource is gone: the finalizer goes",
    given: withOperation("DELETE", { deleting: true }),
    progress: { state: "unreadable", settledAt: NOW },
    want: { outcome: "done", calls: ["observe"], finalizerWrites: [false] },
  },
  {
    reason: "a RESIZE the server cannot show waits until the resource matches the spec",
    given: withOperation("RESIZE"),
    progress: { state: "unreadable", settledAt: NOW },
    observe: { ...available, upToDate: false },
    want: {
      outcome: "requeueAfter",
      afterMs: FOLLOW_TURN_MS,
      calls: ["observe"],
      conditionReason: "WaitingForOperation",
    },
  },
  {
    reason: "a delete this server does not have stalls NotSupported, says how to let go, and drops its intent",
    given: object({ finalizers: [FINALIZER], deleting: true, status: { id: "res-1" } }),
    observe: available,
    deleteSend: unsupported,
    want: {
      outcome: "requeueAfter",
      calls: ["observe", "delete", "send DELETE"],
      finalizerWrites: [],
      stalled: "True",
      conditionReason: "NotSupported",
      eventIncludes: "does not support deleting a network",
      absent: ["actionPending"],
    },
  },
  {
    reason: "a resource that reads as gone for goneConfirmMs releases the object and its claim",
    given: object({ finalizers: [FINALIZER], deleting: true, status: { id: "res-1" } }),
    timing: { goneConfirmMs: 0 },
    want: { outcome: "done", calls: ["observe"], finalizerWrites: [false], claimWrites: ["delete ns-thing"] },
  },
  {
    reason: "orphan removes the finalizer without a cloud call",
    given: object({
      spec: { deletionPolicy: "Orphan" },
      finalizers: [FINALIZER],
      deleting: true,
      status: { id: "res-1" },
    }),
    want: { outcome: "done", calls: [], finalizerWrites: [false] },
  },
  {
    reason: "paused makes no cloud call",
    given: object({ finalizers: [FINALIZER], annotations: { "gpucloud.dev/paused": "true" }, status: { id: "res-1" } }),
    want: { outcome: "done", calls: [], ready: "False", conditionReason: "Paused" },
  },
  {
    reason: "deleting a paused object releases it and warns that the resource was left behind",
    given: object({
      finalizers: [FINALIZER],
      deleting: true,
      annotations: { "gpucloud.dev/paused": "true" },
      status: { id: "res-1" },
    }),
    want: { outcome: "done", calls: [], finalizerWrites: [false], eventIncludes: "left behind" },
  },
  {
    reason: "observe policy mirrors and never creates or adds a finalizer",
    given: object({ spec: { managementPolicy: "Observe" } }),
    observe: available,
    want: {
      outcome: "done",
      calls: ["observe"],
      ready: "True",
      conditionReason: "Observed",
      finalizerWrites: [],
    },
  },
  {
    reason: "an import whose id does not exist stalls",
    given: object({ spec: { id: "missing" }, finalizers: [FINALIZER] }),
    want: { outcome: "done", calls: ["observe"], conditionReason: "InvalidSpec" },
  },
  {
    reason: "a refused update (shrink) stalls without sending anything",
    given: object({ finalizers: [FINALIZER], status: { id: "res-1" } }),
    observe: { ...available, upToDate: false },
    update: { type: "refused", reason: "InvalidSpec", message: "disks can only grow" },
    want: { outcome: "done", calls: ["observe", "update"], conditionReason: "InvalidSpec" },
  },
  {
    reason: "a terminal stall of the current generation does not call anything again",
    given: object({
      finalizers: [FINALIZER],
      status: {
        observedGeneration: 1,
        conditions: [
          {
            type: "Stalled",
            status: "True",
            reason: "InvalidSpec",
            message: "bad",
            lastTransitionTime: "2026-11-21T11:59:00Z",
          },
        ],
      },
    }),
    want: { outcome: "requeueAfter", calls: [], conditionReason: "InvalidSpec" },
  },
];

/** The conditions and status fields a row asks of the last status written. */
function expectLastStatus(row: Row, harness: Harness): void {
  const last = harness.statuses.at(-1);
  const wantedConditions = {
    Ready: row.want.ready,
    Stalled: row.want.stalled,
    UpToDate: row.want.upToDate,
    Reconciling: row.want.reconciling,
  };
  for (const [type, status] of Object.entries(wantedConditions)) {
    if (status !== undefined) expect(last?.conditions?.find((c) => c.type === type)?.status, type).toBe(status);
  }
  if (row.want.conditionReason !== undefined) {
    expect(last?.conditions?.find((c) => c.type === "Ready")?.reason).toBe(row.want.conditionReason);
    expect(last?.observedGeneration).toBe(1);
  }
  if (row.want.lastStatus) expect(last).toMatchObject(row.want.lastStatus);
  for (const field of row.want.absent ?? []) expect(last).not.toHaveProperty(field);
}

describe("ManagedReconciler", () => {
  it.each(rows)("$reason", async (row) => {
    const { outcome, afterMs, harness } = await run(row);
    expect(outcome).toBe(row.want.outcome);
    if (row.want.afterMs !== undefined) expect(afterMs).toBe(row.want.afterMs);
    expect(harness.calls).toEqual(row.want.calls);
    if (row.want.finalizerWrites) expect(harness.finalizerWrites).toEqual(row.want.finalizerWrites);
    expectLastStatus(row, harness);
    if (row.want.firstStatus) expect(harness.statuses[0]).toMatchObject(row.want.firstStatus);
    if (row.want.eventIncludes) expect(harness.events.join("\n")).toContain(row.want.eventIncludes);
    if (row.want.sequence) expect(harness.sequence).toEqual(row.want.sequence);
    if (row.want.claimWrites) expect(harness.claimWrites).toEqual(row.want.claimWrites);
    if (row.want.errorLogged !== undefined) expect(harness.errors.length > 0).toBe(row.want.errorLogged);
  });

  it("writes nothing when a second pass finds the same state", async () => {
    const first = await run({
      reason: "",
      given: object({ finalizers: [FINALIZER], status: { id: "res-1" } }),
      observe: available,
      want: { outcome: "", calls: [] },
    });
    const settled = first.harness.statuses.at(-1) ?? {};
    const second = await run({
      reason: "",
      given: object({ finalizers: [FINALIZER], status: settled }),
      observe: available,
      want: { outcome: "", calls: [] },
    });
    expect(second.harness.statuses).toEqual([]);
    expect(second.harness.events).toEqual([]);
  });

  it("writes lastTransitionTime at whole seconds (metav1.Time) and keeps it while the status holds", async () => {
    const first = await run({
      reason: "",
      given: object({ finalizers: [FINALIZER], status: { id: "res-1" } }),
      observe: available,
      want: { outcome: "", calls: [] },
      now: NOW + 849,
    });
    const settled = first.harness.statuses.at(-1) ?? {};
    expect(settled.conditions?.map((c) => c.lastTransitionTime)).toEqual([
      "2026-11-21T12:00:00Z",
      "2026-11-21T12:00:00Z",
      "2026-11-21T12:00:00Z",
      "2026-11-21T12:00:00Z",
    ]);
    // A later pass with the same story compares equal: no second write.
    const second = await run({
      reason: "",
      given: object({ finalizers: [FINALIZER], status: settled }),
      observe: available,
      want: { outcome: "", calls: [] },
      now: NOW + 61_999,
    });
    expect(second.harness.statuses).toEqual([]);
  });
});

describe("ManagedReconciler and a cache behind its own writes", () => {
  /** Every write makes a new resourceVersion; the cache shows whichever stored version the test picks. */
  function laggingKube(initial: ManagedObject<TestSpec>) {
    const versions: ManagedObject<TestSpec>[] = [structuredClone(initial)];
    let cacheAt = 0;
    const store = (change: (o: ManagedObject<TestSpec>) => void) => {
      const next = structuredClone(versions.at(-1) as ManagedObject<TestSpec>);
      change(next);
      next.metadata.resourceVersion = String(versions.length + 1);
      versions.push(next);
      return { type: "written" as const, resourceVersion: next.metadata.resourceVersion };
    };
    const kube: KubeAccess = {
      get: () => structuredClone(versions[cacheAt]),
      writeStatus: async (_mr, status) =>
        store((o) => {
          o.status = structuredClone(status);
        }),
      setFinalizer: async (_mr, present) =>
        store((o) => {
          o.metadata.finalizers = present ? [FINALIZER] : [];
        }),
      event: () => undefined,
    };
    return {
      kube,
      versions,
      showVersion(resourceVersion: string) {
        cacheAt = versions.findIndex((o) => o.metadata.resourceVersion === resourceVersion);
      },
    };
  }

  it("a pass that wrote several times acts again only once the cache shows its last write", async () => {
    const calls: string[] = [];
    const cluster = laggingKube(object({}));
    const external: ExternalClient<TestSpec> = {
      resolve: async () => ({ type: "ready", resolved: undefined }),
      observe: async () => {
        calls.push("observe");
        return { exists: false };
      },
      findByName: async () => {
        calls.push("findByName");
        return undefined;
      },
      create: async () => {
        calls.push("create");
        return { type: "started", operation: operation("CREATE") };
      },
      update: async () => ({ type: "unchanged" }),
      delete: async () => ({ type: "action", action: "DELETE", send: async () => operation("DELETE") }),
    };
    const reconciler = new ManagedReconciler<TestSpec>({
      kind: "GpuVm",
      parse: (raw) => ({ ok: true, object: raw as ManagedObject<TestSpec> }),
      locations: () => [],
      kube: cluster.kube,
      claims: memoryClaims().store,
      connect: async () => ({ type: "connected", connection: plainConnection(external) }),
      now: () => NOW,
    });
    const ctx = {
      signal: new AbortController().signal,
      logger: pino({ level: "silent" }),
      reconcileId: "test",
      priority: "normal" as const,
    };
    const pass = () => reconciler.reconcile({ namespace: "ns", name: "thing" }, ctx);

    await pass();
    // Finalizer (2), create intent (3), operation id (4): three writes, one POST.
    expect(cluster.versions.map((o) => o.metadata.resourceVersion)).toEqual(["1", "2", "3", "4"]);
    expect(calls).toEqual(["observe", "create"]);
    // The watch events of writes 2 and 3 wake the key while the cache is still there: nothing is done again
    // (no second POST, no lookup by name that would adopt our own create).
    for (const version of ["1", "2", "3"]) {
      cluster.showVersion(version);
      expect(await pass()).toMatchObject({ type: "requeueAfter" });
    }
    expect(calls).toEqual(["observe", "create"]);
    expect(cluster.versions).toHaveLength(4);
    // At the last write the pass goes on: the operation is in flight, so it waits for it without a cloud call,
    // and without a status write either: "Creating" already says what is going on (4 writes per VM, not 5).
    cluster.showVersion("4");
    await pass();
    expect(calls).toEqual(["observe", "create"]);
    expect(cluster.versions).toHaveLength(4);
    expect(cluster.versions.at(-1)?.status.conditions?.find((c) => c.type === "Ready")?.reason).toBe("Creating");
  });
});

describe("quiet resyncs (a resync that would see what the last good pass saw ends at once)", () => {
  type Lane = "high" | "normal" | "low";
  /** An Available object, its cloud item as the snapshot holds it, and what each pass did. */
  function quietHarness(annotations: Record<string, string> = {}) {
    const state = {
      stored: object({
        finalizers: [FINALIZER],
        annotations,
        status: { id: "res-1", projectId: "project-1", cloudName: "ns-thing" },
      }),
      item: { id: "res-1", state: "running" } as object,
      busy: false,
      rereadFails: false,
      calls: [] as string[],
    };
    const external: ExternalClient<TestSpec> = {
      resolve: async () => ({ type: "ready", resolved: undefined }),
      observe: async () => {
        state.calls.push("observe");
        return {
          exists: true,
          id: "res-1",
          name: "ns-thing",
          ready: true,
          upToDate: true,
          busy: state.busy,
          atProvider: {},
          reads: [state.item],
        };
      },
      reread: async () => {
        state.calls.push("reread");
        if (state.rereadFails) throw new CloudError({ kind: "network", message: "down", method: "GET", route: "/x" });
        return [state.item];
      },
      findByName: async () => undefined,
      create: async () => ({ type: "started", operation: operation("CREATE") }),
      update: async () => ({ type: "unchanged" }),
      delete: async () => ({ type: "action", action: "DELETE", send: async () => operation("DELETE") }),
    };
    const connection = plainConnection(external);
    let version = 1;
    const reconciler = new ManagedReconciler<TestSpec>({
      kind: "GpuVm",
      parse: (raw) => ({ ok: true, object: structuredClone(raw as ManagedObject<TestSpec>) }),
      locations: () => [],
      kube: {
        get: () => state.stored,
        writeStatus: async (_mr, status) => {
          version++;
          state.stored = {
            ...state.stored,
            metadata: { ...state.stored.metadata, resourceVersion: String(version) },
            status: structuredClone(status),
          };
          return { type: "written", resourceVersion: String(version) };
        },
        setFinalizer: async () => ({ type: "written", resourceVersion: String(version) }),
        event: () => undefined,
      },
      claims: claimsHeldFor(state.stored).store,
      connect: async () => ({ type: "connected", connection }),
      now: () => NOW,
    });
    const pass = async (priority: Lane) => {
      state.calls = [];
      const outcome = await reconciler.reconcile(
        { namespace: "ns", name: "thing" },
        { signal: new AbortController().signal, logger: pino({ level: "silent" }), reconcileId: "test", priority },
      );
      return { outcome: outcome.type, calls: state.calls };
    };
    return { state, pass };
  }

  it("skips the observation of an unchanged object whose cloud item is the one last observed", async () => {
    const { pass } = quietHarness();
    expect(await pass("normal")).toEqual({ outcome: "done", calls: ["observe"] }); // writes Ready
    expect(await pass("low")).toEqual({ outcome: "done", calls: ["observe"] }); // our own write changed the version
    expect(await pass("low")).toEqual({ outcome: "done", calls: ["reread"] });
    expect(await pass("low")).toEqual({ outcome: "done", calls: ["reread"] });
    // An event (any lane but low) always gets the full pass.
    expect(await pass("normal")).toEqual({ outcome: "done", calls: ["observe"] });
    expect(await pass("high")).toEqual({ outcome: "done", calls: ["observe"] });
  });

  it("observes again when the snapshot holds another item, the object changed, or the last pass was not Available", async () => {
    const { state, pass } = quietHarness();
    await pass("normal");
    await pass("low");
    expect((await pass("low")).calls).toEqual(["reread"]);
    // A list showed the resource differently: the snapshot holds a new object for it.
    state.item = { id: "res-1", state: "stopped" };
    expect((await pass("low")).calls).toEqual(["reread", "observe"]);
    expect((await pass("low")).calls).toEqual(["reread"]);
    // Somebody changed the object (a new resourceVersion the last pass did not read).
    state.stored = { ...state.stored, metadata: { ...state.stored.metadata, resourceVersion: "100" } };
    expect((await pass("low")).calls).toEqual(["observe"]);
    expect((await pass("low")).calls).toEqual(["reread"]);
    // A pass that ended waiting (the resource in transition) leaves nothing to compare with.
    state.busy = true;
    state.item = { id: "res-1", state: "starting" };
    expect((await pass("low")).outcome).toBe("requeueAfter");
    state.busy = false;
    expect((await pass("low")).calls).toEqual(["observe"]);
  });

  it("runs the full pass when the snapshot cannot be read, and for an object with its own sync period", async () => {
    const failing = quietHarness();
    await failing.pass("normal");
    await failing.pass("low");
    failing.state.rereadFails = true;
    expect((await failing.pass("low")).calls).toEqual(["reread", "observe"]);

    const ownPeriod = quietHarness({ "gpucloud.dev/sync-period": "10s" });
    await ownPeriod.pass("normal");
    await ownPeriod.pass("low");
    expect((await ownPeriod.pass("low")).calls).toEqual(["observe"]);
  });
});
