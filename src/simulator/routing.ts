// What the cloud API's routes (api-routes.ts, through api-pipeline.ts) and the admin API's (admin.ts) share: the
// server's dependencies, the table of methods each path serves (for the 405 answers), the request counts, body
// validation, query parameters and the contract's error answers.
import { randomUUID } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import type { BoundedLog } from "../util/bounded-log.ts";
import type { Auth, RateLimiter } from "./auth.ts";
import { badRequest, SimError } from "./errors.ts";
import type { FaultInjector } from "./faults.ts";
import type { NodeJoins } from "./node-join.ts";
import type { SimulatorProfile } from "./profiles.ts";
import type { WriteLogEntry } from "./request-log.ts";
import type { Store } from "./store.ts";
import type { UsagePublication } from "./usage-publication.ts";

export const API_PREFIX = "/v0.1";

export interface ServerDeps {
  store: Store;
  auth: Auth;
  faults: FaultInjector;
  rateLimiter: RateLimiter;
  requestCounts: Map<string, number>;
  /** Every write received, with who sent it and how it was answered. */
  writeLog: BoundedLog<WriteLogEntry>;
  /** The node-join emulation (its workload clusters and the joins' outcomes). */
  nodeJoins: NodeJoins;
  /** Which API is served: the spec plus contract-decisions.md, or the spec's endpoints only. */
  profile: SimulatorProfile;
  /** Re-seed everything (admin reset). */
  reset: () => void;
  /** How long after midnight UTC the daily usage refresh runs. */
  usageRefreshDelayMs: number;
  /** `live`: the usage accrued so far, the running day included, instead of the daily publication. */
  usagePublication: UsagePublication;
  logger: boolean;
  /** Request bodies above this are refused with 413 before they are read in full. */
  maxRequestBytes: number;
}

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
export const ALL_METHODS: Method[] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/** Which methods each path serves: `served` answer, `unserved` (not in the profile) answer as unknown routes. */
export interface RouteTable {
  served: Map<string, Set<Method>>;
  unserved: Map<string, Set<Method>>;
}

/** Note that `method` is served at `url` (the other methods there answer 405 with `Allow`). */
export function noteMethod(registered: Map<string, Set<Method>>, url: string, method: Method): void {
  const methods = registered.get(url) ?? new Set<Method>();
  methods.add(method);
  registered.set(url, methods);
}

/** One more request for `method route` in the admin API's counts. */
export function countRequest(requestCounts: Map<string, number>, method: string, route: string): void {
  const key = `${method} ${route}`;
  requestCounts.set(key, (requestCounts.get(key) ?? 0) + 1);
}

/** Parse a body with a wire schema; 400 names the first offending field. */
export function validate<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const parsed = schema.safeParse(body ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = issue === undefined || issue.path.length === 0 ? "body" : issue.path.map(String).join(".");
  throw badRequest(`${field}: ${issue?.message ?? "invalid"}`);
}

export type Query = Record<string, string | string[] | undefined>;
export type Params = Record<string, string>;

/** Array query parameter: repeated keys and comma-separated values alike. */
export function listParam(query: Query, name: string): string[] | undefined {
  const raw = query[name];
  if (raw === undefined) return undefined;
  const values = (Array.isArray(raw) ? raw : [raw]).flatMap((v) => v.split(",")).map((v) => v.trim());
  const nonEmpty = values.filter((v) => v !== "");
  return nonEmpty.length === 0 ? undefined : nonEmpty;
}

/** A single query parameter (the last one when repeated); undefined when absent or empty. */
export function stringParam(query: Query, name: string): string | undefined {
  const raw = query[name];
  const value = Array.isArray(raw) ? raw[raw.length - 1] : raw;
  return value === undefined || value === "" ? undefined : value;
}

/** The contract's error body (`code`, `message`, `error_id` for 5xx, `reason`), with Retry-After when given. */
export function sendError(reply: FastifyReply, error: SimError): void {
  if (error.retryAfterSeconds !== undefined) reply.header("retry-after", String(error.retryAfterSeconds));
  const body: Record<string, string> = { code: error.code, message: error.message };
  if (error.status >= 500) body.error_id = randomUUID();
  if (error.reason !== undefined) body.reason = error.reason;
  void reply.code(error.status).send(body);
}

/** The answer to a route this server does not have. */
export function answerUnknownRoute(request: FastifyRequest, reply: FastifyReply): void {
  sendError(reply, new SimError(404, `no route ${request.method} ${request.url.split("?")[0]}`));
}
