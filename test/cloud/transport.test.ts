// Transport and fault behaviour of the cloud client against a real local HTTP server, including servers that
// misbehave on purpose: redirects elsewhere, endless or huge answers, bodies that never finish, paths that try to
// leave the base URL, and a server that stops answering (the account's circuit breaker).
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { answerText, sendRequest } from "../../src/cloud/buffered-fetch.ts";
import { AccountBulkhead, DEFAULT_BULKHEAD } from "../../src/cloud/bulkhead.ts";
import { type CloudClientOptions, createCloudClient } from "../../src/cloud/client.ts";
import { CloudError, isNotFound, isOperationGone, isUnsupported } from "../../src/cloud/errors.ts";
import { TokenBucket } from "../../src/cloud/rate-limit.ts";
import type { RequestEvent } from "../../src/cloud/transport.ts";
import { operationFixture, PROJECT_ID, VM_ID, vmFixture } from "./fixtures.ts";
import { type StubServer, sendJson, sleep, startStub } from "./stub-server.ts";

let stub: StubServer;
beforeEach(async () => {
  stub = await startStub();
});
afterEach(async () => {
  await stub.close();
});

function client(extra: Partial<CloudClientOptions> = {}) {
  return createCloudClient({
    baseUrl: stub.url,
    credentials: { apiKey: "test-key" },
    rateLimiter: false,
    bulkhead: false,
    backoffBaseMs: 20,
    timeoutMs: 2000,
    ...extra,
  });
}

async function failure(promise: Promise<unknown>): Promise<CloudError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(CloudError);
    return error as CloudError;
  }
  throw new Error("expected the call to fail");
}

