// Startup against a cluster that is not ready for us: a missing CRD (the list answers 404) and a list that hangs.
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { missingResourceMessage, ResilientInformer } from "../../src/runtime/informer.ts";
import { CacheSyncTimeoutError, defaultConfig, Manager } from "../../src/runtime/manager.ts";
import {
  eventually,
  kubeConfigFor,
  silentLogger,
  startCountingProxy,
  startTestCluster,
  type TestCluster,
  WIDGETS,
} from "./helpers.ts";

interface LogLine {
  level: number;
  msg: string;
}

/** A pino logger that keeps its lines, to check what an operator's user would read. */
function capturingLogger(): { logger: pino.Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logger = pino({ level: "trace" }, { write: (line: string) => lines.push(JSON.parse(line) as LogLine) });
  return { logger, lines };
}

const MISSING = missingResourceMessage(WIDGETS);

describe("startup when the CRD is missing or the list hangs", () => {
  let cluster: TestCluster | undefined;
  const informers: ResilientInformer[] = [];
  const managers: Manager[] = [];

  afterEach(async () => {
    await Promise.all(managers.splice(0).map((manager) => manager.stop()));
    await Promise.all(informers.splice(0).map((informer) => informer.stop()));
    await cluster?.double.close();
    cluster = undefined;
  });

  function newInformer(
    started: TestCluster,
    overrides: Partial<ConstructorParameters<typeof ResilientInformer>[0]> = {},
  ): ResilientInformer {
    const informer = new ResilientInformer({
      kubeConfig: started.kubeConfig,
      resource: WIDGETS,
      logger: silentLogger,
      restartBaseDelayMs: 20,
      restartMaxDelayMs: 100,
      ...overrides,
    });
    informers.push(informer);
    return informer;
  }

  function newManager(started: TestCluster, cacheSyncTimeoutMs: number): Manager {
    const manager = new Manager({
      kubeConfig: started.kubeConfig,
      config: defaultConfig({
        metricsBindAddress: undefined,
        healthProbeBindAddress: { host: "127.0.0.1", port: 0 },
        cacheSyncTimeoutMs,
      }),
      logger: silentLogger,
      informer: { restartBaseDelayMs: 20, restartMaxDelayMs: 100 },
    });
    manager.informerFor(WIDGETS);
    managers.push(manager);
    return manager;
  }

  it("logs the missing CRD once at error level, keeps retrying with capped backoff and recovers when installed", async () => {
    cluster = await startTestCluster({ withoutCrd: true });
    const { logger, lines } = capturingLogger();
    const errors: string[] = [];
    const informer = newInformer(cluster, {
      logger,
      onLifecycle: (event) => event.type === "error" && errors.push(event.reason),
    });
    informer.start();
    // Capped at 100 ms: many attempts within a second, not a handful doubling towards minutes.
    await eventually(() => expect(errors.length).toBeGreaterThanOrEqual(5), 3000);
    expect(errors.every((reason) => reason === MISSING)).toBe(true);
    expect(informer.hasSynced()).toBe(false);
    expect(informer.syncError()).toBe(MISSING);
    const errorLines = lines.filter((line) => line.level >= 50);
    expect(errorLines.map((line) => line.msg)).toEqual([
      "the Kubernetes API has no widgets.example.gpucloud.dev: install the CRDs (kubectl apply -f crds/)",
    ]);

    await cluster.installCrd();
    await informer.waitForSync();
    expect(informer.syncError()).toBeUndefined();
    await cluster.createWidget("default", "after-install");
    await eventually(() => expect(informer.get("default", "after-install")).toBeDefined());
    expect(lines.filter((line) => line.level >= 50)).toHaveLength(1);
  });

  it("explains on /readyz and rejects start() after --cache-sync-timeout", async () => {
    cluster = await startTestCluster({ withoutCrd: true });
    const manager = newManager(cluster, 1500);
    const started = manager.start();
    const failure = started.then(
      () => undefined,
      (error: unknown) => error,
    );
    const readyz = await eventually(async () => {
      const url = manager.serverUrls.probes;
      expect(url).toBeDefined();
      const response = await fetch(`${url}/readyz`);
      const body = await response.text();
      expect(response.status).toBe(500);
      expect(body).toContain(MISSING);
      return body;
    });
    expect(readyz).toContain("not synced: widgets.example.gpucloud.dev");
    const error = await failure;
    expect(error).toBeInstanceOf(CacheSyncTimeoutError);
    expect((error as Error).message).toContain("--cache-sync-timeout");
    expect((error as Error).message).toContain(`widgets.example.gpucloud.dev: ${MISSING}`);
  });

  it("waits for ever with --cache-sync-timeout 0 and starts once the CRD is installed", async () => {
    cluster = await startTestCluster({ withoutCrd: true });
    const manager = newManager(cluster, 0);
    let settled: string | undefined;
    const started = manager.start().then(
      () => {
        settled = "resolved";
      },
      () => {
        settled = "rejected";
      },
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(settled).toBeUndefined();
    await cluster.installCrd();
    await started;
    expect(settled).toBe("resolved");
    const response = await fetch(`${manager.serverUrls.probes}/readyz`);
    expect(response.status).toBe(200);
  });

  it("retries a list that does not answer within listTimeoutMs", async () => {
    cluster = await startTestCluster();
    await cluster.createWidget("default", "w1");
    cluster.double.faults.setLatency(3000);
    const errors: string[] = [];
    const informer = newInformer(cluster, {
      listTimeoutMs: 200,
      onLifecycle: (event) => event.type === "error" && errors.push(event.reason),
    });
    informer.start();
    await eventually(() => expect(errors.length).toBeGreaterThanOrEqual(2), 3000);
    expect(errors[0]).toBe("list of widgets.example.gpucloud.dev did not answer within 200 ms");
    expect(informer.syncError()).toBe(errors.at(-1));
    expect(informer.hasSynced()).toBe(false);
    cluster.double.faults.setLatency(0);
    await informer.waitForSync();
    expect(informer.get("default", "w1")).toBeDefined();
  });

  it("aborts a list the server never answers and lists again", async () => {
    cluster = await startTestCluster();
    await cluster.createWidget("default", "w1");
    let hung = 2;
    const isList = (method: string, url: string): boolean =>
      method === "GET" && url.includes("/widgets") && !url.includes("watch=true");
    const proxy = await startCountingProxy(cluster.double.url, {
      hold: (method, url) => isList(method, url) && hung-- > 0,
    });
    try {
      const errors: string[] = [];
      const informer = newInformer(cluster, {
        kubeConfig: kubeConfigFor(proxy.url),
        listTimeoutMs: 200,
        onLifecycle: (event) => event.type === "error" && errors.push(event.reason),
      });
      informer.start();
      await informer.waitForSync();
      expect(informer.get("default", "w1")).toBeDefined();
      expect(errors).toHaveLength(2);
      expect(proxy.requests.filter((entry) => entry === "GET /apis/example.gpucloud.dev/v1/widgets")).toHaveLength(3);
      // The hung requests were aborted, not left open until the socket dies.
      await eventually(() => expect(proxy.heldClosed()).toBe(2));
    } finally {
      await Promise.all(informers.splice(0).map((informer) => informer.stop()));
      await proxy.close();
    }
  });
});
