// Errors → verdicts, in one place. A verdict is what one reconcile concluded: the conditions to write and the
// outcome to hand back to the work queue. Terminal problems stall without a hot loop; retryable ones back off;
// a rate limit or an unavailable API with Retry-After waits exactly that long.
import { REASONS, type Reason } from "../../api/common.ts";
import { CAPABILITIES, capabilityOf } from "../../cloud/capabilities.ts";
import { isCloudError } from "../../cloud/errors.ts";
import { KubeApiError, type Outcome } from "../../runtime/index.ts";
import { isFenced } from "../../util/fence.ts";
import { TERMINAL_REASONS, TERMINAL_RETRY_MS, type Verdict } from "./verdict.ts";

export class ReconcileError extends Error {
  readonly reason: Reason;
  constructor(reason: Reason, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ReconcileError";
    this.reason = reason;
  }
}

/**
 * The stall for an endpoint beyond the spec that this server lacks (a CloudError kind `unsupported`): what it
 * does not support (the capability's description), and what to do instead.
 */
export function cannotDo(error: unknown, whatToDo: string): ReconcileError {
  const err = asError(error);
  const capability = isCloudError(err) ? capabilityOf(err.method, err.route) : undefined;
  const what = capability === undefined ? "this request" : CAPABILITIES[capability].description;
  // The endpoint and what showed it, said once: the error's own message says "not supported" already.
  const evidence = isCloudError(err) && err.detail !== undefined ? `${err.endpoint}: ${err.detail}` : err.message;
  const message = `this server does not support ${what} (${evidence}); ${whatToDo}`;
  return new ReconcileError(REASONS.NotSupported, message, { cause: error });
}

/** What to do when the server cannot change a resource: nothing was changed in the cloud. */
export const CHANGE_INSTEAD =
  "the cloud resource keeps its settings: put the spec back to match it, or replace this object with a new one that has the change (and let this one go with deletionPolicy: Orphan)";

/** How to let go of an object whose cloud resource this server cannot delete. */
export const ORPHAN_TO_RELEASE =
  "set spec.deletionPolicy: Orphan to release this object and keep the cloud resource (remove it by other means)";

export function cloudStatus(error: unknown): number | undefined {
  return isCloudError(error) ? error.status : undefined;
}

/** A 404 that means "this resource is gone", not "this server lacks the endpoint" (kind unsupported). */
export const isCloudNotFound = (error: unknown): boolean =>
  isCloudError(error) && error.status === 404 && error.kind !== "unsupported";
export const isCloudConflict = (error: unknown): boolean => cloudStatus(error) === 409;

const DEFAULT_RETRY_AFTER_MS = 5_000;

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/**
 * The request was not carried out, provably: the cloud refused it with a 4xx (or the client never sent it: an
 * endpoint known missing, a body refused locally). Also for a ReconcileError wrapping such an error. A 5xx, a
 * timeout, a lost or unreadable answer prove nothing: the request may have been carried out.
 */
export function requestRefused(error: unknown): boolean {
  const err = error instanceof ReconcileError ? error.cause : error;
  if (!isCloudError(err)) return false;
  // Not sent at all: an endpoint this server lacks, a request the client refused, a write the fence kept.
  if (err.kind === "unsupported" || err.code === "invalid_request" || err.code === "fenced") return true;
  return err.kind === "http" && err.status !== undefined && err.status >= 400 && err.status < 500;
}

/** 4xx answers about the form of the request (not its content): the server and the operator disagree on the API. */
const PROTOCOL_REFUSALS: ReadonlySet<number> = new Set([405, 406, 411, 412, 415, 417, 426, 428, 431]);
/** 4xx answers that may change without a spec change: retried (404/410 may be a read after a write that lags). */
const TRANSIENT_REFUSALS: ReadonlySet<number> = new Set([404, 408, 409, 410]);

function stalled(reason: Reason, message: string, outcome: Outcome): Verdict {
  return { ready: false, reason, message, progressing: false, stalled: true, outcome, event: "Warning" };
}

function backingOff(reason: Reason, message: string, outcome: Outcome): Verdict {
  return { ready: false, reason, message, progressing: true, stalled: false, outcome, event: "Warning" };
}

/**
 * A pass cancelled (its signal aborted: the Lease lost, shutdown) or a write the leadership fence kept: nothing
 * is wrong with the object, and nothing is to be said about it (no status, no Event): a quiet retry.
 */
function isCancellation(error: Error): boolean {
  return isFenced(error) || (isCloudError(error) && (error.code === "aborted" || error.code === "fenced"));
}