describe("retries", () => {
  it("honours Retry-After (seconds) on 429 before retrying a GET", async () => {
    let calls = 0;
    stub.handle((_, res) => {
      calls++;
      if (calls === 1) sendJson(res, 429, { code: "too_many_requests", message: "slow down" }, { "retry-after": "1" });
      else sendJson(res, 200, vmFixture());
    });
    const started = performance.now();
    const vm = await client().vms.get(PROJECT_ID, VM_ID);
    const elapsed = performance.now() - started;
    expect(vm.id).toBe(VM_ID);
    expect(calls).toBe(2);
    expect(elapsed).toBeGreaterThanOrEqual(950);
    expect(elapsed).toBeLessThan(2500);
  });

  it("a 429 tells the account's bucket: its Retry-After holds the other callers too, and the rate adapts", async () => {
    const bucket = new TokenBucket({ ratePerSec: 50, burst: 50, adaptive: {} });
    let calls = 0;
    stub.handle((_, res) => {
      calls++;
      if (calls === 1) sendJson(res, 429, { code: "too_many_requests" }, { "retry-after": "1" });
      else sendJson(res, 200, vmFixture());
    });
    const shared = client({ rateLimiter: bucket });
    await shared.vms.get(PROJECT_ID, VM_ID);
    expect(bucket.throttledCount).toBe(1);
    expect(bucket.currentRate()).toBeLessThan(50);
    // Another caller of the same account right after: held until the Retry-After has passed (already, here),
    // and its accepted answer starts the recovery.
    const before = bucket.currentRate();
    await sleep(50);
    await client({ rateLimiter: bucket }).vms.get(PROJECT_ID, VM_ID);
    expect(bucket.currentRate()).toBeGreaterThan(before);
  });

  it("retries a GET after 503 and stops after retryLimit", async () => {
    stub.handle((_, res) => sendJson(res, 503, { code: "unavailable", message: "busy" }));
    const error = await failure(client({ retryLimit: 2 }).vms.get(PROJECT_ID, VM_ID));
    expect(stub.requests).toHaveLength(3);
    expect(error.status).toBe(503);
    expect(error.retryable).toBe(true);
    expect(error.route).toBe("/projects/:projectId/vms/:vmId");
  });

  it("a GET that fails with 503 once succeeds on retry", async () => {
    let calls = 0;
    stub.handle((_, res) =>
      ++calls === 1 ? sendJson(res, 503, { code: "unavailable" }) : sendJson(res, 200, vmFixture()),
    );
    await expect(client().vms.get(PROJECT_ID, VM_ID)).resolves.toMatchObject({ id: VM_ID });
    expect(calls).toBe(2);
  });

  it("does not retry a POST after a timeout: it may have reached the server", async () => {
    stub.handle(async (_, res) => {
      await sleep(600);
      sendJson(res, 200, { operation: operationFixture() });
    });
    const error = await failure(
      client({ timeoutMs: 150 }).disks.create(PROJECT_ID, { name: "d", size: "1TiB", location: "l" }),
    );
    expect(error.kind).toBe("timeout");
    expect(error.method).toBe("POST");
    await sleep(100);
    expect(stub.requests).toHaveLength(1);
  });

  it("retries a POST after 429", async () => {
    let calls = 0;
    stub.handle((_, res) =>
      ++calls === 1
        ? sendJson(res, 429, { code: "too_many_requests" }, { "retry-after": "0" })
        : sendJson(res, 200, { operation: operationFixture() }),
    );
    const op = await client().disks.create(PROJECT_ID, { name: "d", size: "1TiB", location: "l" });
    expect(op.operation_id).toBe("op-1");
    const posts = stub.requests.filter((r) => r.method === "POST");
    expect(posts).toHaveLength(2);
    // Every attempt carries the whole JSON body (it travels beside ky's Request, not in it).
    for (const post of posts) {
      expect(post.headers["content-type"]).toBe("application/json");
      expect(post.body).toEqual({ name: "d", size: "1TiB", location: "l" });
    }
  });

  it("does not retry a POST after 503", async () => {
    stub.handle((_, res) => sendJson(res, 503, { code: "unavailable" }));
    const error = await failure(client().vms.terminate(PROJECT_ID, VM_ID));
    expect(error.status).toBe(503);
    expect(stub.requests).toHaveLength(1);
  });

  it("does not retry a POST after a connection reset", async () => {
    stub.handle((_, res) => {
      res.socket?.destroy();
    });
    const error = await failure(client().networks.create(PROJECT_ID, { name: "n" }));
    expect(error.kind).toBe("network");
    expect(stub.requests).toHaveLength(1);
  });

  it("retries a POST after ECONNREFUSED: the request never left", async () => {
    const port = stub.port;
    await stub.close();
    const c = createCloudClient({
      baseUrl: `http://127.0.0.1:${port}/v0.1`,
      credentials: { apiKey: "k" },
      rateLimiter: false,
      backoffBaseMs: 400,
      retryLimit: 2,
    });
    const pending = c.networks.create(PROJECT_ID, { name: "n" });
    await sleep(100);
    stub = await startStub((_, res) => sendJson(res, 200, { operation: operationFixture() }), port);
    await expect(pending).resolves.toMatchObject({ operation_id: "op-1" });
    expect(stub.requests).toHaveLength(1);
  });

  it("does not wait in-process for a Retry-After above maxRetryAfterMs", async () => {
    stub.handle((_, res) => sendJson(res, 429, { code: "too_many_requests" }, { "retry-after": "30" }));
    const error = await failure(client().vms.get(PROJECT_ID, VM_ID));
    expect(stub.requests).toHaveLength(1);
    expect(error.retryAfterMs).toBe(30_000);
    expect(error.retryable).toBe(true);
  });
});

