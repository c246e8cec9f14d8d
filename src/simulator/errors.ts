// The one error type the simulator's handlers throw; the server turns it into the contract's error body.
import { ERROR_CODES } from "../cloud/wire.ts";

export class SimError extends Error {
  readonly status: number;
  readonly code: string;
  readonly reason: string | undefined;
  /** Sent as `Retry-After` (429). */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    status: number,
    message: string,
    options?: { code?: string | undefined; reason?: string; retryAfterSeconds?: number },
  ) {
    super(message);
    this.name = "SimError";
    this.status = status;
    this.code = options?.code ?? (ERROR_CODES as Record<number, string>)[status] ?? "error";
    this.reason = options?.reason;
    this.retryAfterSeconds = options?.retryAfterSeconds;
  }
}

export const badRequest = (message: string): SimError => new SimError(400, message);
export const notFound = (message: string): SimError => new SimError(404, message);
export const conflict = (message: string): SimError => new SimError(409, message);
export const forbidden = (message: string, reason?: string): SimError =>
  new SimError(403, message, reason === undefined ? undefined : { reason });
