// The stored-session credential ({ email, session }): the client sends the session's access token, renews it
// through the session's owner ahead of expiry or after a 401 (one renewal for concurrent calls), and the owner's
// error ends the call. Against the simulator on a manual clock (tokens expire on its time).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SessionTokens, TokenSession } from "../../src/cloud/auth.ts";
import { createCloudClient } from "../../src/cloud/client.ts";
import { CloudError } from "../../src/cloud/errors.ts";
import type { TokenResponse } from "../../src/cloud/wire.ts";
import {
  createManualClock,
  type ManualClock,
  type RunningSimulator,
  startSimulator,
} from "../../src/simulator/index.ts";

let sim: RunningSimulator;
let clock: ManualClock;

beforeAll(async () => {
  clock = createManualClock();
  sim = await startSimulator({ port: 0, latencyMs: 0, rateLimit: false, clock, tokenTtlSeconds: 600 });
});
afterAll(async () => {
  await sim.close();
});

/** A session owner that keeps its pair in memory and records every renewal. */
function memorySession(first: TokenResponse) {
  const toTokens = (t: TokenResponse): SessionTokens => ({
    accessToken: t.access_token,
    refreshToken: t.refresh_token,
    expiresAtMs: clock.now() + t.expires_in * 1000,
  });
  let stored = toTokens(first);
  const renewals: SessionTokens[] = [];
  const session: TokenSession = {
    tokens: () => stored,
    now: () => clock.now(),
    async renew(stale, refresh) {
      renewals.push(stale);
      stored = toTokens(await refresh(stored.refreshToken));
      return stored;
    },
  };
  return { session, renewals, current: () => stored };
}

async function signIn(): Promise<TokenResponse> {
  return createCloudClient({ baseUrl: sim.url, credentials: sim.user, rateLimiter: false }).auth.token();
}

describe("session credentials", () => {
  it("uses the stored access token and renews it (once for concurrent calls) shortly before it expires", async () => {
    const owner = memorySession(await signIn());
    const first = owner.current();
    const client = createCloudClient({
      baseUrl: sim.url,
      credentials: { email: sim.user.email, session: owner.session },
      rateLimiter: false,
    });
    await client.projects.list();
    expect(owner.renewals).toEqual([]);
    clock.advance(600_000 - 20_000); // within 30 s of expiry
    await Promise.all([client.projects.list(), client.organizations.list(), client.projects.get(sim.projectId)]);
    expect(owner.renewals).toEqual([first]);
    expect(owner.current().refreshToken).not.toBe(first.refreshToken);
    // Single-use: the spent refresh token is refused now.
    await expect(client.auth.refresh(first.refreshToken)).rejects.toMatchObject({ status: 401 });
  });

  it("renews after a 401 and retries once; the owner's error ends the call", async () => {
    const owner = memorySession(await signIn());
    const client = createCloudClient({
      baseUrl: sim.url,
      credentials: { email: sim.user.email, session: owner.session },
      rateLimiter: false,
    });
    // The server forgets its tokens (a restart): the access token is refused, the refresh token too.
    await fetch(`${sim.adminUrl}/reset`, { method: "POST" });
    const error = await client.projects.list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CloudError);
    expect(error).toMatchObject({ status: 401 });
    expect(owner.renewals).toHaveLength(1);
  });

  it("rejects a session without a usable owner", () => {
    const bad = { email: "a@example.com", session: { tokens: "no" } };
    expect(() => createCloudClient({ baseUrl: sim.url, credentials: bad as never })).toThrow(/session/);
  });
});
