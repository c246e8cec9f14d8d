// StreamingWatch keeps client-node's Watch contract (ListWatch relies on it) while reading the stream itself.
import type { IncomingMessage, ServerResponse } from "node:http";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { StreamingWatch } from "../../src/runtime/watch-stream.ts";
import { kubeConfigFor, startHttpServer } from "./helpers.ts";

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

describe("StreamingWatch", () => {
  let server: Awaited<ReturnType<typeof startHttpServer>>;
  let handler: Handler = () => undefined;
  let url = "";

  beforeEach(async () => {
    server = await startHttpServer((request, response) => handler(request, response));
    url = server.url;
  });

  afterEach(() => server.close());

  /** Runs one watch; resolves with its events and what `done` got. */
  function watchOnce(
    watch = new StreamingWatch(kubeConfigFor(url)),
    query: Record<string, string> = {},
  ): Promise<{ events: [string, unknown][]; error: unknown; controller: Promise<AbortController> }> {
    return new Promise((resolve) => {
      const events: [string, unknown][] = [];
      const controller = watch.watch(
        "/api/v1/namespaces/default/configmaps",
        query,
        (type, object) => events.push([type, object]),
        (error) => resolve({ events, error, controller }),
      );
    });
  }

  it("delivers events split across chunks and several in one chunk, skipping lines that are not JSON", async () => {
    let seenUrl = "";
    handler = (request, response) => {
      seenUrl = request.url ?? "";
      response.writeHead(200, { "content-type": "application/json" });
      const one = JSON.stringify({ type: "ADDED", object: { metadata: { name: "a" } } });
      const two = JSON.stringify({ type: "MODIFIED", object: { metadata: { name: "é" } } });
      const three = JSON.stringify({ type: "BOOKMARK", object: { metadata: { resourceVersion: "9" } } });
      const rest = Buffer.from(`${one.slice(10)}\nnot json\n\n${two}\n${three.slice(0, 5)}`);
      const insideE = rest.indexOf(Buffer.from("é")) + 1; // a two-byte character cut between two chunks
      const chunks = [Buffer.from(one.slice(0, 10)), rest.subarray(0, insideE), rest.subarray(insideE)];
      const next = (): void => {
        const chunk = chunks.shift();
        if (chunk === undefined) {
          response.end(`${three.slice(5)}\n`);
          return;
        }
        response.write(chunk);
        setTimeout(next, 10);
      };
      next();
    };
    const { events, error } = await watchOnce(undefined, { resourceVersion: "5", allowWatchBookmarks: "true" });
    expect(error).toBeNull();
    expect(seenUrl).toBe("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=5&allowWatchBookmarks=true");
    expect(events).toEqual([
      ["ADDED", { metadata: { name: "a" } }],
      ["MODIFIED", { metadata: { name: "é" } }],
      ["BOOKMARK", { metadata: { resourceVersion: "9" } }],
    ]);
  });

  it("ends with the HTTP status as statusCode (410 makes ListWatch relist)", async () => {
    handler = (_, response) => {
      response.writeHead(410, { "content-type": "application/json" });
      response.end('{"kind":"Status","code":410}');
    };
    const { error } = await watchOnce();
    expect(error).toMatchObject({ statusCode: 410, message: "Gone" });
  });

  it("ends with a TimeoutError after the inactivity timeout, even while the server keeps the stream open", async () => {
    handler = (_, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      response.write(`${JSON.stringify({ type: "ADDED", object: { metadata: { name: "a" } } })}\n`);
    };
    const watch = new StreamingWatch(kubeConfigFor(url));
    watch.inactivityTimeoutMs = 150;
    const started = performance.now();
    const { events, error } = await watchOnce(watch);
    expect(events).toHaveLength(1);
    expect(error).toMatchObject({ name: "TimeoutError" });
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
  });

  it("data keeps it alive past the inactivity timeout", async () => {
    handler = (_, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      let sent = 0;
      const tick = setInterval(() => {
        response.write(
          `${JSON.stringify({ type: "BOOKMARK", object: { metadata: { resourceVersion: String(sent) } } })}\n`,
        );
        if (++sent === 6) {
          clearInterval(tick);
          response.end();
        }
      }, 50);
    };
    const watch = new StreamingWatch(kubeConfigFor(url));
    watch.inactivityTimeoutMs = 120;
    const { events, error } = await watchOnce(watch);
    expect(error).toBeNull();
    expect(events).toHaveLength(6);
  });

  it("the returned controller ends the watch, and done is called once", async () => {
    handler = (_, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      response.write("\n");
    };
    const watch = new StreamingWatch(kubeConfigFor(url));
    let calls = 0;
    const ended = new Promise<unknown>((resolve) => {
      void watch
        .watch(
          "/api/v1/configmaps",
          {},
          () => undefined,
          (error) => {
            calls++;
            resolve(error);
          },
        )
        .then((controller) => setTimeout(() => controller.abort(), 20));
    });
    const error = await ended;
    expect(error).toBeInstanceOf(Error);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(calls).toBe(1);
  });

  it("a refused connection ends it with the error", async () => {
    const watch = new StreamingWatch(kubeConfigFor("http://127.0.0.1:1"));
    const { error } = await watchOnce(watch);
    expect(error).toBeInstanceOf(Error);
  });
});
