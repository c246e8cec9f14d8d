// The double's HTTP front: one handler that logs writes, applies the injected faults and latency, answers the
// health probes, discovery (discovery.ts), the resource endpoints (rest.ts) and the `/_double/faults` admin
// endpoints, and turns every failure into a Kubernetes Status.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { BoundedLog } from "../util/bounded-log.ts";
import type { KubeApi } from "./api.ts";
import { discoveryDocument } from "./discovery.ts";
import type { FaultState } from "./faults.ts";
import { parseJson, readBody, sendJson } from "./http-io.ts";
import { ResourceEndpoints } from "./rest.ts";
import { ApiError, badRequest } from "./status.ts";
import { isRecord } from "./types.ts";
import type { WatchHub } from "./watch.ts";
import type { KubeWrite } from "./write-log.ts";

export interface ServerDeps {
  api: KubeApi;
  watches: WatchHub;
  faults: FaultState;
  adminActions: { dropWatches(): void; endWatches(): void; compact(): void };
  logger: Logger;
  /** Every write received (who, when, what, answered how). */
  writes: BoundedLog<KubeWrite>;
}

export function createRequestHandler(deps: ServerDeps): (request: IncomingMessage, response: ServerResponse) => void {
  const { api, logger } = deps;
  const resources = new ResourceEndpoints(api, deps.watches);

  const adminActions: Record<string, (input: Record<string, unknown>) => void> = {
    "drop-watches": () => deps.adminActions.dropWatches(),
    "end-watches": () => deps.adminActions.endWatches(),
    compact: () => deps.adminActions.compact(),
    "fail-next": (input) =>
      deps.faults.addFailure(
        Number(input.count ?? 1),
        Number(input.status ?? 500),
        typeof input.path === "string" ? { path: input.path } : undefined,
      ),
    latency: (input) => {
      const ms = Number(input.ms);
      if (!Number.isFinite(ms) || ms < 0) throw new RangeError("latency needs a non-negative number 'ms'");
      deps.faults.latencyMs = ms;
    },
  };

  const handleAdmin = async (request: IncomingMessage, response: ServerResponse, pathname: string): Promise<void> => {
    const name = pathname.slice("/_double/faults/".length);
    const action = adminActions[name];
    if (!action) throw new ApiError(404, "NotFound", `unknown fault action "${name}"`);
    const text = await readBody(request);
    const body = text.trim() === "" ? {} : parseJson(text, "the fault request");
    try {
      action(isRecord(body) ? body : {});
    } catch (error) {
      if (error instanceof RangeError) throw badRequest(error.message, undefined, { cause: error });
      throw error;
    }
    sendJson(response, 200, { ok: true, openWatches: deps.watches.openCount });
  };

  /** Answer with an injected failure if one is pending for this path. */
  const answeredWithFault = (response: ServerResponse, pathname: string): boolean => {
    const failure = deps.faults.take(pathname);
    if (failure === undefined) return false;
    const reason = failure === 429 ? "TooManyRequests" : failure >= 500 ? "InternalError" : "BadRequest";
    const details = failure === 429 ? { retryAfterSeconds: 1 } : undefined;
    const error = new ApiError(failure, reason, `injected failure (${failure})`, details);
    sendJson(response, failure, error.toStatus(), failure === 429 ? { "Retry-After": "1" } : {});
    return true;
  };

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const url = new URL(request.url ?? "/", "http://kube-double.invalid");
    const pathname = url.pathname.replace(/\/+$/, "") || "/";
    if (pathname.startsWith("/_double/faults/") && request.method === "POST") {
      await handleAdmin(request, response, pathname);
      return;
    }
    const method = request.method ?? "GET";
    if (method !== "GET") {
      const userAgent = String(request.headers["user-agent"] ?? "");
      const logged: KubeWrite = deps.writes.push({ at: Date.now(), method, path: pathname, userAgent });
      response.once("finish", () => {
        logged.status = response.statusCode;
      });
    }
    if (deps.faults.latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, deps.faults.latencyMs));
    if (answeredWithFault(response, pathname)) return;
    if (["/healthz", "/livez", "/readyz"].includes(pathname)) {
      response.writeHead(200, { "Content-Type": "text/plain" });
      response.end("ok");
      return;
    }
    const answer = discoveryDocument(api.registry, pathname);
    if (answer === undefined) await resources.serve(request, response, url, pathname);
    else sendJson(response, 200, answer);
  };

  return (request, response) => {
    handle(request, response).catch((error: unknown) => {
      const apiError =
        error instanceof ApiError
          ? error
          : new ApiError(
              500,
              "InternalError",
              `internal error: ${error instanceof Error ? error.message : String(error)}`,
              undefined,
              { cause: error },
            );
      if (apiError.code >= 500)
        logger.error({ err: error, method: request.method, url: request.url }, "request failed");
      else
        logger.debug(
          { method: request.method, url: request.url, code: apiError.code, reason: apiError.reason },
          "request refused",
        );
      if (response.headersSent) {
        response.destroy();
        return;
      }
      sendJson(response, apiError.code, apiError.toStatus());
    });
  };
}