describe("answers and errors", () => {
  it("reports a malformed JSON body as a parse error naming the route", async () => {
    stub.handle((_, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{not json");
    });
    const error = await failure(client().vms.get(PROJECT_ID, VM_ID));
    expect(error.kind).toBe("parse");
    expect(error.route).toBe("/projects/:projectId/vms/:vmId");
    expect(error.fieldPath).toBe("");
    expect(error.message).toContain("GET /projects/:projectId/vms/:vmId");
  });

  it("reports a missing required field with its path", async () => {
    const page = { items: [vmFixture(), vmFixture({ state: undefined })], next_page_token: "", prev_page_token: "" };
    stub.handle((_, res) => sendJson(res, 200, page));
    const error = await failure(client().vms.list(PROJECT_ID));
    expect(error.kind).toBe("parse");
    expect(error.fieldPath).toBe("items.1.state");
    expect(error.message).toContain("items.1.state");
    expect(error.endpoint).toBe("GET /projects/:projectId/vms");
  });

  it("decodes an answer as fetch does: a character split between chunks, a leading byte-order mark", async () => {
    const name = "trainer-ü-€-𝔾";
    const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(vmFixture({ name })))]);
    stub.handle(async (_, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      // One byte at a time: every multi-byte character arrives split over several chunks.
      for (const byte of bytes) {
        res.write(Buffer.from([byte]));
        await sleep(0);
      }
      res.end();
    });
    const vm = await client().vms.get(PROJECT_ID, VM_ID);
    expect(vm.name).toBe(name);
  });

  it("hands a success over as text, without a second copy of its bytes in the Response", async () => {
    const page = { items: [vmFixture()], next_page_token: "", prev_page_token: "" };
    stub.handle((_, res) => sendJson(res, 200, page));
    const head = await sendRequest(`${stub.url}/projects/${PROJECT_ID}/vms`, undefined);
    const response = await head.read(1 << 20, () => new Error("too large"));
    expect(response.body).toBeNull();
    expect(JSON.parse(await answerText(response))).toEqual(page);
    // An error answer keeps its body in the Response, where ky's error handling reads it.
    stub.handle((_, res) => sendJson(res, 409, { code: "conflict", message: "name in use" }));
    const conflict = await (await sendRequest(`${stub.url}/projects/${PROJECT_ID}/vms`, undefined)).read(
      1 << 20,
      () => new Error(),
    );
    expect(await conflict.json()).toEqual({ code: "conflict", message: "name in use" });
  });

  it("lets unknown fields pass through", async () => {
    stub.handle((_, res) => sendJson(res, 200, vmFixture({ gpu_driver: "550.54" })));
    const vm = await client().vms.get(PROJECT_ID, VM_ID);
    expect((vm as Record<string, unknown>).gpu_driver).toBe("550.54");
  });

  it("unwraps rpc error messages and keeps the gRPC code", async () => {
    stub.handle((_, res) =>
      sendJson(res, 404, { code: "not_found", message: "rpc error: code = NotFound desc = vm abc not found" }),
    );
    const error = await failure(client().vms.get(PROJECT_ID, VM_ID));
    expect(error.message).toBe("vm abc not found");
    expect(error.rpcCode).toBe("NotFound");
    expect(isNotFound(error)).toBe(true);
    expect(error.retryable).toBe(false);
  });

  it("tolerates a numeric code (as string or number) and carries error_id", async () => {
    stub.handle((_, res) => sendJson(res, 409, { code: "409", message: "name in use" }));
    const conflict = await failure(client().vms.get(PROJECT_ID, VM_ID));
    expect(conflict.code).toBe("conflict");
    stub.handle((_, res) => sendJson(res, 500, { code: 500, message: "boom", error_id: "e-42" }));
    const internal = await failure(client({ retryLimit: 0 }).vms.get(PROJECT_ID, VM_ID));
    expect(internal.code).toBe("internal_error");
    expect(internal.errorId).toBe("e-42");
  });

  it("never quotes a body that is not JSON, in an error or in an answer", async () => {
    stub.handle((_, res) => {
      res.writeHead(502, { "content-type": "text/html" });
      res.end("<h1>INTERNAL-ONLY token=abc</h1>");
    });
    const error = await failure(client({ retryLimit: 0 }).vms.get(PROJECT_ID, VM_ID));
    expect(error.status).toBe(502);
    expect(error.message).toBe("GET /projects/:projectId/vms/:vmId answered HTTP 502 with a body that is not JSON");
    stub.handle((_, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("INTERNAL-ONLY token=abc");
    });
    const answer = await failure(client({ retryLimit: 0 }).vms.get(PROJECT_ID, VM_ID));
    expect(answer.kind).toBe("parse");
    expect(answer.message).not.toContain("INTERNAL");
    expect(answer.message).toContain("not JSON (23 bytes)");
  });

  it("keeps the message of an error body without a code", async () => {
    stub.handle((_, res) => sendJson(res, 400, { message: "rpc error: code = InvalidArgument desc = bad type" }));
    const error = await failure(client().vms.get(PROJECT_ID, VM_ID));
    expect(error.code).toBe("bad_request");
    expect(error.message).toContain("bad type");
    expect(error.retryable).toBe(false);
  });

  it("treats 403 for an operation id as gone", async () => {
    stub.handle((_, res) => sendJson(res, 403, { code: "forbidden", message: "operation expired" }));
    const error = await failure(client().operations.get(PROJECT_ID, "vm", "op-old"));
    expect(isOperationGone(error)).toBe(true);
  });

  it("reports 404/405 from endpoints beyond the spec as unsupported", async () => {
    stub.handle((_, res) =>
      sendJson(res, 404, { message: "Route GET:/x not found", error: "Not Found", statusCode: 404 }),
    );
    const missing = await failure(client().firewallRules.get(PROJECT_ID, "fw-1"));
    expect(missing.kind).toBe("unsupported");
    expect(missing.message).toContain("not supported by this server");
    expect(isUnsupported(missing)).toBe(true);

    stub.handle((_, res) => sendJson(res, 405, { code: "method_not_allowed", message: "no" }));
    const notAllowed = await failure(client().networks.delete(PROJECT_ID, "net-1"));
    expect(notAllowed.kind).toBe("unsupported");

    // A server that knows the route says not_found about the resource: a plain 404.
    stub.handle((_, res) => sendJson(res, 404, { code: "not_found", message: "firewall rule fw-1 not found" }));
    const gone = await failure(client().firewallRules.get(PROJECT_ID, "fw-1"));
    expect(isNotFound(gone)).toBe(true);
  });

  it("refuses bad input before sending", async () => {
    const error = await failure(client().disks.create(PROJECT_ID, { name: "d", size: "1.5TB", location: "l" }));
    expect(error.code).toBe("invalid_request");
    expect(error.fieldPath).toBe("size");
    await expect(client().vms.list(PROJECT_ID, { limit: 501 })).rejects.toThrow(/limit/);
    await expect(client().vms.get(PROJECT_ID, "")).rejects.toThrow(/vmId/);
    expect(stub.requests).toHaveLength(0);
    expect(() => createCloudClient({ baseUrl: "ftp://x", credentials: { apiKey: "k" } })).toThrow(/baseUrl/);
    expect(() => createCloudClient({ baseUrl: stub.url, credentials: { apiKey: "" } })).toThrow(/credentials/);
  });
});

