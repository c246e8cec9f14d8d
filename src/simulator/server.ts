// The HTTP face of the simulator: one Fastify app serving `/v0.1` (the cloud API: api-routes.ts, each route
// through api-pipeline.ts) and `/_sim` (the admin API: admin.ts), with the contract's error body for every failure,
// 405 with `Allow` for a known path asked with another method, and 404 for the rest.
import type { FastifyInstance } from "fastify";
import Fastify from "fastify";
import { registerAdminRoutes } from "./admin.ts";
import { apiRouter } from "./api-pipeline.ts";
import { registerApiRoutes } from "./api-routes.ts";
import { badRequest, SimError } from "./errors.ts";
import {
  ALL_METHODS,
  answerUnknownRoute,
  countRequest,
  type RouteTable,
  type ServerDeps,
  sendError,
} from "./routing.ts";

export function buildServer(deps: ServerDeps): FastifyInstance {
  const app = Fastify({ logger: deps.logger, bodyLimit: deps.maxRequestBytes });

  // JSON bodies, tolerating an empty body (DELETE and PATCH clients sometimes send the header without one).
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_request, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    if (text.trim() === "") return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(badRequest("body: not valid JSON"), undefined);
    }
  });

  const count = (method: string, route: string) => countRequest(deps.requestCounts, method, route);

  app.setErrorHandler((error, request, reply) => {
    if (error instanceof SimError) return sendError(reply, error);
    const status =
      typeof (error as { statusCode?: unknown }).statusCode === "number"
        ? (error as { statusCode: number }).statusCode
        : 500;
    if (status === 415) return sendError(reply, badRequest("Content-Type must be application/json"));
    if (status === 413) {
      const limit = `request body is too large: at most ${deps.maxRequestBytes} bytes`;
      return sendError(reply, new SimError(413, limit, { code: "payload_too_large" }));
    }
    if (status >= 400 && status < 500)
      return sendError(reply, new SimError(status, error instanceof Error ? error.message : "bad request"));
    request.log.error({ err: error }, "unexpected simulator error");
    return sendError(reply, new SimError(500, "internal error"));
  });

  // Routes the profile does not serve answer as unknown routes do (never 405).
  const routes: RouteTable = { served: new Map(), unserved: new Map() };
  registerApiRoutes(apiRouter(app, deps, routes), deps);
  registerAdminRoutes(app, deps, routes.served);

  // 405 for a known path with another method; 404 for everything else.
  for (const [url, methods] of routes.served) {
    const others = ALL_METHODS.filter((m) => !methods.has(m) && !routes.unserved.get(url)?.has(m));
    if (others.length === 0) continue;
    app.route({
      method: others,
      url,
      handler: async (request, reply) => {
        count(request.method, url);
        reply.header("allow", [...methods].join(", "));
        return sendError(reply, new SimError(405, `${request.method} is not allowed on ${url}`));
      },
    });
  }
  app.setNotFoundHandler((request, reply) => {
    count(request.method, "(unmatched)");
    answerUnknownRoute(request, reply);
  });
  return app;
}
