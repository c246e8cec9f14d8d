// The hostile tenants' endpoints, each a server on 127.0.0.1: one that accepts connections and never answers,
// one whose answers never end (the size limit must cut them off), and one that answers JSON that is malformed.
// They are legitimate tenants as far as the operator knows (their URLs are allowed); only their clouds are bad.
import { createServer as createHttpServer, type ServerResponse } from "node:http";
import { type AddressInfo, createServer as createTcpServer, type Socket } from "node:net";

export interface HostileEndpoint {
  kind: "dead" | "huge" | "malformed";
  /** Base URL ending in /v0.1. */
  url: string;
  /** Connections (dead) or requests (the others) received. */
  hits(): number;
  close(): Promise<void>;
}

export async function startHostileEndpoints(): Promise<HostileEndpoint[]> {
  return [
    await startDeadEndpoint(),
    await httpEndpoint("huge", endlessAnswer),
    await httpEndpoint("malformed", badJson),
  ];
}

/** A server that accepts every connection and never answers: a dead (or hanging) cloud. */
export async function startDeadEndpoint(): Promise<HostileEndpoint> {
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createTcpServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on("data", () => undefined);
    socket.on("error", () => undefined);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    kind: "dead",
    url: `http://127.0.0.1:${port}/v0.1`,
    hits: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** 200 and a JSON start, then spaces for as long as the client reads (no Content-Length). */
function endlessAnswer(response: ServerResponse): void {
  response.writeHead(200, { "content-type": "application/json" });
  response.write('{"items": [');
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  const pump = (): void => {
    while (!response.destroyed) {
      if (!response.write(chunk)) {
        response.once("drain", pump);
        return;
      }
    }
  };
  pump();
}

/** 200 with a body that is not JSON, or JSON of the wrong shape, alternately. */
let malformedCount = 0;
function badJson(response: ServerResponse): void {
  malformedCount++;
  response.writeHead(200, { "content-type": "application/json" });
  response.end(malformedCount % 2 === 0 ? '{"items": [{"id": 42, "name": ' : '{"items": "INTERNAL-ONLY"}');
}

async function httpEndpoint(
  kind: "huge" | "malformed",
  answer: (response: ServerResponse) => void,
): Promise<HostileEndpoint> {
  let requests = 0;
  const server = createHttpServer((request, response) => {
    requests++;
    request.resume();
    response.on("error", () => undefined);
    answer(response);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    kind,
    url: `http://127.0.0.1:${port}/v0.1`,
    hits: () => requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