describe("observer", () => {
  it("reports every attempt with the route template, status and duration", async () => {
    const events: RequestEvent[] = [];
    let calls = 0;
    stub.handle((_, res) =>
      ++calls === 1 ? sendJson(res, 503, { code: "unavailable" }) : sendJson(res, 200, vmFixture()),
    );
    await client({ observer: (e) => events.push(e) }).vms.get(PROJECT_ID, VM_ID);
    expect(events.map((e) => [e.method, e.route, e.status])).toEqual([
      ["GET", "/projects/:projectId/vms/:vmId", 503],
      ["GET", "/projects/:projectId/vms/:vmId", 200],
    ]);
    expect(events.every((e) => e.durationMs >= 0)).toBe(true);
  });

  it("reports a network failure as status error, and survives a throwing observer", async () => {
    const events: RequestEvent[] = [];
    stub.handle((_, res) => {
      res.socket?.destroy();
    });
    const c = client({
      retryLimit: 0,
      observer: (e) => {
        events.push(e);
        throw new Error("observer bug");
      },
    });
    const error = await failure(c.vms.get(PROJECT_ID, VM_ID));
    expect(error.kind).toBe("network");
    expect(events).toEqual([expect.objectContaining({ status: "error", route: "/projects/:projectId/vms/:vmId" })]);
  });
});

