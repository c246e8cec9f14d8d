// Shared fixtures of the runtime tests: a Kubernetes API test double serving one small custom resource, a
// kubeconfig for it, and a polling `eventually` for asynchronous effects.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import { pino } from "pino";
import { type RunningKubeDouble, startKubeDouble } from "../../src/kube-double/index.ts";
import type { KubeResource } from "../../src/runtime/resource.ts";

export const silentLogger = pino({ level: "silent" });

export const WIDGETS: KubeResource = {
  group: "example.gpucloud.dev",
  version: "v1",
  plural: "widgets",
  kind: "Widget",
  namespaced: true,
};

const WIDGET_CRD = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "widgets.example.gpucloud.dev" },
  spec: {
    group: "example.gpucloud.dev",
    scope: "Namespaced",
    names: { plural: "widgets", singular: "widget", kind: "Widget", listKind: "WidgetList" },
    versions: [
      {
        name: "v1",
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: {
              spec: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
              status: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
            },
          },
        },
      },
    ],
  },
};

export interface TestCluster {
  double: RunningKubeDouble;
  kubeConfig: KubeConfig;
  custom: CustomObjectsApi;
  createWidget(
    namespace: string,
    name: string,
    spec?: Record<string, unknown>,
    annotations?: Record<string, string>,
  ): Promise<WidgetObject>;
  deleteWidget(namespace: string, name: string): Promise<void>;
  getWidget(namespace: string, name: string): Promise<WidgetObject>;
  createNamespace(name: string): Promise<void>;
  /** Installs the Widget CRD (for clusters started with `withoutCrd`). */
  installCrd(): Promise<void>;
}

export interface WidgetObject {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace: string; resourceVersion: string; finalizers?: string[]; uid?: string };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

export async function startTestCluster(
  options: { bookmarkIntervalMs?: number; withoutCrd?: boolean } = {},
): Promise<TestCluster> {
  const double = await startKubeDouble({
    crds: options.withoutCrd ? [] : [WIDGET_CRD],
    logger: silentLogger,
    ...(options.bookmarkIntervalMs !== undefined ? { bookmarkIntervalMs: options.bookmarkIntervalMs } : {}),
  });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromString(double.kubeconfigYaml());
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const { group, version, plural } = WIDGETS;
  return {
    double,
    kubeConfig,
    custom,
    createWidget: async (namespace, name, spec = {}, annotations) =>
      (await custom.createNamespacedCustomObject({
        group,
        version,
        plural,
        namespace,
        body: {
          apiVersion: `${group}/${version}`,
          kind: "Widget",
          metadata: { name, namespace, ...(annotations ? { annotations } : {}) },
          spec,
        },
      })) as WidgetObject,
    deleteWidget: async (namespace, name) => {
      await custom.deleteNamespacedCustomObject({ group, version, plural, namespace, name });
    },
    getWidget: async (namespace, name) =>
      (await custom.getNamespacedCustomObject({ group, version, plural, namespace, name })) as WidgetObject,
    createNamespace: async (name) => {
      const response = await fetch(`${double.url}/api/v1/namespaces`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name } }),
      });
      if (!response.ok) throw new Error(`create namespace ${name}: ${response.status}`);
    },
    installCrd: async () => {
      const response = await fetch(`${double.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(WIDGET_CRD),
      });
      if (!response.ok) throw new Error(`install the Widget CRD: ${response.status} ${await response.text()}`);
    },
  };
}

/** Polls `check` until it returns without throwing, or fails with its last error after `timeoutMs`. */
export async function eventually<T>(check: () => T | Promise<T>, timeoutMs = 5000, intervalMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  }
}

export interface CountingProxy {
  url: string;
  /** Requests seen so far, as "METHOD path" (query string dropped). */
  requests: string[];
  /** The same requests with their query strings, as "METHOD url". */
  urls: string[];
  writes(pathIncludes: string): number;
  /** Held requests (never answered) whose connection the client has closed. */
  heldClosed(): number;
  close(): Promise<void>;
}

/**
 * A pass-through HTTP proxy in front of the test double that records every request, so tests can count what
 * really reached the server (writes included). Streams (watches) are piped through with headers flushed at once.
 */
export async function startCountingProxy(
  target: string,
  options: { hold?: (method: string, url: string) => boolean } = {},
): Promise<CountingProxy> {
  const { createServer, request: forward } = await import("node:http");
  const requests: string[] = [];
  const urls: string[] = [];
  let heldClosed = 0;
  const upstreamUrl = new URL(target);
  const server = createServer((incoming, outgoing) => {
    requests.push(`${incoming.method} ${(incoming.url ?? "").split("?")[0]}`);
    urls.push(`${incoming.method} ${incoming.url ?? ""}`);
    if (options.hold?.(incoming.method ?? "GET", incoming.url ?? "")) {
      // Never answered: a hung API server. Count when the client gives up on it.
      outgoing.on("close", () => heldClosed++);
      return;
    }
    const upstream = forward(
      {
        host: upstreamUrl.hostname,
        port: upstreamUrl.port,
        method: incoming.method,
        path: incoming.url,
        headers: incoming.headers,
      },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        outgoing.flushHeaders();
        answer.pipe(outgoing);
        answer.on("error", () => outgoing.destroy());
      },
    );
    upstream.on("error", () => outgoing.destroy());
    incoming.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    urls,
    writes: (pathIncludes) =>
      requests.filter((entry) => /^(POST|PUT|PATCH|DELETE) /.test(entry) && entry.includes(pathIncludes)).length,
    heldClosed: () => heldClosed,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A KubeConfig pointing at `url` (the double or a proxy in front of it). */
export function kubeConfigFor(url: string): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: "test", server: url, skipTLSVerify: true }],
    users: [{ name: "test", token: "test-token" }],
    contexts: [{ name: "test", cluster: "test", user: "test", namespace: "default" }],
    currentContext: "test",
  });
  return kubeConfig;
}

/** A plain HTTP server on a free local port answering with `handle`; `close()` also drops open connections. */
export async function startHttpServer(
  handle: (request: IncomingMessage, response: ServerResponse) => void,
): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no address");
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
