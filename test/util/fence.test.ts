// The fence's undici interceptor: a write is checked as its bytes are about to leave (onRequestStart), not when
// it was handed to the client; reads pass; a refusal sends nothing and names why.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Agent, request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { FencedError, fencingInterceptor, isFenced } from "../../src/util/fence.ts";

let server: Server | undefined;
const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((agent) => agent.close()));
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  server = undefined;
});

async function counting(): Promise<{ url: string; received: string[] }> {
  const received: string[] = [];
  server = createServer((req, res) => {
    received.push(req.method ?? "?");
    res.end("{}");
  });
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, received };
}

describe("fencingInterceptor", () => {
  it("decides at the last moment: a write dispatched while allowed and refused before it left is not sent", async () => {
    const { url, received } = await counting();
    let allowed = true;
    const agent = new Agent();
    agents.push(agent);
    const dispatcher = agent.compose(fencingInterceptor({ writeGuard: () => () => (allowed ? undefined : "lost") }));
    // Dispatched now (a new connection: the bytes leave once it is up), refused before that.
    const sent = request(url, { method: "POST", body: "{}", dispatcher });
    allowed = false;
    const error = await sent.then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(error).toBeInstanceOf(FencedError);
    expect((error as Error).message).toBe("POST not sent: lost");
    expect(received).toEqual([]);
    // Reads are never fenced.
    const read = await request(url, { method: "GET", dispatcher });
    await read.body.text();
    expect(received).toEqual(["GET"]);
    allowed = true;
    const write = await request(url, { method: "PATCH", body: "{}", dispatcher });
    await write.body.text();
    expect(received).toEqual(["GET", "PATCH"]);
  });

  it("isFenced finds a refusal wrapped as a cause", () => {
    const wrapped = new Error("patch status: error", { cause: new TypeError("x", { cause: new FencedError("no") }) });
    expect(isFenced(wrapped)).toBe(true);
    expect(isFenced(new Error("other"))).toBe(false);
  });
});
