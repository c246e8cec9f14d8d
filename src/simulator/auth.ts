// Credentials: project API keys (no expiry), user access tokens (expire) and single-use rotating refresh
// tokens. Tokens are kept in the state (`sessions`), so a simulator restarted on its state file (the playground's)
// keeps everyone signed in, as a real cloud's restart would.
import { randomBytes } from "node:crypto";
import type { Clock } from "./clock.ts";
import { SimError } from "./errors.ts";
import type { SessionsRecord, SimState } from "./state.ts";

export interface Principal {
  /** Stable identity of the credential, used for rate limiting. Never a secret. */
  id: string;
  kind: "api-key" | "user";
  email: string;
  projectIds: string[];
}

const unauthorized = (message: string) => new SimError(401, message);

export class Auth {
  readonly #clock: Clock;
  readonly #getState: () => SimState;
  tokenTtlSeconds: number;

  constructor(getState: () => SimState, clock: Clock, tokenTtlSeconds: number) {
    this.#getState = getState;
    this.#clock = clock;
    this.tokenTtlSeconds = tokenTtlSeconds;
  }

  reset(): void {
    this.#getState().sessions = { access: {}, refresh: {} };
  }

  /** The sessions of the current state (a state read from an older file has none yet). */
  #sessions(): SessionsRecord {
    const state = this.#getState();
    state.sessions ??= { access: {}, refresh: {} };
    return state.sessions;
  }

  #issue(email: string) {
    const sessions = this.#sessions();
    const now = this.#clock.now();
    // Expired access tokens go when new ones are issued: the kept sessions do not grow with every sign-in.
    for (const [token, access] of Object.entries(sessions.access)) {
      if (access.expiresAtMs <= now) delete sessions.access[token];
    }
    const accessToken = `sim-at-${randomBytes(24).toString("base64url")}`;
    const refreshToken = `sim-rt-${randomBytes(24).toString("base64url")}`;
    sessions.access[accessToken] = { email, expiresAtMs: now + this.tokenTtlSeconds * 1000 };
    sessions.refresh[refreshToken] = email;
    return {
      access_token: accessToken,
      refresh_token: refreshToken,
      expires_in: this.tokenTtlSeconds,
      token_type: "bearer",
    };
  }

  signIn(email: string, password: string) {
    const user = this.#getState().users.find((u) => u.email === email);
    if (user === undefined || user.password !== password) throw unauthorized("invalid email or password");
    return this.#issue(user.email);
  }

  /** Refresh tokens are single-use: the old one is spent, a new pair is returned. */
  refresh(refreshToken: string) {
    const sessions = this.#sessions();
    const email = Object.hasOwn(sessions.refresh, refreshToken) ? sessions.refresh[refreshToken] : undefined;
    if (email === undefined) throw unauthorized("invalid or already used refresh token");
    delete sessions.refresh[refreshToken];
    return this.#issue(email);
  }

  changePassword(principal: Principal, currentPassword: string, newPassword: string): void {
    if (principal.kind !== "user") throw new SimError(403, "a project API key cannot change a password");
    const user = this.#getState().users.find((u) => u.email === principal.email);
    if (user === undefined) throw unauthorized("user no longer exists");
    if (user.password !== currentPassword) throw new SimError(400, "current_password: does not match");
    user.password = newPassword;
  }

  /** Resolve an `Authorization` header; throws 401 when it is missing, unknown or expired. */
  authenticate(header: string | undefined): Principal {
    if (header === undefined || header === "") throw unauthorized("missing Authorization header");
    const match = /^Bearer\s+(\S+)$/i.exec(header.trim());
    if (match === null || match[1] === undefined) throw unauthorized("Authorization must be 'Bearer <token>'");
    const token = match[1];
    const state = this.#getState();
    const apiKey = state.apiKeys.find((k) => k.key === token);
    if (apiKey !== undefined) {
      return {
        id: `api-key:${token.slice(-6)}:${apiKey.projectId}`,
        kind: "api-key",
        email: "",
        projectIds: [apiKey.projectId],
      };
    }
    const sessions = this.#sessions();
    const access = Object.hasOwn(sessions.access, token) ? sessions.access[token] : undefined;
    if (access === undefined) throw unauthorized("unknown token");
    if (access.expiresAtMs <= this.#clock.now()) {
      delete sessions.access[token];
      throw unauthorized("access token expired");
    }
    const user = state.users.find((u) => u.email === access.email);
    if (user === undefined) throw unauthorized("user no longer exists");
    return { id: `user:${user.email}`, kind: "user", email: user.email, projectIds: [...user.projectIds] };
  }
}

export interface RateLimitOptions {
  ratePerSec: number;
  burst: number;
}

/** One token bucket per credential. */
export class RateLimiter {
  options: RateLimitOptions | false;
  readonly #clock: Clock;
  readonly #buckets = new Map<string, { tokens: number; updatedAtMs: number }>();

  constructor(options: RateLimitOptions | false, clock: Clock) {
    this.options = options;
    this.#clock = clock;
  }

  /** Take one token; returns 0 when allowed, else the seconds to wait (for `Retry-After`). */
  take(credential: string): number {
    if (this.options === false) return 0;
    const { ratePerSec, burst } = this.options;
    const now = this.#clock.now();
    const bucket = this.#buckets.get(credential) ?? { tokens: burst, updatedAtMs: now };
    bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.updatedAtMs) / 1000) * ratePerSec);
    bucket.updatedAtMs = now;
    this.#buckets.set(credential, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / ratePerSec));
  }

  reset(): void {
    this.#buckets.clear();
  }
}
