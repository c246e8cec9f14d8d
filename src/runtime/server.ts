// The operator's own HTTP endpoints: /metrics on the metrics address, /healthz and /readyz on the probe address
// (both on one server when the addresses are equal). Plain node:http: three GET routes need no framework.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import type { BindAddress } from "./config-values.ts";
import type { Metrics } from "./metrics.ts";

/** A named readiness or liveness check; returns an error message when failing, undefined when fine. */
export type HealthCheck = () => string | undefined;

export interface RunningServer {
  /** http://host:port (the real port when 0 was asked). */
  url: string;
  port: number;
  close(): Promise<void>;
}

type Route = (request: IncomingMessage, response: ServerResponse) => Promise<void> | void;

/** `/metrics`, or with `?name=<family>` (repeatable; `name[]` too) only the families named. */
export function metricsRoute(metrics: Metrics): Route {
  return async (request, response) => {
    const query = new URL(request.url ?? "/", "http://localhost").searchParams;
    const names = [...query.getAll("name"), ...query.getAll("name[]")];
    const text = await metrics.text(names.length > 0 ? names : undefined);
    response.writeHead(200, { "content-type": metrics.contentType });
    response.end(text);
  };
}

function runCheck(check: HealthCheck): string | undefined {
  try {
    return check();
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/** controller-runtime's probe format: 200 "ok", or 500 listing the failing checks. `?verbose` lists all. */
export function healthRoute(checks: Record<string, HealthCheck>): Route {
  return (request, response) => {
    const verbose = new URL(request.url ?? "/", "http://localhost").searchParams.has("verbose");
    const results = Object.entries(checks).map(([name, check]) => ({ name, failure: runCheck(check) }));
    const healthy = results.every((result) => result.failure === undefined);
    const lines = results
      .filter((result) => verbose || result.failure !== undefined)
      .map(({ name, failure }) => (failure === undefined ? `[+]${name} ok` : `[-]${name} failed: ${failure}`));
    response.writeHead(healthy ? 200 : 500, { "content-type": "text/plain; charset=utf-8" });
    if (healthy && !verbose) response.end("ok\n");
    else response.end(`${lines.join("\n")}\n${healthy ? "check passed" : "check failed"}\n`);
  };
}

/** The server could not listen; the message names the address and the flag that sets it. */
export class BindError extends Error {
  override name = "BindError";
}

function bindFailure(bind: BindAddress, flag: string, error: unknown): BindError {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const address = `${bind.host.includes(":") ? `[${bind.host}]` : bind.host}:${bind.port}`;
  const why =
    code === "EADDRINUSE"
      ? "the address is already in use (another operator, or a simulator, on the same port?)"
      : code === "EACCES"
        ? "permission denied (ports below 1024 need privileges)"
        : code === "EADDRNOTAVAIL"
          ? "no network interface has this address"
          : error instanceof Error
            ? error.message
            : String(error);
  return new BindError(`cannot listen on ${address}: ${why}; choose another address with ${flag} (0 disables it)`, {
    cause: error,
  });
}

/** Starts the server; `flag` names the setting of `bind` in errors ("--metrics-bind-address"). */
export async function startHttpServer(
  bind: BindAddress,
  routes: Record<string, Route>,
  logger: Logger,
  flag = "the bind address",
): Promise<RunningServer> {
  const server: Server = createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://localhost").pathname;
    const route = routes[path];
    if (route === undefined || (request.method !== "GET" && request.method !== "HEAD")) {
      response.writeHead(404, { "content-type": "text/plain; charset=utf-8" });
      response.end("not found\n");
      return;
    }
    Promise.resolve(route(request, response)).catch((error: unknown) => {
      logger.error({ err: error, path }, "endpoint failed");
      if (!response.headersSent) response.writeHead(500);
      response.end();
    });
  });
  // Probes and scrapes are short; keep-alive sockets must not hold shutdown open.
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve, reject) => {
    const fail = (error: unknown): void => reject(bindFailure(bind, flag, error));
    server.once("error", fail);
    server.listen(bind.port, bind.host, () => {
      server.off("error", fail);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  const url = `http://${host === "0.0.0.0" ? "127.0.0.1" : host}:${address.port}`;
  logger.info({ url, paths: Object.keys(routes) }, "serving");
  return {
    url,
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export interface OperatorServers {
  servers: RunningServer[];
  /** The addresses they listen on, e.g. to find port 0's real port in tests. */
  urls: { metrics?: string; probes?: string };
}

/**
 * /metrics on the metrics address and /healthz and /readyz on the probe address (undefined: not served), on one
 * server when both addresses are the same (port 0 excepted). A server that cannot listen closes the one started
 * before it and throws its BindError.
 */
export async function startOperatorServers(options: {
  metrics: BindAddress | undefined;
  probes: BindAddress | undefined;
  registry: Metrics;
  /** The readiness check (/readyz): the informers' sync. */
  ready: HealthCheck;
  logger: Logger;
}): Promise<OperatorServers> {
  const { metrics, probes, registry, logger } = options;
  const probeRoutes = {
    "/healthz": healthRoute({ ping: () => undefined }),
    "/readyz": healthRoute({ informers: options.ready }),
  };
  const same = metrics && probes && metrics.host === probes.host && metrics.port === probes.port && metrics.port !== 0;
  const started: OperatorServers = { servers: [], urls: {} };
  try {
    if (metrics) {
      const routes = same
        ? { "/metrics": metricsRoute(registry), ...probeRoutes }
        : { "/metrics": metricsRoute(registry) };
      const server = await startHttpServer(metrics, routes, logger, "--metrics-bind-address");
      started.servers.push(server);
      started.urls.metrics = server.url;
      if (same) started.urls.probes = server.url;
    }
    if (probes && !same) {
      const server = await startHttpServer(probes, probeRoutes, logger, "--health-probe-bind-address");
      started.servers.push(server);
      started.urls.probes = server.url;
    }
  } catch (error) {
    await Promise.all(started.servers.map((server) => server.close()));
    throw error;
  }
  return started;
}