describe("redirects", () => {
  let other: StubServer;
  beforeEach(async () => {
    other = await startStub((_, res) => sendJson(res, 200, vmFixture()));
  });
  afterEach(async () => {
    await other.close();
  });

  it("are never followed, to another host or the same one, and the Location stays out of the message", async () => {
    for (const location of [`${other.url}/projects/${PROJECT_ID}/vms/${VM_ID}`, `${stub.url}/elsewhere`]) {
      stub.handle((_, res) => {
        res.writeHead(302, { location });
        res.end();
      });
      const error = await failure(client().vms.get(PROJECT_ID, VM_ID));
      expect(error.code).toBe("redirect_refused");
      expect(error.status).toBe(302);
      expect(error.message).not.toContain(location);
    }
    expect(other.requests).toHaveLength(0);
    expect(stub.requests.map((request) => request.path)).toEqual([
      `/projects/${PROJECT_ID}/vms/${VM_ID}`,
      `/projects/${PROJECT_ID}/vms/${VM_ID}`,
    ]);
  });
});

describe("answer size limit", () => {
  it("cuts an endless answer off while it streams in, without buffering it first", async () => {
    let sent = 0;
    stub.handle((_, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      const pump = (): void => {
        // An answer of 300 MB if the client kept reading; stops as soon as the socket is gone.
        while (sent < 300 * 1024 * 1024 && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) {
            res.once("drain", pump);
            return;
          }
        }
        res.end();
      };
      res.write('{"items": [');
      pump();
    });
    const error = await failure(client({ maxResponseBytes: 1024 * 1024 }).disks.list(PROJECT_ID));
    expect(error.code).toBe("response_too_large");
    expect(error.message).toContain("1048576 bytes");
    // The server could push what the socket buffers held, not the 300 MB.
    expect(sent).toBeLessThan(32 * 1024 * 1024);
  });

  it("refuses a declared Content-Length above the limit at once", async () => {
    stub.handle((_, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": String(50 * 1024 * 1024) });
      res.write("[");
    });
    const started = performance.now();
    const error = await failure(client({ maxResponseBytes: 1024 * 1024 }).disks.list(PROJECT_ID));
    expect(error.code).toBe("response_too_large");
    expect(performance.now() - started).toBeLessThan(1500);
  });

  it("applies to error answers too, which then carry no text", async () => {
    stub.handle((_, res) => {
      res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ code: "internal_error", message: "x".repeat(200_000) }));
    });
    const error = await failure(client({ maxResponseBytes: 64 * 1024, retryLimit: 0 }).vms.get(PROJECT_ID, VM_ID));
    expect(error.status).toBe(500);
    expect(error.message.length).toBeLessThan(200);
  });
});

describe("the request timeout is the deadline of the whole call", () => {
  it("a body that never finishes fails the call within the timeout, retries included", async () => {
    stub.handle((_, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"id": "');
    });
    const started = performance.now();
    const error = await failure(client({ timeoutMs: 600, retryLimit: 3 }).vms.get(PROJECT_ID, VM_ID));
    const elapsed = performance.now() - started;
    expect(error.kind).toBe("timeout");
    expect(elapsed).toBeLessThan(1500);
  });

  it("a server that never answers fails the call within the timeout, retries included", async () => {
    stub.handle(() => undefined);
    const started = performance.now();
    const error = await failure(client({ timeoutMs: 500, retryLimit: 3 }).vms.list(PROJECT_ID));
    expect(error.kind).toBe("timeout");
    expect(performance.now() - started).toBeLessThan(1300);
  });
});

