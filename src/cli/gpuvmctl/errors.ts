// The errors gpuvmctl reports: one line naming what to do, and an exit code per class (docs/cli.md#exit-codes).
import { isCloudError } from "../../cloud/index.ts";

export const EXIT = { ok: 0, failure: 1, usage: 2, auth: 3, notFound: 4, api: 5, interrupted: 130 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export class CliError extends Error {
  override name = "CliError";
  readonly exitCode: ExitCode;
  constructor(message: string, exitCode: ExitCode = EXIT.failure, options?: { cause?: unknown }) {
    super(message, options);
    this.exitCode = exitCode;
  }
}

/** Bad flags or arguments: exit 2. */
export class UsageError extends CliError {
  override name = "UsageError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, EXIT.usage, options);
  }
}

/** No credential, or the API refused it: exit 3. */
export class AuthError extends CliError {
  override name = "AuthError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, EXIT.auth, options);
  }
}

/** What was asked for does not exist: exit 4. */
export class NotFoundError extends CliError {
  override name = "NotFoundError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, EXIT.notFound, options);
  }
}

/** The API failed or answered something unusable: exit 5. */
export class ApiError extends CliError {
  override name = "ApiError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, EXIT.api, options);
  }
}

const SIGN_IN_HINT = "run 'gpuvmctl login' or set GPUCLOUD_API_KEY";

/** Any error → a CliError with a one-line message and its exit code. */
export function toCliError(error: unknown): CliError {
  if (error instanceof CliError) return error;
  if (isCloudError(error)) {
    const message = error.message.split("\n")[0] ?? error.message;
    if (error.kind === "http" && error.status === 401) {
      return new AuthError(`the API refused the credential (${message}): ${SIGN_IN_HINT}`, { cause: error });
    }
    if (error.kind === "http" && error.status === 403) {
      return new AuthError(`no access (${message}): check the project with 'gpuvmctl projects'`, { cause: error });
    }
    if (error.kind === "http" && error.status === 404) return new NotFoundError(message, { cause: error });
    // The client refused to send it: the flags made an invalid request.
    if (error.kind === "parse" && error.code === "invalid_request") return new UsageError(message, { cause: error });
    const hint =
      error.kind === "network" || error.kind === "timeout"
        ? ": check the API URL with 'gpuvmctl config' and your network"
        : error.status === 429
          ? ": rate limited, try again in a moment"
          : "";
    const id = error.errorId === undefined ? "" : ` (error id ${error.errorId})`;
    return new ApiError(`${message}${id}${hint}`, { cause: error });
  }
  const message = error instanceof Error ? error.message : String(error);
  return new CliError(message.split("\n")[0] ?? message, EXIT.failure, { cause: error });
}
