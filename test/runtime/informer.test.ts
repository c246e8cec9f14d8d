import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ResilientInformer } from "../../src/runtime/informer.ts";
import { type InformerEvent, shareUnchanged } from "../../src/runtime/informer-cache.ts";
import { makeListFunction } from "../../src/runtime/resource.ts";
import { StringInterner } from "../../src/util/intern.ts";
import { eventually, silentLogger, startTestCluster, type TestCluster, WIDGETS } from "./helpers.ts";

const WIDGET_PATH = { group: WIDGETS.group, version: WIDGETS.version, plural: WIDGETS.plural, namespace: "default" };

describe("ResilientInformer against the Kubernetes API test double", () => {
  let cluster: TestCluster;
  let informer: ResilientInformer | undefined;
  const events: string[] = [];
  const lifecycle: string[] = [];

  function startInformer(
    overrides: Partial<ConstructorParameters<typeof ResilientInformer>[0]> = {},
  ): ResilientInformer {
    informer = new ResilientInformer({
      kubeConfig: cluster.kubeConfig,
      resource: WIDGETS,
      logger: silentLogger,
      restartBaseDelayMs: 50,
      restartMaxDelayMs: 200,
      onLifecycle: (event) => lifecycle.push(event.type),
      ...overrides,
    });
    informer.on((event: InformerEvent<{ metadata?: { name?: string } }>) =>
      events.push(`${event.type}:${event.object.metadata?.name}`),
    );
    informer.start();
    return informer;
  }

  beforeEach(async () => {
    events.length = 0;
    lifecycle.length = 0;
    cluster = await startTestCluster();
  });
  afterEach(async () => {
    await informer?.stop();
    informer = undefined;
    await cluster.double.close();
  });

  it("lists, then follows adds, updates and deletes into its cache", async () => {
    await cluster.createWidget("default", "before");
    const cache = startInformer();
    await cache.waitForSync();
    expect(cache.hasSynced()).toBe(true);
    expect(cache.get("default", "before")?.metadata?.name).toBe("before");
    await cluster.createWidget("default", "after");
    await eventually(() => expect(cache.get("default", "after")).toBeDefined());
    await cluster.deleteWidget("default", "before");
    await eventually(() => expect(cache.get("default", "before")).toBeUndefined());
    expect(cache.list("default").map((object) => object.metadata?.name)).toEqual(["after"]);
    expect(events).toEqual(["add:before", "add:after", "delete:before"]);
  });

  it("caches objects without managedFields and kubectl's last-applied-configuration (memory per object)", async () => {
    await cluster.createWidget(
      "default",
      "listed",
      { size: 1 },
      {
        "kubectl.kubernetes.io/last-applied-configuration": '{"spec":{"size":1}}',
        kept: "yes",
      },
    );
    const cache = startInformer();
    await cache.waitForSync();
    await cluster.createWidget("default", "watched", { size: 2 });
    await eventually(() => expect(cache.get("default", "watched")).toBeDefined());
    expect((await cluster.getWidget("default", "listed")).metadata).toHaveProperty("managedFields");
    for (const name of ["listed", "watched"]) {
      const metadata = cache.get("default", name)?.metadata;
      expect(metadata).not.toHaveProperty("managedFields");
      expect(metadata?.resourceVersion).toBeDefined();
    }
    expect(cache.get("default", "listed")?.metadata?.annotations).toEqual({ kept: "yes" });
  });

  it("caches one copy of each repeated string (namespace, kind, apiVersion in every object)", async () => {
    await cluster.createWidget("default", "first", { size: 1 });
    const interner = new StringInterner();
    const cache = startInformer({ interner });
    await cache.waitForSync();
    expect(interner.hits).toBe(0);
    await cluster.createWidget("default", "second", { size: 1 });
    await eventually(() => expect(cache.get("default", "second")).toBeDefined());
    expect(interner.hits).toBeGreaterThanOrEqual(3);
    expect(cache.get("default", "second")?.metadata?.namespace).toBe("default");
  });

  it("keeps the previous version's spec object when only metadata changed, and a new one when the spec did", async () => {
    await cluster.createWidget("default", "kept", { size: 1, nested: { zone: "a" } });
    const cache = startInformer();
    await cache.waitForSync();
    const specOf = () => (cache.get("default", "kept") as { spec?: unknown } | undefined)?.spec;
    const first = cache.get("default", "kept");
    const firstSpec = specOf();
    const patch = (body: object) =>
      cluster.custom.patchNamespacedCustomObject(
        { ...WIDGET_PATH, name: "kept", body },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
    await patch({ metadata: { labels: { touched: "yes" } } });
    await eventually(() => expect(cache.get("default", "kept")?.metadata?.labels).toEqual({ touched: "yes" }));
    const second = cache.get("default", "kept");
    expect(second).not.toBe(first);
    expect(specOf()).toBe(firstSpec);
    await patch({ spec: { size: 2 } });
    await eventually(() => expect(specOf()).toEqual({ size: 2, nested: { zone: "a" } }));
    expect(specOf()).not.toBe(firstSpec);
  });

  it("lists in pages (limit and continue) and returns them as one list at the first page's version", async () => {
    for (let i = 0; i < 7; i++) await cluster.createWidget("default", `paged-${i}`);
    const list = makeListFunction(cluster.kubeConfig, WIDGETS, undefined, {}, 3);
    const firstPage = (await cluster.custom.listNamespacedCustomObject({ ...WIDGET_PATH, limit: 3 })) as {
      items: unknown[];
      metadata: { continue?: string };
    };
    expect(firstPage.items).toHaveLength(3);
    expect(firstPage.metadata.continue).toBeTruthy();
    const cache = startInformer({ listFunction: list });
    await cache.waitForSync();
    expect(
      cache
        .list()
        .map((o) => o.metadata?.name)
        .sort(),
    ).toEqual(Array.from({ length: 7 }, (_, i) => `paged-${i}`));
    const whole = await list();
    expect(whole.items).toHaveLength(7);
    expect(whole.metadata?.resourceVersion).toBeDefined();
    expect(whole.metadata).not.toHaveProperty("continue");
    // The watch starts from the list's version: a change after it arrives.
    await cluster.createWidget("default", "after-pages");
    await eventually(() => expect(cache.get("default", "after-pages")).toBeDefined());
  });

  it("restarts after a failed list (which would stop a bare ListWatch for good)", async () => {
    cluster.double.faults.failNext(2, 500, { path: "v1/widgets" });
    const cache = startInformer();
    await cache.waitForSync();
    expect(lifecycle.filter((type) => type === "error").length).toBe(2);
    await cluster.createWidget("default", "later");
    await eventually(() => expect(cache.get("default", "later")).toBeDefined());
  });

  it("keeps following after its watch connection is dropped", async () => {
    const cache = startInformer();
    await cache.waitForSync();
    cluster.double.faults.dropWatches();
    await cluster.createWidget("default", "after-drop");
    await eventually(() => expect(cache.get("default", "after-drop")).toBeDefined());
    cluster.double.faults.dropWatches();
    await cluster.deleteWidget("default", "after-drop");
    await eventually(() => expect(cache.get("default", "after-drop")).toBeUndefined());
  });

  it("restarts after a dropped watch and reports objects deleted while it was away", async () => {
    await cluster.createWidget("default", "doomed");
    const cache = startInformer();
    await cache.waitForSync();
    // Keep it away for a few attempts: only its all-namespaces list/watch path matches "v1/widgets".
    cluster.double.faults.failNext(3, 503, { path: "v1/widgets" });
    cluster.double.faults.dropWatches();
    await cluster.deleteWidget("default", "doomed");
    await cluster.createWidget("default", "newcomer");
    await eventually(() => {
      expect(cache.get("default", "doomed")).toBeUndefined();
      expect(cache.get("default", "newcomer")).toBeDefined();
    });
    expect(events).toEqual(["add:doomed", "delete:doomed", "add:newcomer"]);
    expect(lifecycle).toContain("restart");
  });

  it("relists after 410 Gone without a restart, deleting what vanished meanwhile", async () => {
    await cluster.createWidget("default", "doomed");
    const realList = makeListFunction(cluster.kubeConfig, WIDGETS);
    let lists = 0;
    const cache = startInformer({
      // After the first list, change the world and compact history: the watch from the listed
      // resourceVersion is now expired and the server answers 410 Gone.
      listFunction: async () => {
        const list = await realList();
        if (++lists === 1) {
          await cluster.deleteWidget("default", "doomed");
          cluster.double.faults.compact();
        }
        return list;
      },
    });
    await eventually(() => expect(lists).toBe(2));
    await eventually(() => expect(cache.get("default", "doomed")).toBeUndefined());
    expect(events).toEqual(["add:doomed", "delete:doomed"]);
    expect(lifecycle).not.toContain("restart");
    expect(lifecycle).not.toContain("error");
  });

  describe("with a view (a shard holds its objects and notes the others)", () => {
    type Widget = { metadata?: { name?: string }; spec?: { size?: number } };
    const retained = new Set<string>();
    const notes: string[] = [];
    // Held: names starting with "own", of size 5 at most, and what is retained; noted: every other one's size.
    const view = {
      keep: (object: Widget) =>
        retained.has(object.metadata?.name ?? "") ||
        ((object.metadata?.name ?? "").startsWith("own") && (object.spec?.size ?? 0) <= 5),
      note: (object: Widget) => ({ size: object.spec?.size ?? 0 }),
    };
    const patch = (name: string, body: object) =>
      cluster.custom.patchNamespacedCustomObject(
        { ...WIDGET_PATH, name, body },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
    function startViewed(): ResilientInformer {
      retained.clear();
      notes.length = 0;
      const cache = startInformer({ view: view as never });
      cache.onNote((event) =>
        notes.push(`${event.type}:${event.name}:${JSON.stringify(event.previous)}>${JSON.stringify(event.note)}`),
      );
      return cache;
    }

    it("holds what it keeps, notes the rest (every key known), and tells each side its own changes", async () => {
      await cluster.createWidget("default", "own-a", { size: 1 });
      await cluster.createWidget("default", "other-b", { size: 1 });
      const cache = startViewed();
      await cache.waitForSync();
      expect(cache.get("default", "own-a")).toBeDefined();
      expect(cache.get("default", "other-b")).toBeUndefined();
      expect(cache.noteOf("default", "other-b")).toEqual({ size: 1 });
      expect(cache.keys().sort()).toEqual(["default/other-b", "default/own-a"]);
      expect(cache.sizes()).toEqual({ held: 1, noted: 1 });

      await patch("other-b", { spec: { size: 2 } });
      await eventually(() => expect(cache.noteOf("default", "other-b")).toEqual({ size: 2 }));
      // Held now (another object refers to it): read again, held, no longer noted.
      retained.add("other-b");
      await cache.recheck("default", "other-b");
      const specOf = (name: string) => (cache.get("default", name) as Widget | undefined)?.spec;
      expect(specOf("other-b")).toEqual({ size: 2 });
      expect(cache.noteOf("default", "other-b")).toBeUndefined();
      await patch("other-b", { spec: { size: 3 } });
      await eventually(() => expect(specOf("other-b")).toEqual({ size: 3 }));
      // A held object the view stops keeping is dropped and noted.
      await patch("own-a", { spec: { size: 9 } });
      await eventually(() => expect(cache.noteOf("default", "own-a")).toEqual({ size: 9 }));
      expect(cache.get("default", "own-a")).toBeUndefined();
      await cluster.deleteWidget("default", "own-a");
      await eventually(() => expect(cache.keys()).toEqual(["default/other-b"]));
      expect(events).toEqual(["add:own-a", "add:other-b", "update:other-b", "delete:own-a"]);
      expect(notes).toEqual([
        'add:other-b:undefined>{"size":1}',
        'update:other-b:{"size":1}>{"size":2}',
        'delete:other-b:{"size":2}>undefined',
        'add:own-a:undefined>{"size":9}',
        'delete:own-a:{"size":9}>undefined',
      ]);
    });

    it("after a restart, reports what was deleted meanwhile, held or noted, and nothing else", async () => {
      await cluster.createWidget("default", "own-kept", { size: 1 });
      await cluster.createWidget("default", "own-doomed", { size: 1 });
      await cluster.createWidget("default", "other-doomed", { size: 1 });
      await cluster.createWidget("default", "other-kept", { size: 1 });
      const cache = startViewed();
      await cache.waitForSync();
      cluster.double.faults.failNext(3, 503, { path: "v1/widgets" });
      cluster.double.faults.dropWatches();
      await cluster.deleteWidget("default", "own-doomed");
      await cluster.deleteWidget("default", "other-doomed");
      await eventually(() => expect(cache.keys().sort()).toEqual(["default/other-kept", "default/own-kept"]));
      expect(events).toEqual(["add:own-doomed", "add:own-kept", "delete:own-doomed"]);
      expect(notes.filter((note) => note.startsWith("delete"))).toEqual(['delete:other-doomed:{"size":1}>undefined']);
      expect(cache.get("default", "own-kept")).toBeDefined();
    });
  });

  it("restarts a stale watch that stopped delivering anything", async () => {
    const cache = startInformer({ staleAfterMs: 300, staleCheckIntervalMs: 50, watchTimeoutSeconds: 3600 });
    await cache.waitForSync();
    // Nothing happens on a quiet resource without bookmarks: the watchdog must relist.
    await eventually(() => expect(lifecycle).toContain("restart"), 3000);
    await cluster.createWidget("default", "after-restart");
    await eventually(() => expect(cache.get("default", "after-restart")).toBeDefined());
  });

  it("asks for bookmarks, which keep a quiet watch from looking stale", async () => {
    await cluster.double.close();
    cluster = await startTestCluster({ bookmarkIntervalMs: 50 });
    const cache = startInformer({ staleAfterMs: 400, staleCheckIntervalMs: 50, watchTimeoutSeconds: 3600 });
    await cache.waitForSync();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(lifecycle).not.toContain("restart");
  });

  it("does not restart after its own stop", async () => {
    const cache = startInformer();
    await cache.waitForSync();
    await cache.stop();
    informer = undefined;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(lifecycle).not.toContain("restart");
    await cluster.createWidget("default", "unseen");
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(cache.get("default", "unseen")).toBeUndefined();
  });

  it("survives a handler that throws", async () => {
    const cache = startInformer();
    cache.on(() => {
      throw new Error("bad handler");
    });
    await cache.waitForSync();
    await cluster.createWidget("default", "x");
    await cluster.createWidget("default", "y");
    await eventually(() => expect(events).toEqual(["add:x", "add:y"]));
  });

  it("watches only its namespace", async () => {
    await cluster.createNamespace("team-a");
    await cluster.createWidget("team-a", "mine");
    await cluster.createWidget("default", "not-mine");
    const cache = startInformer({ namespace: "team-a" });
    await cache.waitForSync();
    expect(cache.list().map((object) => object.metadata?.name)).toEqual(["mine"]);
  });
});

describe("shareUnchanged", () => {
  it("takes every equal top-level part but metadata from the previous version and interns the rest", () => {
    const interner = new StringInterner();
    const previous = { kind: "Widget", metadata: { name: "w" }, spec: { size: 1 }, status: { phase: "Ready" } };
    const next = {
      kind: "Widget",
      metadata: { name: "w" },
      spec: { size: 1 },
      status: { phase: "Gone" },
      data: { key: "value" },
    };
    const status = next.status;
    shareUnchanged(next, previous, interner);
    expect(next.spec).toBe(previous.spec);
    expect(next.metadata).not.toBe(previous.metadata);
    expect(next.status).toBe(status);
    expect(next.data).toEqual({ key: "value" });
    expect(interner.size).toBeGreaterThanOrEqual(4); // "Widget", "w", "Gone", "value"
  });
});
