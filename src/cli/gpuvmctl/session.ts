// The stored sign-in as a TokenSession for the cloud client: renewals take the session lock, adopt a pair
// another gpuvmctl process already rotated, or spend the single-use refresh token and persist the new pair
// atomically before anyone uses it.
import type { SessionTokens, TokenSession } from "../../cloud/index.ts";
import { isCloudError } from "../../cloud/index.ts";
import type { TokenResponse } from "../../cloud/wire.ts";
import type { ConfigStore, StoredSession } from "./config-store.ts";
import { AuthError } from "./errors.ts";

/** A pair that expires within this margin is not worth adopting. */
const ADOPT_MARGIN_MS = 30_000;

function tokensOf(session: StoredSession): SessionTokens {
  return {
    accessToken: session.accessToken,
    refreshToken: session.refreshToken,
    expiresAtMs: session.expiresAtMs,
  };
}

/** The session to store after a successful token grant. */
export function sessionFromToken(
  answer: TokenResponse,
  base: { apiUrl: string; email: string; signedInAt: string },
  now: number,
): StoredSession {
  return {
    ...base,
    accessToken: answer.access_token,
    refreshToken: answer.refresh_token,
    expiresAtMs: now + Math.max(0, answer.expires_in) * 1000,
  };
}

export function fileSession(store: ConfigStore, initial: StoredSession, now: () => number): TokenSession {
  return {
    tokens: () => tokensOf(initial),
    now,
    renew: (stale, refresh) =>
      store.withSessionLock(async () => {
        const onDisk = await store.readSession();
        if (onDisk === undefined || onDisk.email !== initial.email || onDisk.apiUrl !== initial.apiUrl) {
          throw new AuthError("signed out meanwhile: run 'gpuvmctl login'");
        }
        const rotatedElsewhere = onDisk.refreshToken !== stale.refreshToken;
        if (rotatedElsewhere && onDisk.expiresAtMs - ADOPT_MARGIN_MS > now()) return tokensOf(onDisk);
        let answer: TokenResponse;
        try {
          answer = await refresh(onDisk.refreshToken);
        } catch (error) {
          if (isCloudError(error) && error.kind === "http" && [400, 401, 403].includes(error.status ?? 0)) {
            throw new AuthError(`the sign-in of ${initial.email} has expired: run 'gpuvmctl login'`, {
              cause: error,
            });
          }
          throw error;
        }
        const renewed = sessionFromToken(answer, onDisk, now());
        await store.writeSession(renewed);
        return tokensOf(renewed);
      }),
  };
}