/** The one mapping from a thrown error to conditions and a queue action. */
export function classify(error: unknown): Verdict {
  const err = asError(error);
  if (isCancellation(err)) {
    return { ...backingOff(REASONS.ApiUnavailable, err.message, { type: "retry", error: err }), silent: true };
  }
  if (err instanceof ReconcileError) {
    const terminal = TERMINAL_REASONS.has(err.reason);
    return terminal
      ? stalled(err.reason, err.message, { type: "requeueAfter", ms: TERMINAL_RETRY_MS })
      : backingOff(err.reason, err.message, { type: "retry", error: err });
  }
  if (err instanceof KubeApiError) {
    // The Kubernetes API failed a call (a 5xx, a timeout): transient, like an unavailable cloud API.
    return backingOff(REASONS.ApiUnavailable, `Kubernetes API: ${err.message}`, { type: "retry", error: err });
  }
  if (!isCloudError(err)) {
    // Our own bug: never dressed up as an API problem.
    return backingOff(REASONS.InternalError, `internal error: ${err.message}`, { type: "retry", error: err });
  }
  const status = err.status;
  if (err.code === "account_busy") {
    // The object's cloud account has every slot it may use in this controller taken: come back shortly without a
    // status write (nothing is wrong with the object) and without occupying a worker meanwhile.
    // The key is parked until a slot frees (accounts/account-admission.ts); retryAfterMs is the fallback.
    return {
      ...backingOff(REASONS.ApiUnavailable, err.message, { type: "parked", fallbackMs: err.retryAfterMs ?? 1_000 }),
      silent: true,
    };
  }
  if (err.code === "circuit_open") {
    return backingOff(REASONS.ApiUnavailable, err.message, {
      type: "requeueAfter",
      ms: err.retryAfterMs ?? DEFAULT_RETRY_AFTER_MS,
    });
  }
  if (err.kind === "unsupported") {
    return stalled(REASONS.NotSupported, err.message, { type: "requeueAfter", ms: TERMINAL_RETRY_MS });
  }
  if (status === 401 || status === 403) {
    return stalled(REASONS.CredentialsInvalid, err.message, { type: "retry", error: err });
  }
  if (status === 429) {
    return backingOff(REASONS.RateLimited, err.message, {
      type: "requeueAfter",
      ms: err.retryAfterMs ?? DEFAULT_RETRY_AFTER_MS,
    });
  }
  if (status === 503 && err.retryAfterMs !== undefined) {
    return backingOff(REASONS.ApiUnavailable, err.message, { type: "requeueAfter", ms: err.retryAfterMs });
  }
  if (status !== undefined && status >= 400 && status < 500 && !TRANSIENT_REFUSALS.has(status)) {
    return refusedForGood(status, err.message, err);
  }
  // 5xx, 404 and 409 (not proof of anything here), 408, network, timeout, parse: transient → backoff.
  return backingOff(REASONS.ApiUnavailable, err.message, { type: "retry", error: err });
}

/**
 * A 4xx the cloud will answer again the same way until something changes (docs/adr/0002-error-taxonomy.md has the
 * table): the spec (terminal: stalled, looked at again after TERMINAL_RETRY_MS or a spec change), the account's
 * payment method (retried with backoff), or the operator and the server agreeing on the API.
 */
function refusedForGood(status: number, message: string, err: Error): Verdict {
  const terminal: Outcome = { type: "requeueAfter", ms: TERMINAL_RETRY_MS };
  if (status === 402) {
    const text = `${message}: the cloud asks for payment; add a valid payment method to the organization`;
    return stalled(REASONS.PaymentMethodRequired, text, { type: "retry", error: err });
  }
  if (PROTOCOL_REFUSALS.has(status)) {
    const text = `the cloud refuses the request as this operator sends it (HTTP ${status}: ${message}); the server and the operator disagree about the API: report it`;
    return stalled(REASONS.NotSupported, text, terminal);
  }
  if (status === 413) {
    const text = `the cloud refused the request as too large (HTTP 413: ${message}): make the values the spec sends (scripts, keys, lists) smaller`;
    return stalled(REASONS.InvalidSpec, text, terminal);
  }
  if (status === 414) {
    const text = `the cloud refused the request's URL as too long (HTTP 414: ${message}): make the names and ids the spec gives shorter`;
    return stalled(REASONS.InvalidSpec, text, terminal);
  }
  // 400, 422 and any other 4xx: the request's content is refused, and would be again.
  return stalled(REASONS.InvalidSpec, message, terminal);
}
