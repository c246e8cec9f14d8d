// Email + password authentication: refresh on 401, one refresh for concurrent requests, rotation of
// single-use refresh tokens, re-login when the refresh token is refused, renewal ahead of expiry, redaction.
import { Writable } from "node:stream";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createCloudClient } from "../../src/cloud/client.ts";
import { CloudError } from "../../src/cloud/errors.ts";
import { PROJECT_ID, tokenFixture, VM_ID, vmFixture } from "./fixtures.ts";
import { type RecordedRequest, type StubServer, sendJson, sleep, startStub } from "./stub-server.ts";

const USER = { email: "ada@example.com", password: "correct horse battery staple" };

/** A token endpoint with single-use refresh tokens, and a resource endpoint that checks the access token. */
class TokenAuthority {
  issued = 0;
  expiresIn = 3600;
  readonly validAccess = new Set<string>();
  readonly validRefresh = new Set<string>();
  readonly grants: string[] = [];

  handle(request: RecordedRequest, response: import("node:http").ServerResponse): void {
    if (request.path === "/auth/token") {
      const body = request.body as Record<string, string>;
      this.grants.push(body.grant_type === "refresh_token" ? `refresh:${body.refresh_token}` : "password");
      if (body.grant_type === "refresh_token" && !this.validRefresh.delete(body.refresh_token ?? "")) {
        sendJson(response, 401, { code: "unauthorized", message: "refresh token already used" });
        return;
      }
      if (body.grant_type === "password" && (body.email !== USER.email || body.password !== USER.password)) {
        sendJson(response, 401, { code: "unauthorized", message: "bad credentials" });
        return;
      }
      const token = tokenFixture(++this.issued, this.expiresIn);
      this.validAccess.add(token.access_token as string);
      this.validRefresh.add(token.refresh_token as string);
      sendJson(response, 200, token);
      return;
    }
    const presented = (request.headers.authorization ?? "").replace(/^Bearer /, "");
    if (!this.validAccess.has(presented)) {
      sendJson(response, 401, { code: "unauthorized", message: "token expired" });
      return;
    }
    sendJson(response, 200, vmFixture());
  }

  /** Server-side expiry of every access token issued so far. */
  expireAll(): void {
    this.validAccess.clear();
  }
}

let stub: StubServer;
let authority: TokenAuthority;
beforeEach(async () => {
  authority = new TokenAuthority();
  stub = await startStub((req, res) => authority.handle(req, res));
});
afterEach(async () => {
  await stub.close();
});

const userClient = (extra: { logger?: pino.Logger } = {}) =>
  createCloudClient({ baseUrl: stub.url, credentials: USER, rateLimiter: false, ...extra });

