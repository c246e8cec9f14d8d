import type { AddressInfo } from "node:net";
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import type { OperatorConfig } from "../../src/runtime/config.ts";
import { outcome, type ReconcileRequest } from "../../src/runtime/controller.ts";
import { priorityOf } from "../../src/runtime/event-routing.ts";
import { defaultConfig, Manager } from "../../src/runtime/manager.ts";
import {
  type CountingProxy,
  eventually,
  kubeConfigFor,
  silentLogger,
  startCountingProxy,
  startTestCluster,
  type TestCluster,
  WIDGETS,
  type WidgetObject,
} from "./helpers.ts";

/** A port nothing listens on (it was free a moment ago): connections to it are refused. */
async function freePort(): Promise<number> {
  const { createServer } = await import("node:net");
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const localServers: Partial<OperatorConfig> = {
  metricsBindAddress: { host: "127.0.0.1", port: 0 },
  healthProbeBindAddress: { host: "127.0.0.1", port: 0 },
};

const LeaseAnswer = z.object({
  spec: z.object({ holderIdentity: z.string().optional(), renewTime: z.string(), leaseDurationSeconds: z.number() }),
});

async function readLease(url: string): Promise<z.infer<typeof LeaseAnswer>> {
  const path = "/apis/coordination.k8s.io/v1/namespaces/default/leases/gpuvm-operator.gpucloud.dev";
  return LeaseAnswer.parse(await (await fetch(`${url}${path}`)).json());
}

describe("Manager against the Kubernetes API test double", () => {
  let cluster: TestCluster;
  let proxy: CountingProxy;
  const managers: Manager[] = [];

  function newManager(overrides: Partial<OperatorConfig> = {}, identity?: string, syncPeriodFloorMs = 100): Manager {
    const manager = new Manager({
      kubeConfig: kubeConfigFor(proxy.url),
      config: defaultConfig({ ...localServers, ...overrides }),
      logger: silentLogger,
      syncPeriodFloorMs,
      ...(identity ? { identity } : {}),
    });
    managers.push(manager);
    return manager;
  }

  /** A reconciler that mirrors spec.size into status.size through the status subresource. */
  function mirrorController(manager: Manager, reconciled: ReconcileRequest[]): void {
    const widgets = manager.informerFor<WidgetObject>(WIDGETS);
    manager.addController({
      name: "widget",
      resource: WIDGETS,
      reconciler: {
        async reconcile(request) {
          reconciled.push(request);
          const widget = widgets.get(request.namespace, request.name);
          if (widget === undefined) return outcome.done();
          const written = await manager.kube.patchStatus(WIDGETS, widget, { size: widget.spec?.size, phase: "Ready" });
          return written.type === "conflict" ? outcome.requeue() : outcome.done();
        },
      },
    });
  }

  beforeEach(async () => {
    cluster = await startTestCluster();
    proxy = await startCountingProxy(cluster.double.url);
  });
  afterEach(async () => {
    await Promise.all(managers.splice(0).map((manager) => manager.stop()));
    await proxy.close();
    await cluster.double.close();
  });

  it("writes status once and a reconcile that changes nothing writes nothing", async () => {
    const manager = newManager();
    const reconciled: ReconcileRequest[] = [];
    mirrorController(manager, reconciled);
    await cluster.createWidget("default", "w1", { size: 3 });
    await manager.start();
    await eventually(async () =>
      expect((await cluster.getWidget("default", "w1")).status).toEqual({ size: 3, phase: "Ready" }),
    );
    // The status write comes back as an update event: a second reconcile that must not write again.
    await eventually(() => expect(reconciled.length).toBeGreaterThanOrEqual(2));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(proxy.writes("/widgets/w1/status")).toBe(1);
    // Key order of the desired status does not matter either.
    const widget = await cluster.getWidget("default", "w1");
    expect(await manager.kube.patchStatus(WIDGETS, widget, { phase: "Ready", size: 3 })).toEqual({ type: "unchanged" });
    expect(proxy.writes("/widgets/w1/status")).toBe(1);
  });

  it("starts no pass for an event its registration calls the echo of its own write", async () => {
    const manager = newManager();
    const widgets = manager.informerFor<WidgetObject>(WIDGETS);
    const reconciled: ReconcileRequest[] = [];
    const written = new Set<string>();
    let writing: Promise<unknown> = Promise.resolve();
    manager.addController({
      name: "widget",
      resource: WIDGETS,
      // The version a write made is known once its answer is in: an event that overtakes it waits for it.
      isEcho: (_key, version) => writing.then(() => written.has(version)),
      reconciler: {
        async reconcile(request) {
          reconciled.push(request);
          const widget = widgets.get(request.namespace, request.name);
          if (widget === undefined) return outcome.done();
          const write = manager.kube.patchStatus(WIDGETS, widget, { size: widget.spec?.size }).then((result) => {
            const version = result.type === "written" ? result.object.metadata?.resourceVersion : undefined;
            if (version !== undefined) written.add(version);
          });
          writing = write;
          await write;
          return outcome.done();
        },
      },
    });
    await cluster.createWidget("default", "echo", { size: 3 });
    await manager.start();
    await eventually(async () => expect((await cluster.getWidget("default", "echo")).status).toEqual({ size: 3 }));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(reconciled).toHaveLength(1);
    // Somebody else's change is news.
    await cluster.custom.patchNamespacedCustomObject(
      { ...WIDGETS, namespace: "default", name: "echo", body: { spec: { size: 4 } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    await eventually(() => expect(reconciled).toHaveLength(2));
  });

  it("answers a stale resourceVersion with conflict, never an overwrite", async () => {
    const manager = newManager();
    const created = await cluster.createWidget("default", "w2", { size: 1 });
    const first = await manager.kube.patchStatus(WIDGETS, created, { size: 1 });
    expect(first.type).toBe("written");
    const stale = await manager.kube.patchStatus(WIDGETS, created, { size: 99 });
    expect(stale).toEqual({ type: "conflict" });
    expect((await cluster.getWidget("default", "w2")).status).toEqual({ size: 1 });
    // Fields left out of the desired status are removed (null in the merge patch), not kept.
    const current = await cluster.getWidget("default", "w2");
    expect((await manager.kube.patchStatus(WIDGETS, current, { phase: "Ready" })).type).toBe("written");
    expect((await cluster.getWidget("default", "w2")).status).toEqual({ phase: "Ready" });
  });

  it("adds and removes finalizers with a resourceVersion precondition", async () => {
    const manager = newManager();
    const created = await cluster.createWidget("default", "w3");
    const added = await manager.kube.addFinalizer(WIDGETS, created, "gpucloud.dev/finalizer");
    expect(added.type).toBe("written");
    expect((await cluster.getWidget("default", "w3")).metadata.finalizers).toEqual(["gpucloud.dev/finalizer"]);
    expect(await manager.kube.removeFinalizer(WIDGETS, created, "gpucloud.dev/finalizer")).toEqual({
      type: "unchanged",
    });
    const fresh = await cluster.getWidget("default", "w3");
    expect(await manager.kube.removeFinalizer(WIDGETS, created, "other")).toEqual({ type: "unchanged" });
    expect(
      await manager.kube.addFinalizer(WIDGETS, { ...created, metadata: { ...created.metadata, finalizers: [] } }, "x"),
    ).toEqual({
      type: "conflict",
    });
    const removed = await manager.kube.removeFinalizer(WIDGETS, fresh, "gpucloud.dev/finalizer");
    expect(removed.type).toBe("written");
    expect((await cluster.getWidget("default", "w3")).metadata.finalizers ?? []).toEqual([]);
  });

  it("serves /metrics, /healthz and /readyz once caches are synced", async () => {
    const manager = newManager();
    mirrorController(manager, []);
    await cluster.createWidget("default", "w4", { size: 2 });
    await manager.start();
    const { metrics, probes } = manager.serverUrls;
    expect((await fetch(`${probes}/healthz`)).status).toBe(200);
    expect((await fetch(`${probes}/readyz`)).status).toBe(200);
    await eventually(async () => {
      const text = await (await fetch(`${metrics}/metrics`)).text();
      expect(text).toContain('controller_runtime_reconcile_total{controller="widget",result="success"}');
      expect(text).toContain('workqueue_depth{name="widget"}');
      expect(text).toContain("controller_runtime_max_concurrent_reconciles");
      expect(text).toContain("process_cpu_seconds_total");
    });
    expect((await fetch(`${probes}/nothing`)).status).toBe(404);
  });

  it("serves only the families named in /metrics?name=… (the event-loop gauges collected each time)", async () => {
    const manager = newManager();
    mirrorController(manager, []);
    await manager.start();
    const { metrics } = manager.serverUrls;
    const familiesOf = (text: string) =>
      text
        .split("\n")
        .filter((line) => line.startsWith("# TYPE "))
        .map((line) => line.split(" ")[2]);
    const lagText = async () =>
      (
        await fetch(`${metrics}/metrics?name=nodejs_eventloop_lag_max_seconds&name[]=gpucloud_operator_ready&name=nope`)
      ).text();
    const first = await lagText();
    // Asked for the maximum: the gauge that sets it comes along, before it (the registry's order, as in the whole
    // exposition); unknown names are left out.
    const families = familiesOf(first);
    expect([...families].sort()).toEqual([
      "gpucloud_operator_ready",
      "nodejs_eventloop_lag_max_seconds",
      "nodejs_eventloop_lag_seconds",
    ]);
    expect(families.indexOf("nodejs_eventloop_lag_seconds")).toBeLessThan(
      families.indexOf("nodejs_eventloop_lag_max_seconds"),
    );
    expect(first).toContain("gpucloud_operator_ready 1");
    expect(first.endsWith("\n")).toBe(true);
    // Each filtered scrape collects the histogram anew: 50 ms after the last one it holds that interval's
    // samples (without the lag gauge's collect, the maximum would stay 0).
    await new Promise((resolve) => setTimeout(resolve, 50));
    const second = await lagText();
    const max = Number(/^nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(second)?.[1]);
    expect(max).toBeGreaterThan(0);
    const whole = await (await fetch(`${metrics}/metrics`)).text();
    expect(familiesOf(whole).length).toBeGreaterThan(20);
  });

  it("counts every Kubernetes request in rest_client_requests_total{code,method,host}, as client-go does", async () => {
    cluster.double.faults.failNext(1, 500, { path: "v1/widgets" });
    const manager = newManager({ leaderElect: true, leaderElectionNamespace: "default" });
    const reconciled: ReconcileRequest[] = [];
    mirrorController(manager, reconciled);
    await cluster.createWidget("default", "counted", { size: 1 });
    await manager.start();
    await eventually(() => expect(reconciled.length).toBeGreaterThan(0));
    const host = new URL(proxy.url).host;
    const samples = async () =>
      ((await manager.metrics.registry.getMetricsAsJSON()).find((m) => m.name === "rest_client_requests_total")
        ?.values ?? []) as { labels: Record<string, string | number>; value: number }[];
    await eventually(async () => {
      const values = await samples();
      const count = (code: string, method: string) =>
        values.find((v) => v.labels.code === code && v.labels.method === method && v.labels.host === host)?.value ?? 0;
      // The failed list, the lists and watches that followed, the Lease and the status write all counted.
      expect(count("500", "GET")).toBe(1);
      expect(count("200", "GET")).toBeGreaterThanOrEqual(2);
      expect(count("200", "PATCH")).toBeGreaterThanOrEqual(1);
      expect(count("201", "POST")).toBeGreaterThanOrEqual(1); // the Lease
      // Every request the server saw was counted once (watches are counted when their stream opens).
      expect(values.reduce((sum, v) => sum + v.value, 0)).toBe(proxy.requests.length);
    });
    const text = await (await fetch(`${manager.serverUrls.metrics}/metrics`)).text();
    expect(text).toContain(`rest_client_requests_total{code="500",method="GET",host="${host}"} 1`);
    expect(text).toContain("gpucloud_operator_ready 1");
  });

  it('counts a request that got no answer as code "<error>"', async () => {
    const closedPort = await freePort();
    const manager = new Manager({
      kubeConfig: kubeConfigFor(`http://127.0.0.1:${closedPort}`),
      config: defaultConfig({ ...localServers, cacheSyncTimeoutMs: 0 }),
      logger: silentLogger,
      informer: { restartBaseDelayMs: 50, restartMaxDelayMs: 100 },
    });
    managers.push(manager);
    manager.informerFor(WIDGETS);
    void manager.start().catch(() => undefined);
    await eventually(async () => {
      const text = await manager.metrics.text();
      expect(text).toContain(`rest_client_requests_total{code="<error>",method="GET",host="127.0.0.1:${closedPort}"}`);
      expect(text).toContain("gpucloud_operator_ready 0");
    });
  });

  it.each([
    ["metricsBindAddress", "--metrics-bind-address"],
    ["healthProbeBindAddress", "--health-probe-bind-address"],
  ] as const)("fails to start with a message naming %s's flag when its port is taken", async (field, flag) => {
    const { createServer } = await import("node:net");
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const { port } = taken.address() as AddressInfo;
    try {
      const manager = newManager({ [field]: { host: "127.0.0.1", port } });
      await expect(manager.start()).rejects.toThrow(
        `cannot listen on 127.0.0.1:${port}: the address is already in use (another operator, or a simulator, on the same port?); choose another address with ${flag} (0 disables it)`,
      );
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });

  it("enqueues the controller's keys when a watched Secret changes", async () => {
    const manager = newManager();
    const reconciled: ReconcileRequest[] = [];
    manager.addController({
      name: "widget",
      resource: WIDGETS,
      reconciler: {
        async reconcile(request) {
          reconciled.push(request);
          return outcome.done();
        },
      },
      watches: [
        {
          resource: { group: "", version: "v1", plural: "secrets", kind: "Secret", namespaced: true },
          mapToKeys: (secret) => [`default/uses-${secret.metadata?.name}`],
        },
      ],
    });
    await manager.start();
    await manager.kube.createSecret("default", { metadata: { name: "creds" }, stringData: { apiKey: "k" } });
    await eventually(() => expect(reconciled).toContainEqual({ namespace: "default", name: "uses-creds" }));
  });

  it("hands leadership over: only the leader reconciles, and a stopped leader releases the Lease", async () => {
    const election: Partial<OperatorConfig> = {
      leaderElect: true,
      leaseDurationMs: 4000,
      renewDeadlineMs: 3000,
      retryPeriodMs: 200,
    };
    const first = newManager(election, "first");
    const second = newManager(election, "second");
    const firstReconciled: ReconcileRequest[] = [];
    const secondReconciled: ReconcileRequest[] = [];
    mirrorController(first, firstReconciled);
    mirrorController(second, secondReconciled);
    await cluster.createWidget("default", "shared", { size: 1 });
    await first.start();
    await eventually(() => expect(first.isLeader()).toBe(true));
    await second.start();
    await eventually(() => expect(firstReconciled.length).toBeGreaterThan(0));
    await new Promise((resolve) => setTimeout(resolve, 600)); // several retry periods
    expect(second.isLeader()).toBe(false);
    expect(secondReconciled).toEqual([]);
    expect(second.informerFor(WIDGETS).get("default", "shared")).toBeDefined(); // standby cache is warm

    const stoppedAt = Date.now();
    await first.stop();
    await eventually(() => expect(second.isLeader()).toBe(true), 3000);
    // Released (not expired): the standby took over well before the 4 s lease duration.
    expect(Date.now() - stoppedAt).toBeLessThan(2500);
    await eventually(() => expect(secondReconciled).toContainEqual({ namespace: "default", name: "shared" }));
    const lease = await readLease(cluster.double.url);
    expect(lease.spec.holderIdentity).toBe("second");
    expect(lease.spec.renewTime).toMatch(/\.\d{6}Z$/);
  });

  it("stops workers at once when the Lease cannot be renewed, and resumes after regaining it", async () => {
    const manager = newManager({
      leaderElect: true,
      leaseDurationMs: 2000,
      renewDeadlineMs: 800,
      retryPeriodMs: 100,
      gracefulShutdownTimeoutMs: 200, // the second reconcile hangs until aborted
    });
    const aborted: string[] = [];
    let started = 0;
    manager.addController({
      name: "widget",
      resource: WIDGETS,
      reconciler: {
        reconcile(request, ctx) {
          started++;
          return new Promise((resolve) => {
            ctx.signal.addEventListener("abort", () => {
              aborted.push(request.name);
              resolve(outcome.retry(new Error("aborted")));
            });
          });
        },
      },
    });
    await cluster.createWidget("default", "hanging");
    await manager.start();
    await eventually(() => expect(started).toBe(1));
    cluster.double.faults.failNext(12, 500, { path: "/leases/" });
    await eventually(() => expect(manager.isLeader()).toBe(false), 3000);
    expect(aborted).toEqual(["hanging"]);
    // The failures run out; the Lease still names this replica, which takes it back and starts over.
    await eventually(() => expect(manager.isLeader()).toBe(true), 5000);
    await eventually(() => expect(started).toBe(2));
  });

  it("watches only the given namespaces, one informer per namespace read as one cache", async () => {
    await cluster.createNamespace("team-a");
    await cluster.createNamespace("team-b");
    await cluster.createNamespace("team-c");
    for (const namespace of ["team-a", "team-b", "team-c"]) await cluster.createWidget(namespace, `w-${namespace}`);
    const manager = newManager({ watchNamespaces: ["team-a", "team-b"] });
    const reconciled: ReconcileRequest[] = [];
    manager.addController({
      name: "widget",
      resource: WIDGETS,
      reconciler: {
        async reconcile(request) {
          reconciled.push(request);
          return outcome.done();
        },
      },
    });
    await manager.start();
    const widgets = manager.informerFor(WIDGETS);
    expect(
      widgets
        .list()
        .map((object) => object.metadata?.name)
        .sort(),
    ).toEqual(["w-team-a", "w-team-b"]);
    expect(widgets.get("team-c", "w-team-c")).toBeUndefined();
    await eventually(() => expect(reconciled).toHaveLength(2));
    expect(proxy.requests.some((entry) => entry.includes("/namespaces/team-c/"))).toBe(false);
  });

  it("resyncs an object after the period of its gpucloud.dev/sync-period annotation", async () => {
    await cluster.createWidget("default", "fast", {}, { "gpucloud.dev/sync-period": "200ms" });
    await cluster.createWidget("default", "slow");
    await cluster.createWidget("default", "broken", {}, { "gpucloud.dev/sync-period": "soon" });
    await cluster.createWidget("default", "hasty", {}, { "gpucloud.dev/sync-period": "1ms" });
    const manager = newManager({}, undefined, 200);
    const counts = new Map<string, number>();
    manager.addController({
      name: "widget",
      resource: WIDGETS,
      reconciler: {
        async reconcile(request) {
          counts.set(request.name, (counts.get(request.name) ?? 0) + 1);
          return outcome.done();
        },
      },
    });
    await manager.start();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(counts.get("fast")).toBeGreaterThanOrEqual(4);
    expect(counts.get("slow")).toBe(1); // default 10 minutes
    expect(counts.get("broken")).toBe(1); // invalid annotation: logged, default used
    // Below the floor (200 ms here, 10 s by default): raised to it, not hundreds of resyncs.
    expect(counts.get("hasty")).toBeGreaterThanOrEqual(3);
    expect(counts.get("hasty")).toBeLessThanOrEqual(7);
  });

  it("is not ready until its caches have synced", async () => {
    cluster.double.faults.failNext(2, 500, { path: "v1/widgets" });
    const manager = new Manager({
      kubeConfig: kubeConfigFor(proxy.url),
      config: defaultConfig(localServers),
      logger: silentLogger,
      informer: { restartBaseDelayMs: 300 },
    });
    managers.push(manager);
    manager.informerFor(WIDGETS);
    const starting = manager.start();
    const probes = await eventually(() => {
      const url = manager.serverUrls.probes;
      if (url === undefined) throw new Error("probe server not up yet");
      return url;
    });
    expect((await fetch(`${probes}/readyz`)).status).toBe(500);
    expect((await fetch(`${probes}/healthz`)).status).toBe(200);
    await starting;
    expect((await fetch(`${probes}/readyz`)).status).toBe(200);
  });
});

describe("priorityOf (the lane of an event of a controller's own object)", () => {
  const object = (metadata: Record<string, unknown>) => ({ metadata: { name: "a", namespace: "ns", ...metadata } });

  it("a change somebody asked for goes to the high lane; new objects and status echoes to normal", () => {
    const before = object({ generation: 1, annotations: { x: "1" } });
    expect(priorityOf({ type: "add", object: before })).toBe("normal");
    expect(
      priorityOf({ type: "update", object: object({ generation: 1, annotations: { x: "1" } }), previous: before }),
    ).toBe("normal");
    expect(
      priorityOf({ type: "update", object: object({ generation: 2, annotations: { x: "1" } }), previous: before }),
    ).toBe("high");
    expect(
      priorityOf({ type: "update", object: object({ generation: 1, annotations: { x: "2" } }), previous: before }),
    ).toBe("high");
    expect(
      priorityOf({
        type: "update",
        object: object({ generation: 1, annotations: { x: "1" }, deletionTimestamp: "2026-11-22T00:00:00Z" }),
        previous: before,
      }),
    ).toBe("high");
    expect(priorityOf({ type: "delete", object: before })).toBe("normal");
  });
});
