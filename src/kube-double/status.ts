// Kubernetes `Status` error bodies. Every failure the double answers is an ApiError, so clients see the same
// reason/code/details shape a real API server sends.
import type { ResourceType } from "./types.ts";

export interface StatusCause {
  reason: string;
  message: string;
  field?: string;
}

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}

export class ApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details: StatusDetails | undefined;

  constructor(code: number, reason: string, message: string, details?: StatusDetails, options?: ErrorOptions) {
    super(message, options);
    this.name = "ApiError";
    this.code = code;
    this.reason = reason;
    this.details = details;
  }

  toStatus(): Record<string, unknown> {
    return {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: this.message,
      reason: this.reason,
      // Like metav1.StatusDetails, empty strings are left out (`"name": ""` never appears).
      ...(this.details === undefined ? {} : { details: withoutEmptyStrings(this.details) }),
      code: this.code,
    };
  }
}

function withoutEmptyStrings(details: StatusDetails): StatusDetails {
  return Object.fromEntries(Object.entries(details).filter(([, value]) => value !== "")) as StatusDetails;
}

type ResourceRef = Pick<ResourceType, "group" | "plural">;

function qualified(type: ResourceRef): string {
  return type.group === "" ? type.plural : `${type.plural}.${type.group}`;
}

export function notFound(type: ResourceRef, name: string): ApiError {
  return new ApiError(404, "NotFound", `${qualified(type)} "${name}" not found`, {
    name,
    group: type.group,
    kind: type.plural,
  });
}

export function alreadyExists(type: ResourceRef, name: string): ApiError {
  return new ApiError(409, "AlreadyExists", `${qualified(type)} "${name}" already exists`, {
    name,
    group: type.group,
    kind: type.plural,
  });
}

export function conflict(type: ResourceRef, name: string, why: string): ApiError {
  return new ApiError(409, "Conflict", `Operation cannot be fulfilled on ${qualified(type)} "${name}": ${why}`, {
    name,
    group: type.group,
    kind: type.plural,
  });
}

export const STALE_OBJECT =
  "the object has been modified; please apply your changes to the latest version and try again";

export function invalid(type: Pick<ResourceType, "group" | "kind">, name: string, causes: StatusCause[]): ApiError {
  const kind = type.group === "" ? type.kind : `${type.kind}.${type.group}`;
  const summary = causes.map((cause) => (cause.field ? `${cause.field}: ${cause.message}` : cause.message));
  // An aggregate of several errors is bracketed, one alone is not (apimachinery's NewInvalid).
  const errors = summary.length === 1 ? (summary[0] ?? "") : `[${summary.join(", ")}]`;
  return new ApiError(422, "Invalid", `${kind} "${name}" is invalid: ${errors}`, {
    name,
    group: type.group,
    kind: type.kind,
    causes,
  });
}

export function badRequest(message: string, causes?: StatusCause[], options?: ErrorOptions): ApiError {
  return new ApiError(400, "BadRequest", message, causes === undefined ? undefined : { causes }, options);
}

export function methodNotAllowed(message: string): ApiError {
  return new ApiError(405, "MethodNotAllowed", message);
}

export function unsupportedMediaType(contentType: string): ApiError {
  return new ApiError(415, "UnsupportedMediaType", `the body of the request was in an unknown format: ${contentType}`);
}

export function gone(message: string): ApiError {
  return new ApiError(410, "Expired", message);
}
