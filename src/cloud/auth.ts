// Credentials of the cloud client: a project API key (sent as is), email + password exchanged for
// short-lived access tokens, or a sign-in kept outside the process (a CLI's token file) that the client renews
// through its owner. Tokens are renewed ahead of expiry, by ONE refresh shared by every concurrent request;
// single-use refresh tokens are rotated; a refused refresh token falls back to a fresh sign-in (password form).
import type { Logger } from "pino";
import { CloudError } from "./errors.ts";
import type { Transport } from "./transport.ts";
import { TokenResponse } from "./wire.ts";

export type Credentials = { apiKey: string } | { email: string; password: string } | SessionCredentials;

/** An access/refresh token pair; `expiresAtMs` is wall-clock time (the pair outlives the process). */
export interface SessionTokens {
  accessToken: string;
  refreshToken: string;
  expiresAtMs: number;
}

/**
 * A sign-in whose tokens live outside the client (a CLI's token file). The client sends `tokens()`'s access
 * token and, when it is about to expire or was refused, asks `renew` for a new pair: the owner spends the
 * single-use refresh token with `refresh` (or adopts a pair another process already rotated), stores the new
 * pair before returning it, and throws when the sign-in is over.
 */
export interface TokenSession {
  tokens(): SessionTokens;
  /** The wall clock `expiresAtMs` is measured on; default Date.now. */
  now?(): number;
  renew(
    stale: SessionTokens,
    refresh: (refreshToken: string) => Promise<TokenResponse>,
    signal?: AbortSignal,
  ): Promise<SessionTokens>;
}

/** `email` names the user (rate-limit bucket, logs); it is never sent. */
export interface SessionCredentials {
  email: string;
  session: TokenSession;
}

/** Renew a stored session this long before its access token expires. */
const SESSION_RENEW_AHEAD_MS = 30_000;
const TOKEN_ROUTE = "/auth/token";
/** Renew when less than this share of the token's lifetime is left (capped by REFRESH_AHEAD_MAX_MS). */
const REFRESH_AHEAD_SHARE = 0.2;
const REFRESH_AHEAD_MAX_MS = 60_000;

export type TokenGrant =
  | { grant_type: "password"; email: string; password: string }
  | { grant_type: "refresh_token"; refresh_token: string };

/** POST /auth/token without a credential (the grant is the credential). */
export function requestToken(transport: Transport, body: TokenGrant, signal?: AbortSignal): Promise<TokenResponse> {
  return transport.send(
    { method: "POST", route: TOKEN_ROUTE, path: "auth/token", body, schema: TokenResponse, sensitive: true, signal },
    undefined,
  );
}

export function validateCredentials(credentials: unknown): Credentials {
  if (typeof credentials === "object" && credentials !== null) {
    const record = credentials as Record<string, unknown>;
    if (typeof record.apiKey === "string" && record.apiKey.trim() !== "") return { apiKey: record.apiKey };
    if (isTokenSession(record.session) && typeof record.email === "string" && record.email !== "") {
      return { email: record.email, session: record.session };
    }
    if (typeof record.email === "string" && record.email !== "" && typeof record.password === "string") {
      if (record.password !== "") return { email: record.email, password: record.password };
    }
  }
  throw new TypeError("cloud credentials need a non-empty apiKey, a non-empty email and password, or a session");
}

function isTokenSession(value: unknown): value is TokenSession {
  if (typeof value !== "object" || value === null) return false;
  const record = value as Record<string, unknown>;
  return typeof record.tokens === "function" && typeof record.renew === "function";
}

interface TokenState {
  accessToken: string;
  refreshToken: string;
  /** Monotonic time (ms) after which the access token is renewed before use. */
  renewAt: number;
}

export interface Authenticator {
  /** The Authorization header value for the next request. */
  authorization(signal?: AbortSignal): Promise<string>;
  /** A request sent with `usedAuthorization` got 401: true when retrying once with a new token makes sense. */
  recoverFromUnauthorized(usedAuthorization: string, signal?: AbortSignal): Promise<boolean>;
}

export class ApiKeyAuthenticator implements Authenticator {
  readonly #header: string;
  constructor(apiKey: string) {
    this.#header = `Bearer ${apiKey}`;
  }
  async authorization(): Promise<string> {
    return this.#header;
  }
  async recoverFromUnauthorized(): Promise<boolean> {
    // A project key does not expire; a 401 means it was revoked, and asking again will not help.
    return false;
  }
}

export class PasswordAuthenticator implements Authenticator {
  readonly #email: string;
  #password: string;
  readonly #transport: Transport;
  readonly #logger: Logger;
  readonly #now: () => number;
  #state: TokenState | undefined;
  #renewal: Promise<TokenState> | undefined;