describe("paths stay below the base URL", () => {
  it("refuses ids spelled . or .. without a request", async () => {
    for (const id of ["..", "."]) {
      const error = await failure(client().vms.get(id, VM_ID));
      expect(error.code).toBe("invalid_request");
    }
    expect(stub.requests).toHaveLength(0);
  });

  it("refuses a base URL with a query or user info", () => {
    expect(() => client({ baseUrl: `${stub.url}/latest/meta-data?x=` })).toThrow(/query/);
    expect(() => client({ baseUrl: stub.url.replace("http://", "http://user:pw@") })).toThrow(/user name/);
  });
});

describe("circuit breaker", () => {
  it("stops sending after a run of failures, sends one probe after the open period, closes on its success", async () => {
    let broken = true;
    stub.handle((_, res) => {
      if (broken) {
        res.writeHead(503, { "content-type": "application/json" });
        res.end(JSON.stringify({ code: "unavailable", message: "down" }));
      } else sendJson(res, 200, vmFixture());
    });
    const bulkhead = new AccountBulkhead({
      ...DEFAULT_BULKHEAD,
      failureThreshold: 3,
      openMs: 300,
      laneLimit: 2,
      rateLimit: undefined,
    });
    const cloud = client({ bulkhead, retryLimit: 0 });
    for (let i = 0; i < 3; i++) await failure(cloud.vms.get(PROJECT_ID, VM_ID));
    expect(stub.requests).toHaveLength(3);
    const refused = await failure(cloud.vms.get(PROJECT_ID, VM_ID));
    expect(refused.code).toBe("circuit_open");
    expect(refused.retryable).toBe(true);
    expect(stub.requests).toHaveLength(3);
    expect(bulkhead.health()).toBe("open");
    expect(bulkhead.admit("gpuvm").ok).toBe(false);

    await sleep(350);
    broken = false;
    await expect(cloud.vms.get(PROJECT_ID, VM_ID)).resolves.toMatchObject({ id: VM_ID });
    expect(stub.requests).toHaveLength(4);
    expect(bulkhead.health()).toBe("healthy");
  });
});

describe("fencing (util/fence.ts)", () => {
  it("a write the fence refuses is never sent (CloudError fenced, not retried); reads still go", async () => {
    stub.handle((request, res) => {
      if (request.method === "GET") sendJson(res, 200, vmFixture());
      else sendJson(res, 202, { operation: operationFixture() });
    });
    let allowed = false;
    const fenced = client({ fence: { writeGuard: () => () => (allowed ? undefined : "the Lease is not held") } });
    const error = await failure(fenced.vms.reset(PROJECT_ID, VM_ID));
    expect(error).toMatchObject({ kind: "network", code: "fenced", retryable: false });
    expect(error.message).toContain("the Lease is not held");
    expect(stub.requests.filter((request) => request.method !== "GET")).toEqual([]);
    expect((await fenced.vms.get(PROJECT_ID, VM_ID)).id).toBe(VM_ID);
    allowed = true;
    await fenced.vms.reset(PROJECT_ID, VM_ID);
    expect(stub.requests.filter((request) => request.method !== "GET")).toHaveLength(1);
  });

  it("sends the User-Agent it is given", async () => {
    stub.handle((_, res) => sendJson(res, 200, vmFixture()));
    await client({ userAgent: "gpuvm-operator (replica-a_1234)" }).vms.get(PROJECT_ID, VM_ID);
    expect(stub.requests[0]?.headers["user-agent"]).toBe("gpuvm-operator (replica-a_1234)");
  });
});
