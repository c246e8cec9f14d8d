// One JSON request to the Kubernetes API with the KubeConfig's credentials and connection (its auth headers and
// its dispatcher, so rest_client_requests_total counts it and connections stay alive), without client-node's
// generated client, whose model serializer, middleware chain and WHATWG fetch cost several times the CPU of one
// undici request, while the operator writes four to six times per object (docs/scaling.md). The KubeConfig's
// authentication (headers, dispatcher) is reused for AUTHENTICATION_TTL_MS rather than rebuilt for each request.
// Failures are client-node's ApiException (code, body), which statusOf and toKubeApiError read.
import type { KubeConfig } from "@kubernetes/client-node";
import { ApiException } from "@kubernetes/client-node/dist/gen/apis/exception.js";
import { HttpMethod, RequestContext } from "@kubernetes/client-node/dist/gen/http/http.js";
import { type Dispatcher, getGlobalDispatcher, request } from "undici";

export type KubeMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

export interface KubeRequestOptions {
  body?: unknown;
  /** Default application/json; merge patches say application/merge-patch+json. */
  contentType?: string;
  signal?: AbortSignal;
}

/** What a KubeConfig's authentication gives every request: the server, headers and the dispatcher. */
interface Authenticated {
  server: string;
  headers: Record<string, string>;
  dispatcher: Dispatcher;
  expiresAt: number;
}

/**
 * How long one authentication is used. client-node reads a token file, runs an exec plugin's cache and reads
 * certificate files on every call; client-go re-reads a token file once a minute. Ten seconds picks up a rotated
 * token as quickly and spares each request that work (about a tenth of the operator's CPU per request).
 */
export const AUTHENTICATION_TTL_MS = 10_000;

const authenticated = new WeakMap<KubeConfig, Promise<Authenticated>>();

async function authenticate(kubeConfig: KubeConfig): Promise<Authenticated> {
  const server = kubeConfig.getCurrentCluster()?.server;
  if (server === undefined) throw new Error("the kubeconfig has no current cluster");
  const base = server.replace(/\/+$/, "");
  const context = new RequestContext(base, HttpMethod.GET);
  await kubeConfig.applySecurityAuthentication(context);
  return {
    server: base,
    headers: { ...context.getHeaders(), accept: "application/json" },
    dispatcher: (context.getDispatcher() as Dispatcher | undefined) ?? getGlobalDispatcher(),
    expiresAt: performance.now() + AUTHENTICATION_TTL_MS,
  };
}

/** The KubeConfig's authentication, reused for AUTHENTICATION_TTL_MS (concurrent callers share one). */
async function authenticationOf(kubeConfig: KubeConfig): Promise<Authenticated> {
  const cached = authenticated.get(kubeConfig);
  if (cached !== undefined) {
    const current = await cached.catch(() => undefined);
    if (current !== undefined && current.expiresAt > performance.now()) return current;
    if (authenticated.get(kubeConfig) !== cached) return authenticationOf(kubeConfig);
  }
  const fresh = authenticate(kubeConfig);
  authenticated.set(kubeConfig, fresh);
  return fresh;
}

/** Forgets a KubeConfig's authentication: the next request authenticates anew (after a 401). */
function forgetAuthentication(kubeConfig: KubeConfig): void {
  authenticated.delete(kubeConfig);
}

/** Sends one request and answers the parsed JSON body; throws ApiException for an HTTP error status. */
export async function kubeRequest(
  kubeConfig: KubeConfig,
  method: KubeMethod,
  path: string,
  options: KubeRequestOptions = {},
): Promise<unknown> {
  const auth = await authenticationOf(kubeConfig);
  const url = `${auth.server}${path}`;
  const headers: Record<string, string> =
    options.body === undefined
      ? auth.headers
      : { ...auth.headers, "content-type": options.contentType ?? "application/json" };
  const dispatcher = auth.dispatcher;
  const answer = await request(url, {
    method,
    headers,
    dispatcher,
    ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const text = await answer.body.text();
  // A refused credential (a token rotated since) is read afresh by the next request, not ten seconds later.
  if (answer.statusCode === 401) forgetAuthentication(kubeConfig);
  if (answer.statusCode >= 400) {
    const responseHeaders: Record<string, string> = {};
    for (const [name, value] of Object.entries(answer.headers)) {
      if (typeof value === "string") responseHeaders[name] = value;
    }
    throw new ApiException<string>(
      answer.statusCode,
      `HTTP-Code: ${answer.statusCode}\nMessage: ${method} ${path} failed\nBody: ${text}`,
      text,
      responseHeaders,
    );
  }
  return text === "" ? undefined : (JSON.parse(text) as unknown);
}