  constructor(
    credentials: { email: string; password: string },
    transport: Transport,
    logger: Logger,
    now: () => number = () => performance.now(),
  ) {
    this.#email = credentials.email;
    this.#password = credentials.password;
    this.#transport = transport;
    this.#logger = logger;
    this.#now = now;
  }

  async authorization(signal?: AbortSignal): Promise<string> {
    const state = this.#state;
    if (state && this.#now() < state.renewAt) return `Bearer ${state.accessToken}`;
    const renewed = await this.#renew(signal);
    return `Bearer ${renewed.accessToken}`;
  }

  async recoverFromUnauthorized(usedAuthorization: string, signal?: AbortSignal): Promise<boolean> {
    const current = this.#state;
    // Someone already renewed since that request left: just retry with the new token.
    if (current && `Bearer ${current.accessToken}` !== usedAuthorization) return true;
    if (current) current.renewAt = Number.NEGATIVE_INFINITY;
    await this.#renew(signal);
    return true;
  }

  /** The user's current sign-in (the password follows changePassword). */
  signIn(): { email: string; password: string } {
    return { email: this.#email, password: this.#password };
  }

  /** After a successful password change, later sign-ins use the new password. */
  passwordChanged(newPassword: string): void {
    this.#password = newPassword;
  }

  /** One renewal at a time: concurrent callers share the promise. */
  #renew(signal?: AbortSignal): Promise<TokenState> {
    if (!this.#renewal) {
      this.#renewal = this.#renewOnce(signal).finally(() => {
        this.#renewal = undefined;
      });
    }
    return this.#renewal;
  }

  async #renewOnce(signal?: AbortSignal): Promise<TokenState> {
    const refreshToken = this.#state?.refreshToken;
    if (refreshToken) {
      try {
        return this.#store(
          await requestToken(this.#transport, { grant_type: "refresh_token", refresh_token: refreshToken }, signal),
        );
      } catch (error) {
        if (!(error instanceof CloudError && error.kind === "http" && isRefusal(error.status))) throw error;
        this.#logger.info({ status: error.status }, "refresh token refused, signing in again");
      }
    }
    const signIn = { grant_type: "password" as const, email: this.#email, password: this.#password };
    return this.#store(await requestToken(this.#transport, signIn, signal));
  }

  #store(token: TokenResponse): TokenState {
    const lifetimeMs = Math.max(0, token.expires_in) * 1000;
    const aheadMs = Math.min(REFRESH_AHEAD_MAX_MS, lifetimeMs * REFRESH_AHEAD_SHARE);
    const state = {
      accessToken: token.access_token,
      // Single-use refresh tokens: always keep the newest one.
      refreshToken: token.refresh_token,
      renewAt: this.#now() + lifetimeMs - aheadMs,
    };
    this.#state = state;
    this.#logger.debug({ expiresInSec: token.expires_in }, "cloud access token renewed");
    return state;
  }
}

/** Sends a stored session's access token; renews it through the session's owner (one renewal at a time). */
export class SessionAuthenticator implements Authenticator {
  readonly #session: TokenSession;
  readonly #transport: Transport;
  readonly #now: () => number;
  #current: SessionTokens;
  #renewal: Promise<SessionTokens> | undefined;

  constructor(session: TokenSession, transport: Transport) {
    this.#session = session;
    this.#transport = transport;
    this.#now = () => (session.now ? session.now() : Date.now());
    this.#current = session.tokens();
  }

  async authorization(signal?: AbortSignal): Promise<string> {
    if (this.#now() < this.#current.expiresAtMs - SESSION_RENEW_AHEAD_MS) return `Bearer ${this.#current.accessToken}`;
    return `Bearer ${(await this.#renew(signal)).accessToken}`;
  }

  async recoverFromUnauthorized(usedAuthorization: string, signal?: AbortSignal): Promise<boolean> {
    if (`Bearer ${this.#current.accessToken}` !== usedAuthorization) return true;
    await this.#renew(signal);
    return true;
  }

  #renew(signal?: AbortSignal): Promise<SessionTokens> {
    if (!this.#renewal) {
      const refresh = (refreshToken: string) =>
        requestToken(this.#transport, { grant_type: "refresh_token", refresh_token: refreshToken }, signal);
      this.#renewal = this.#session
        .renew(this.#current, refresh, signal)
        .then((tokens) => {
          this.#current = tokens;
          return tokens;
        })
        .finally(() => {
          this.#renewal = undefined;
        });
    }
    return this.#renewal;
  }
}

function isRefusal(status: number | undefined): boolean {
  return status === 400 || status === 401 || status === 403;
}
