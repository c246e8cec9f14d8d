// The path every request of the cloud API takes before and after its handler (api-routes.ts): counted under its
// route, logged when it writes, delayed or failed by the injected faults, rate limited, authenticated, checked
// against the project it names; then answered, or (a "lost response" fault) carried out and never answered.
// A route the profile does not serve answers exactly as an unknown route.
import { setTimeout as sleep } from "node:timers/promises";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Principal } from "./auth.ts";
import { forbidden, SimError } from "./errors.ts";
import { servesRoute } from "./profiles.ts";
import type { WriteLogEntry } from "./request-log.ts";
import {
  API_PREFIX,
  answerUnknownRoute,
  countRequest,
  type Method,
  noteMethod,
  type Params,
  type Query,
  type RouteTable,
  type ServerDeps,
} from "./routing.ts";

/** What a handler is given: the caller, the path's parameters, the query, the parsed body. */
export interface HandlerInput {
  principal: Principal;
  params: Params;
  query: Query;
  body: unknown;
  projectId: string;
}

/** What a handler answers: the body, and the status when not 200. */
export interface Reply {
  status?: number;
  body: unknown;
}

export interface RouteOptions {
  /** Whether the route needs credentials (default true; the token endpoint does not). */
  auth?: boolean;
  /** Whether the caller must have access to the path's `:projectId` (default true). */
  project?: boolean;
}

/** Declares one route of the cloud API (`url` below `/v0.1`). */
export type ApiRoute = (
  method: Method,
  url: string,
  handler: (input: HandlerInput) => Reply | Promise<Reply>,
  options?: RouteOptions,
) => void;

/** The operation an answer starts (`{ operation: { operation_id } }`), if any. */
function operationIdOf(body: unknown): string | undefined {
  const operation = typeof body === "object" && body !== null && "operation" in body ? body.operation : undefined;
  const id =
    typeof operation === "object" && operation !== null && "operation_id" in operation
      ? operation.operation_id
      : undefined;
  return typeof id === "string" ? id : undefined;
}

/** A write (any method but GET) goes into the write log as it arrives; its status once answered. */
function logWrite(
  deps: ServerDeps,
  method: string,
  route: string,
  request: FastifyRequest,
  reply: FastifyReply,
): WriteLogEntry | undefined {
  if (method === "GET") return undefined;
  const body: unknown = request.body;
  const action =
    typeof body === "object" && body !== null && "action" in body && typeof body.action === "string"
      ? body.action
      : undefined;
  const logged = deps.writeLog.push({
    at: Date.now(),
    method,
    route,
    path: request.url.split("?")[0]?.slice(API_PREFIX.length) ?? "",
    userAgent: String(request.headers["user-agent"] ?? ""),
    ...(action !== undefined ? { action } : {}),
  });
  reply.raw.once("finish", () => {
    logged.status ??= reply.statusCode;
  });
  return logged;
}

/** The operation a logged write started (known even when its answer is then lost). */
function noteOperation(logged: WriteLogEntry | undefined, answer: unknown): void {
  const started = operationIdOf(answer);
  if (logged !== undefined && started !== undefined) logged.operationId = started;
}

async function injectFaults(deps: ServerDeps, method: string, url: string): Promise<void> {
  const latency = deps.faults.latencyFor(method, url);
  if (latency > 0) await sleep(latency);
  const injected = deps.faults.errorFor(method, url);
  if (injected === undefined) return;
  throw new SimError(injected.status, injected.message ?? `injected ${injected.status}`, {
    code: injected.code,
    ...(injected.status === 429 ? { retryAfterSeconds: injected.retry_after_seconds ?? 1 } : {}),
  });
}

/** Authenticate (when the route needs it) and take a rate-limit token for the credential. */
function authorize(deps: ServerDeps, request: FastifyRequest, needsAuth: boolean): Principal {
  const principal: Principal = needsAuth
    ? deps.auth.authenticate(request.headers.authorization)
    : { id: `ip:${request.ip}`, kind: "user", email: "", projectIds: [] };
  const wait = deps.rateLimiter.take(principal.id);
  if (wait > 0) throw new SimError(429, "rate limit exceeded", { retryAfterSeconds: wait });
  return principal;
}

function checkProjectAccess(deps: ServerDeps, principal: Principal, projectId: string): void {
  deps.store.records.project(projectId);
  if (!principal.projectIds.includes(projectId)) {
    throw forbidden(`this credential has no access to project ${projectId}`);
  }
}

/** The `ApiRoute` of this server: each route it declares is noted in `routes` and wrapped in the pipeline. */
export function apiRouter(app: FastifyInstance, deps: ServerDeps, routes: RouteTable): ApiRoute {
  return (method, url, handler, options = {}) => {
    const needsAuth = options.auth ?? true;
    const fullUrl = `${API_PREFIX}${url}`;
    if (!servesRoute(deps.profile, method, url)) {
      noteMethod(routes.unserved, fullUrl, method);
      app.route({
        method,
        url: fullUrl,
        // Counted under its template (the admin counts show who asked), answered exactly as an unknown route.
        handler: async (request, reply) => {
          countRequest(deps.requestCounts, method, fullUrl);
          answerUnknownRoute(request, reply);
        },
      });
      return;
    }
    noteMethod(routes.served, fullUrl, method);
    app.route({
      method,
      url: fullUrl,
      handler: async (request: FastifyRequest, reply: FastifyReply) => {
        countRequest(deps.requestCounts, method, fullUrl);
        const logged = logWrite(deps, method, url, request, reply);
        await injectFaults(deps, method, url);
        const principal = authorize(deps, request, needsAuth);
        const params = (request.params ?? {}) as Params;
        const projectId = params.projectId ?? "";
        if (options.project !== false && projectId !== "") checkProjectAccess(deps, principal, projectId);
        const result = await handler({
          principal,
          params,
          query: (request.query ?? {}) as Query,
          body: request.body,
          projectId,
        });
        noteOperation(logged, result.body);
        if (deps.faults.loseResponse(method, url)) {
          if (logged !== undefined) logged.status = "lost";
          // The change is made; the client never hears about it.
          reply.hijack();
          request.raw.socket.destroy();
          return;
        }
        return reply.code(result.status ?? 200).send(result.body);
      },
    });
  };
}
