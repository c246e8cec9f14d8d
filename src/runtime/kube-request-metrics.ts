// Counts every request to the Kubernetes API as client-go's rest_client_requests_total{code,method,host}.
// All of @kubernetes/client-node's requests (API clients and Watch) ask their KubeConfig to
// applySecurityAuthentication() and then send through the undici dispatcher it sets, so the one place to
// observe them is there: a KubeConfig that hands out its dispatcher composed with a counting interceptor.
import type { KubeConfig, RequestContext } from "@kubernetes/client-node";
import type { Counter } from "prom-client";
import { type Dispatcher, getGlobalDispatcher } from "undici";

export type RestClientLabels = "code" | "method" | "host";

/** client-go's label for a request that got no HTTP answer (connection refused, reset, aborted, timeout). */
export const NO_RESPONSE_CODE = "<error>";

const hosts = new Map<string, string>();

function hostOf(origin: Dispatcher.DispatchOptions["origin"]): string {
  if (origin === undefined) return "";
  const text = String(origin);
  let host = hosts.get(text);
  if (host === undefined) {
    try {
      host = new URL(text).host;
    } catch {
      host = text;
    }
    // The API servers of one process: a handful; bounded all the same.
    if (hosts.size > 64) hosts.clear();
    hosts.set(text, host);
  }
  return host;
}

/** An interceptor that counts each request once: at its final response status, or as "<error>". */
export function countingInterceptor(counter: Counter<RestClientLabels>): Dispatcher.DispatcherComposeInterceptor {
  return (dispatch) => (options, handler) => {
    const method = options.method;
    const host = hostOf(options.origin);
    let counted = false;
    const count = (code: string): void => {
      if (counted) return;
      counted = true;
      counter.inc({ code, method, host });
    };
    const counting: Dispatcher.DispatchHandler = {
      onRequestStart: (controller, context) => handler.onRequestStart?.(controller, context),
      onRequestUpgrade: (controller, statusCode, headers, socket) => {
        count(String(statusCode));
        handler.onRequestUpgrade?.(controller, statusCode, headers, socket);
      },
      onResponseStart: (controller, statusCode, headers, statusMessage) => {
        // 1xx interim answers precede the final one.
        if (statusCode >= 200) count(String(statusCode));
        handler.onResponseStart?.(controller, statusCode, headers, statusMessage);
      },
      onResponseData: (controller, chunk) => handler.onResponseData?.(controller, chunk),
      onResponseEnd: (controller, trailers) => handler.onResponseEnd?.(controller, trailers),
      onResponseError: (controller, error) => {
        count(NO_RESPONSE_CODE);
        handler.onResponseError?.(controller, error);
      },
      onResponseStarted: () => handler.onResponseStarted?.(),
      onBodySent: (chunk) => handler.onBodySent?.(chunk),
      onRequestSent: () => handler.onRequestSent?.(),
    };
    return dispatch(options, counting);
  };
}

/** The part of client-node's KubeConfig that builds dispatchers (private in its typings). */
interface DispatcherFactory {
  createDispatcher(cluster: unknown, agentOptions: unknown): Dispatcher | undefined;
}

/**
 * A KubeConfig that behaves like `source` (it inherits from it, so later changes to `source` show through) whose
 * requests go through `source`'s dispatcher composed with `interceptor` (one composition per dispatcher);
 * `configure` may add to each request's context (a header). `source` itself is left as it was.
 */
export function withInterceptor(
  source: KubeConfig,
  interceptor: Dispatcher.DispatcherComposeInterceptor,
  configure?: (context: RequestContext) => void,
): KubeConfig {
  const composed = new WeakMap<Dispatcher, Dispatcher>();
  const derived = Object.create(source) as KubeConfig;
  derived.applySecurityAuthentication = async (context: RequestContext): Promise<void> => {
    await source.applySecurityAuthentication.call(derived, context);
    configure?.(context);
    const base = context.getDispatcher() ?? getGlobalDispatcher();
    let dispatcher = composed.get(base);
    if (dispatcher === undefined) {
      dispatcher = base.compose(interceptor);
      composed.set(base, dispatcher);
    }
    context.setDispatcher(dispatcher);
  };
  return derived;
}

/**
 * A KubeConfig that behaves like `source` and counts every request made with it, sent with `userAgent` when given
 * (the API server's audit log then names the replica).
 */
export function instrumentKubeConfig(
  source: KubeConfig,
  counter: Counter<RestClientLabels>,
  userAgent?: string,
): KubeConfig {
  const instrumented = withInterceptor(
    source,
    countingInterceptor(counter),
    userAgent === undefined ? undefined : (context) => context.setHeaderParam("User-Agent", userAgent),
  );
  // client-node 2.0.1 builds a new undici Agent for every request whenever TLS options apply (a CA, a client
  // certificate, or insecure-skip-tls-verify: every real cluster): no connection is ever reused, each request
  // pays a connect and a TLS handshake, and the old sockets linger. One dispatcher per distinct TLS/proxy
  // configuration is built once and kept, so connections stay alive as client-go's do.
  const dispatchers = new Map<string, Dispatcher | undefined>();
  // `createDispatcher` is private in client-node's typings; it is what applySecurityAuthentication calls.
  const factory = instrumented as unknown as DispatcherFactory;
  const createDispatcher = factory.createDispatcher.bind(instrumented);
  factory.createDispatcher = (cluster, agentOptions) => {
    const options = instrumented.createDispatcherOptions(
      cluster as Parameters<KubeConfig["createDispatcherOptions"]>[0],
      agentOptions as Parameters<KubeConfig["createDispatcherOptions"]>[1],
    );
    const key = JSON.stringify(options);
    if (!dispatchers.has(key)) dispatchers.set(key, createDispatcher(cluster, agentOptions));
    return dispatchers.get(key);
  };
  return instrumented;
}
