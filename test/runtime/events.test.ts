import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { EventRecorder, REPORTING_CONTROLLER } from "../../src/runtime/events.ts";
import { silentLogger, startTestCluster, type TestCluster, type WidgetObject } from "./helpers.ts";

const EventList = z.object({
  items: z.array(
    z.looseObject({
      metadata: z.looseObject({ name: z.string() }),
      eventTime: z.string(),
      reason: z.string(),
      note: z.string(),
      type: z.string(),
      action: z.string(),
      reportingController: z.string(),
      reportingInstance: z.string(),
      regarding: z.looseObject({ kind: z.string(), name: z.string(), uid: z.string().optional() }),
      series: z.object({ count: z.number(), lastObservedTime: z.string() }).optional(),
    }),
  ),
});

describe("EventRecorder", () => {
  let cluster: TestCluster;
  let widget: WidgetObject;

  async function listEvents(): Promise<z.infer<typeof EventList>["items"]> {
    const response = await fetch(`${cluster.double.url}/apis/events.k8s.io/v1/namespaces/default/events`);
    return EventList.parse(await response.json()).items;
  }

  function recorder(options: { burst?: number } = {}): EventRecorder {
    return new EventRecorder({
      kubeConfig: cluster.kubeConfig,
      reportingInstance: "test-replica",
      logger: silentLogger,
      ...options,
    });
  }

  beforeEach(async () => {
    cluster = await startTestCluster();
    widget = await cluster.createWidget("default", "w1");
  });
  afterEach(async () => {
    await cluster.double.close();
  });

  it("writes an events.k8s.io/v1 Event with MicroTime and the reporting fields", async () => {
    const events = recorder();
    events.normal(widget, "Created", "created the widget", "Create");
    await events.flush();
    const [event, ...rest] = await listEvents();
    expect(rest).toEqual([]);
    expect(event).toMatchObject({
      reason: "Created",
      note: "created the widget",
      type: "Normal",
      action: "Create",
      reportingController: REPORTING_CONTROLLER,
      reportingInstance: "test-replica",
      regarding: { kind: "Widget", name: "w1" },
    });
    expect(event?.eventTime).toMatch(/\.\d{6}Z$/);
  });

  it("aggregates repeats into series.count on one Event", async () => {
    const events = recorder();
    for (let index = 0; index < 3; index++) {
      events.warning(widget, "CreateFailed", "out of stock", "Create");
      await events.flush();
    }
    events.warning(widget, "CreateFailed", "quota exceeded", "Create");
    await events.flush();
    const written = await listEvents();
    expect(written).toHaveLength(2);
    const outOfStock = written.find((event) => event.note === "out of stock");
    expect(outOfStock?.series?.count).toBe(3);
    expect(outOfStock?.series?.lastObservedTime).toMatch(/\.\d{6}Z$/);
  });

  it("rate-limits each object with a token bucket so it cannot flood the API", async () => {
    const events = recorder({ burst: 2 });
    for (let index = 0; index < 10; index++) events.warning(widget, "Failed", `attempt ${index}`, "Reconcile");
    await events.flush();
    expect(await listEvents()).toHaveLength(2);
    const other = await cluster.createWidget("default", "w2");
    events.normal(other, "Created", "another object has its own bucket", "Create");
    await events.flush();
    expect(await listEvents()).toHaveLength(3);
  });

  it("remembers a bounded number of series, the least recently used forgotten first", async () => {
    const events = new EventRecorder({
      kubeConfig: cluster.kubeConfig,
      reportingInstance: "test-replica",
      logger: silentLogger,
      maxTracked: 2,
    });
    const say = async (note: string): Promise<void> => {
      events.warning(widget, "Failed", note, "Reconcile");
      await events.flush();
    };
    await say("first");
    await say("second");
    await say("first"); // used again: now the most recent
    await say("third"); // the map is full: "second" is forgotten
    await say("first"); // still remembered: a repeat
    await say("second"); // a new Event, not a repeat
    const written = await listEvents();
    expect(written.filter((event) => event.note === "second")).toHaveLength(2);
    expect(written.filter((event) => event.note === "first")).toHaveLength(1);
    expect(written.find((event) => event.note === "first")?.series?.count).toBe(3);
  });

  it("never throws when the API refuses the event", async () => {
    const events = recorder();
    cluster.double.faults.failNext(1, 500, { path: "/events" });
    events.warning(widget, "Failed", "lost", "Reconcile");
    await events.flush();
    expect(await listEvents()).toHaveLength(0);
  });
});
