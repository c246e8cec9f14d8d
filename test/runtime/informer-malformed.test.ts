import { createServer, type Server } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { ResilientInformer } from "../../src/runtime/informer.ts";
import { eventually, kubeConfigFor, silentLogger, WIDGETS } from "./helpers.ts";

// A server that answers the list correctly but streams garbage among valid watch events: the informer must
// skip the garbage without an unhandled rejection (vitest fails the run on one) and keep following.
function startGarbageServer(): Promise<{ server: Server; url: string }> {
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://localhost");
    response.writeHead(200, { "content-type": "application/json" });
    if (url.searchParams.get("watch") !== "true") {
      response.end(JSON.stringify({ apiVersion: "v1", kind: "List", metadata: { resourceVersion: "1" }, items: [] }));
      return;
    }
    response.flushHeaders();
    response.write("not json at all\n");
    response.write(`${JSON.stringify({ type: "ADDED", object: null })}\n`);
    response.write(`${JSON.stringify({ type: "MODIFIED", object: { spec: {} } })}\n`);
    response.write(`${JSON.stringify({ type: "SURPRISE", object: { metadata: { name: "odd" } } })}\n`);
    const valid = { metadata: { name: "good", namespace: "default", resourceVersion: "2" } };
    response.write(`${JSON.stringify({ type: "ADDED", object: valid })}\n`);
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      resolve({ server, url: `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}` });
    }),
  );
}

describe("ResilientInformer and malformed watch events", () => {
  let server: Server | undefined;
  let informer: ResilientInformer | undefined;

  afterEach(async () => {
    await informer?.stop();
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  });

  it("skips garbage and keeps the valid events", async () => {
    const garbage = await startGarbageServer();
    server = garbage.server;
    informer = new ResilientInformer({
      kubeConfig: kubeConfigFor(garbage.url),
      resource: WIDGETS,
      logger: silentLogger,
    });
    informer.start();
    await informer.waitForSync();
    const cache = informer;
    await eventually(() => expect(cache.get("default", "good")).toBeDefined());
    expect(cache.list()).toHaveLength(1);
  });
});
