// A tiny programmable HTTP server for the cloud client's tests: real sockets on port 0, every request
// recorded, the answer decided by a handler the test swaps at will.
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface RecordedRequest {
  method: string;
  /** Path below the stub's base (`/projects/p1/vms`), without the query. */
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: unknown;
}

export type StubHandler = (request: RecordedRequest, response: ServerResponse) => void | Promise<void>;

export interface StubServer {
  /** Base URL ending in /v0.1, like the real service. */
  url: string;
  port: number;
  requests: RecordedRequest[];
  handle(handler: StubHandler): void;
  close(): Promise<void>;
}

export function sendJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  response.writeHead(status, { "content-type": "application/json", ...headers });
  response.end(JSON.stringify(body));
}

export async function startStub(
  handler: StubHandler = (_, res) => sendJson(res, 404, { code: "not_found" }),
  port = 0,
) {
  let current = handler;
  const requests: RecordedRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://stub");
      const text = Buffer.concat(chunks).toString("utf8");
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = text;
      }
      const recorded: RecordedRequest = {
        method: req.method ?? "GET",
        path: url.pathname.replace(/^\/v0\.1/, ""),
        query: url.searchParams,
        headers: req.headers,
        body,
      };
      requests.push(recorded);
      Promise.resolve(current(recorded, res)).catch((error: unknown) => {
        if (!res.headersSent) sendJson(res, 500, { code: "internal_error", message: String(error) });
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const actualPort = (server.address() as AddressInfo).port;
  const stub: StubServer = {
    url: `http://127.0.0.1:${actualPort}/v0.1`,
    port: actualPort,
    requests,
    handle(next) {
      current = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return stub;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
