// The leadership fence (runtime/fencing.ts) on a Manager against the Kubernetes API test double: a leader frozen
// past its renew deadline writes nothing (status, Events) even before its elector gets a turn to notice, and a
// pass cancelled by a lost Lease writes nothing even once the Lease is regained; fresh passes write again.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { OperatorConfig } from "../../src/runtime/config.ts";
import { outcome, type ReconcileContext, type ReconcileRequest } from "../../src/runtime/controller.ts";
import { defaultConfig, Manager } from "../../src/runtime/manager.ts";
import { isFenced } from "../../src/util/fence.ts";
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

const election: Partial<OperatorConfig> = {
  leaderElect: true,
  leaseDurationMs: 3000,
  renewDeadlineMs: 1000,
  retryPeriodMs: 200,
  metricsBindAddress: undefined,
  healthProbeBindAddress: undefined,
  syncPeriodMs: 600_000,
};

/** Blocks the event loop, as SIGSTOP would: no timer (the elector's renewal) runs meanwhile. */
function freeze(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // busy: the process is "stopped"
  }
}

describe("the leadership fence", () => {
  let cluster: TestCluster;
  let proxy: CountingProxy;
  let manager: Manager | undefined;

  beforeEach(async () => {
    cluster = await startTestCluster();
    proxy = await startCountingProxy(cluster.double.url);
  });
  afterEach(async () => {
    await manager?.stop();
    manager = undefined;
    await proxy.close();
    await cluster.double.close();
  });

  function leader(reconcile: (request: ReconcileRequest, ctx: ReconcileContext) => Promise<void>): Manager {
    manager = new Manager({
      kubeConfig: kubeConfigFor(proxy.url),
      config: defaultConfig(election),
      logger: silentLogger,
      identity: "fenced",
    });
    manager.addController({
      name: "widget",
      resource: WIDGETS,
      reconciler: {
        async reconcile(request, ctx) {
          await reconcile(request, ctx);
          return outcome.done();
        },
      },
    });
    return manager;
  }

  it("a leader frozen past its renew deadline sends no status write and no Event, even before its elector runs", async () => {
    const failures: unknown[] = [];
    let pass = 0;
    const widgets = (): WidgetObject | undefined => manager?.informerFor<WidgetObject>(WIDGETS).get("default", "w");
    const running = leader(async (_request, ctx) => {
      pass++;
      const widget = widgets();
      if (widget === undefined) return;
      if (pass === 1) freeze(1500); // past the 1 s renew deadline, within the 3 s lease
      if (pass <= 2) running.events.warning(widget, "ApiUnavailable", `pass ${pass}`, "Reconcile");
      try {
        await running.kube.patchStatus(WIDGETS, widget, { by: pass === 1 ? "the frozen pass" : "a fresh pass" });
      } catch (error) {
        failures.push(error);
        if (!ctx.signal.aborted && !isFenced(error)) throw error;
      }
    });
    await cluster.createWidget("default", "w");
    await running.start();
    // The frozen pass's write was refused as it was about to leave; the replica then lost and regained its
    // Lease (it still names it), and a fresh pass wrote.
    await eventually(
      async () => expect((await cluster.getWidget("default", "w")).status).toEqual({ by: "a fresh pass" }),
      8000,
    );
    expect(failures).toHaveLength(1);
    expect(isFenced(failures[0])).toBe(true);
    await running.events.flush();
    expect(proxy.writes("/widgets/w/status")).toBe(1);
    const notes = proxy.requests.filter((entry) => entry.startsWith("POST") && entry.includes("/events"));
    expect(notes).toHaveLength(1); // pass 2's only
  });

  it("a pass cancelled by a lost Lease writes nothing, even once the Lease is regained", async () => {
    let pass = 0;
    const outcomes: string[] = [];
    const running = leader(async (_request, ctx) => {
      pass++;
      const mine = pass;
      const widget = running.informerFor<WidgetObject>(WIDGETS).get("default", "w");
      if (widget === undefined || mine > 1) return;
      await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
      // Still unwinding (a request in flight) while the replica takes its Lease back and starts afresh.
      await eventually(() => expect(running.isLeader()).toBe(true), 8000);
      try {
        await running.kube.patchStatus(WIDGETS, widget, { from: "the cancelled pass" });
        outcomes.push("written");
      } catch (error) {
        outcomes.push(isFenced(error) ? "fenced" : String(error));
      }
    });
    await cluster.createWidget("default", "w");
    await running.start();
    await eventually(() => expect(pass).toBe(1));
    cluster.double.faults.failNext(8, 500, { path: "/leases/" });
    await eventually(() => expect(outcomes).toEqual(["fenced"]), 10_000);
    expect(proxy.writes("/widgets/w/status")).toBe(0);
  });
});
