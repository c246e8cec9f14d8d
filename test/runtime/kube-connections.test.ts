// Connections to the Kubernetes API are kept alive: client-node 2.0.1 alone builds a new undici Agent (so a new
// connection, and over TLS a new handshake) for every request whenever TLS options apply, i.e. on every real
// cluster. The manager's instrumented KubeConfig reuses one dispatcher per TLS configuration.
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { Counter } from "prom-client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { KubeClient } from "../../src/runtime/kube.ts";
import { instrumentKubeConfig } from "../../src/runtime/kube-request-metrics.ts";
import { kubeConfigFor, silentLogger, startTestCluster, type TestCluster, WIDGETS } from "./helpers.ts";

/** A TCP relay in front of the double that counts the connections opened through it. */
async function connectionCounter(target: URL): Promise<{ url: string; connections(): number; close(): Promise<void> }> {
  let connections = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    connections++;
    const upstream = createConnection(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no address");
  return {
    url: `http://127.0.0.1:${address.port}`,
    connections: () => connections,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe("Kubernetes API connections", () => {
  let cluster: TestCluster;
  beforeEach(async () => {
    cluster = await startTestCluster();
  });
  afterEach(async () => {
    await cluster.double.close();
  });

  it("are reused across requests (one dispatcher per TLS configuration)", async () => {
    const relay = await connectionCounter(new URL(cluster.double.url));
    try {
      const widget = await cluster.createWidget("default", "reused", { size: 1 });
      const counter = new Counter({
        name: "test_rest_client_requests_total",
        help: "test",
        labelNames: ["code", "method", "host"],
        registers: [],
      });
      // skip-tls-verify: a TLS option, as a CA or a client certificate is on a real cluster.
      const kube = new KubeClient(instrumentKubeConfig(kubeConfigFor(relay.url), counter), silentLogger);
      let current = widget;
      for (let i = 0; i < 20; i++) {
        const written = await kube.patchStatus(WIDGETS, current, { size: i });
        if (written.type === "written") current = written.object as typeof widget;
      }
      // Sequential requests over kept-alive connections: a handful at most, not one per request.
      expect(relay.connections()).toBeLessThanOrEqual(2);
    } finally {
      await relay.close();
    }
  });
});