describe("password authentication", () => {
  it("signs in once, then uses the access token", async () => {
    const c = userClient();
    await c.vms.get(PROJECT_ID, VM_ID);
    await c.vms.get(PROJECT_ID, VM_ID);
    expect(authority.grants).toEqual(["password"]);
    const resourceCalls = stub.requests.filter((r) => r.path !== "/auth/token");
    expect(resourceCalls.map((r) => r.headers.authorization)).toEqual(["Bearer access-1", "Bearer access-1"]);
    expect(stub.requests.find((r) => r.path === "/auth/token")?.headers.authorization).toBeUndefined();
  });

  it("refreshes after a 401 and retries once, rotating the refresh token", async () => {
    const c = userClient();
    await c.vms.get(PROJECT_ID, VM_ID);
    authority.expireAll();
    await expect(c.vms.get(PROJECT_ID, VM_ID)).resolves.toMatchObject({ id: VM_ID });
    authority.expireAll();
    await c.vms.get(PROJECT_ID, VM_ID);
    // Each refresh presents the newest refresh token (the previous one is single-use).
    expect(authority.grants).toEqual(["password", "refresh:refresh-1", "refresh:refresh-2"]);
  });

  it("shares one refresh among concurrent requests that all got 401", async () => {
    const c = userClient();
    await c.vms.get(PROJECT_ID, VM_ID);
    authority.expireAll();
    const results = await Promise.all(Array.from({ length: 8 }, () => c.vms.get(PROJECT_ID, VM_ID)));
    expect(results).toHaveLength(8);
    expect(authority.grants).toEqual(["password", "refresh:refresh-1"]);
  });

  it("signs in again when the refresh token is refused", async () => {
    const c = userClient();
    await c.vms.get(PROJECT_ID, VM_ID);
    authority.expireAll();
    authority.validRefresh.clear();
    await expect(c.vms.get(PROJECT_ID, VM_ID)).resolves.toMatchObject({ id: VM_ID });
    expect(authority.grants).toEqual(["password", "refresh:refresh-1", "password"]);
  });

  it("renews ahead of expiry (expires_in is seconds) without waiting for a 401", async () => {
    authority.expiresIn = 1;
    const c = userClient();
    await c.vms.get(PROJECT_ID, VM_ID);
    await sleep(850);
    await c.vms.get(PROJECT_ID, VM_ID);
    expect(authority.grants).toEqual(["password", "refresh:refresh-1"]);
    expect(stub.requests.filter((r) => r.path !== "/auth/token").every((r) => r.headers.authorization)).toBe(true);
    expect(stub.requests.filter((r) => r.path !== "/auth/token")).toHaveLength(2);
  });

  it("gives up with a clear 401 when the password is wrong", async () => {
    const c = createCloudClient({ baseUrl: stub.url, credentials: { ...USER, password: "nope" }, rateLimiter: false });
    const error = await c.vms.get(PROJECT_ID, VM_ID).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CloudError);
    expect((error as CloudError).status).toBe(401);
    expect((error as CloudError).route).toBe("/auth/token");
  });

  it("does not retry a 401 with an API key (keys do not expire)", async () => {
    const c = createCloudClient({ baseUrl: stub.url, credentials: { apiKey: "revoked" }, rateLimiter: false });
    const error = await c.vms.get(PROJECT_ID, VM_ID).catch((e: unknown) => e);
    expect((error as CloudError).status).toBe(401);
    expect(stub.requests).toHaveLength(1);
  });
});

describe("redaction", () => {
  it("never writes a password, token, API key or script to the log", async () => {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString("utf8"));
        done();
      },
    });
    const logger = pino({ level: "debug" }, destination);
    const c = userClient({ logger });
    await c.vms.get(PROJECT_ID, VM_ID);
    authority.expireAll();
    await c.vms.get(PROJECT_ID, VM_ID);
    stub.handle((_, res) => sendJson(res, 200, { message: "changed" }));
    await c.auth.changePassword({ current_password: USER.password, new_password: "an even longer secret" });
    stub.handle((_, res) =>
      sendJson(res, 200, {
        operation: {
          operation_id: "o",
          state: "IN_PROGRESS",
          metadata: { operation_name: "CREATE", id: "v" },
          started_at: "",
        },
      }),
    );
    await c.vms.create(PROJECT_ID, {
      name: "v",
      type: "a40.1x",
      location: "l",
      ssh_public_key: "ssh-ed25519 AAAA",
      startup_script: "export TOKEN=script-secret",
    });
    const keyClient = createCloudClient({
      baseUrl: stub.url,
      credentials: { apiKey: "key-secret-123" },
      rateLimiter: false,
      logger,
    });
    stub.handle((_, res) => sendJson(res, 200, vmFixture()));
    await keyClient.vms.get(PROJECT_ID, VM_ID);

    // A failed change of password, logged the way an operator would, leaks nothing either.
    stub.handle((_, res) => sendJson(res, 500, { code: "internal_error", message: "db down" }));
    const failed = await c.auth
      .changePassword({ current_password: "an even longer secret", new_password: "failed-change-secret" })
      .catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(CloudError);
    logger.error({ err: failed, cause: (failed as Error).cause }, "change failed");

    const log = lines.join("");
    expect(log).toContain("/projects/:projectId/vms/:vmId");
    expect(log).toContain("[Redacted]");
    for (const secret of [
      USER.password,
      "an even longer secret",
      "access-1",
      "access-2",
      "refresh-1",
      "refresh-2",
      "key-secret-123",
      "script-secret",
      "failed-change-secret",
    ]) {
      expect(log).not.toContain(secret);
    }
  });
});
