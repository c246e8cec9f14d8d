import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { EventRecorder, eventNameFor, REPORTING_CONTROLLER } from "../../src/runtime/events.ts";
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

  it("writes Events about an object with a name of 253 characters, under a valid name", async () => {
    const longName = `${"a".repeat(100)}.${"b".repeat(100)}-${"c".repeat(51)}`;
    expect(longName).toHaveLength(253);
    const long = await cluster.createWidget("default", longName);
    const events = recorder();
    events.normal(long, "Created", "a long name", "Create");
    await events.flush();
    const [event] = await listEvents();
    expect(event?.regarding.name).toBe(longName);
    expect(event?.metadata.name.length).toBeLessThanOrEqual(253);
    expect(event?.metadata.name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/);
  });

  it("names Events <object>.<suffix>, cutting the object's name on a letter or digit where it must", () => {
    expect(eventNameFor("w1", "18a")).toBe("w1.18a");
    const cut = eventNameFor(`${"a".repeat(235)}.-${"b".repeat(16)}`, "1234567890abcdef");
    expect(cut).toBe(`${"a".repeat(235)}.1234567890abcdef`);
    expect(eventNameFor("x".repeat(253), "ff").length).toBe(253);
  });

  it("logs each failed write as one line: the API server's message, not the HTTP exchange", async () => {
    const lines: string[] = [];
    const events = new EventRecorder({
      kubeConfig: cluster.kubeConfig,
      reportingInstance: "test-replica",
      logger: pino({ level: "info" }, { write: (line: string) => void lines.push(line) }),
    });
    cluster.double.faults.failNext(2, 403, { path: "/events" });
    events.warning(widget, "Failed", "refused", "Reconcile");
    events.normal(widget, "Created", "refused too", "Create");
    await events.flush();
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      expect(line.trimEnd()).not.toContain("\n");
      expect(line).not.toMatch(/Headers|Body:|HTTP-Code/);
      expect(JSON.parse(line)).toMatchObject({
        msg: "could not write event",
        status: 403,
        regarding: "Widget default/w1",
        error: expect.stringContaining("403"),
      });
    }
  });
});
