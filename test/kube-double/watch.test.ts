// Watches against the double: resume from a resourceVersion, synthetic ADDED, bookmarks, timeouts,
// 410 Gone after compaction, abrupt drops, selector scope and client-node informers.
import {
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
  makeInformer,
  PatchStrategy,
  setHeaderOptions,
  Watch,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningKubeDouble } from "../../src/kube-double/index.ts";
import { GROUP, PLURAL, startWithFixture, VERSION, waitFor, widget } from "./helpers.ts";

let double: RunningKubeDouble;
let kubeConfig: KubeConfig;
let custom: CustomObjectsApi;
const ns = { group: GROUP, version: VERSION, namespace: "default", plural: PLURAL };
const path = `/apis/${GROUP}/${VERSION}/namespaces/default/${PLURAL}`;
const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

interface Seen {
  type: string;
  name: string | undefined;
  resourceVersion: string | undefined;
  code?: number;
}

/** Collect events of one watch until `done` fires. */
function collect(query: Record<string, string | number | boolean>) {
  const events: Seen[] = [];
  let ended: unknown = "open";
  const controller = new Watch(kubeConfig).watch(
    path,
    query,
    (type, object: { metadata?: { name?: string; resourceVersion?: string }; code?: number }) => {
      events.push({
        type,
        name: object.metadata?.name,
        resourceVersion: object.metadata?.resourceVersion,
        ...(object.code === undefined ? {} : { code: object.code }),
      });
    },
    (error: unknown) => {
      ended = error ?? null;
    },
  );
  return { events, ended: () => ended, controller };
}

beforeAll(async () => {
  ({ double, kubeConfig } = await startWithFixture({ bookmarkIntervalMs: 100 }));
  custom = kubeConfig.makeApiClient(CustomObjectsApi);
});
afterAll(() => double.close());

describe("watch", () => {
  it("sends synthetic ADDED for rv 0, then resumes exactly after a given resourceVersion", async () => {
    const first = await custom.createNamespacedCustomObject({ ...ns, body: widget("w-a") });
    const initial = collect({ resourceVersion: "0" });
    await waitFor(() => initial.events.length === 1);
    expect(initial.events[0]).toMatchObject({ type: "ADDED", name: "w-a" });

    await custom.patchNamespacedCustomObject({ ...ns, name: "w-a", body: { spec: { size: 2 } } }, mergePatch);
    await custom.createNamespacedCustomObject({ ...ns, body: widget("w-b") });
    await custom.deleteNamespacedCustomObject({ ...ns, name: "w-b" });
    await waitFor(() => initial.events.length === 4);
    expect(initial.events.map((event) => event.type)).toEqual(["ADDED", "MODIFIED", "ADDED", "DELETED"]);
    (await initial.controller).abort();

    const resumed = collect({ resourceVersion: first.metadata.resourceVersion });
    await waitFor(() => resumed.events.length === 3);
    expect(resumed.events.map((event) => `${event.type} ${event.name}`)).toEqual([
      "MODIFIED w-a",
      "ADDED w-b",
      "DELETED w-b",
    ]);
    const versions = resumed.events.map((event) => Number(event.resourceVersion));
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
    (await resumed.controller).abort();
  });

  it("sends bookmarks when allowed and ends the stream after timeoutSeconds", async () => {
    const list = (await custom.listNamespacedCustomObject(ns)) as { metadata: { resourceVersion: string } };
    const watch = collect({
      allowWatchBookmarks: true,
      timeoutSeconds: 1,
      resourceVersion: list.metadata.resourceVersion,
    });
    await waitFor(() => watch.ended() !== "open", 4000);
    expect(watch.ended()).toBeNull();
    const bookmarks = watch.events.filter((event) => event.type === "BOOKMARK");
    expect(bookmarks.length).toBeGreaterThanOrEqual(2);
    expect(Number(bookmarks.at(-1)?.resourceVersion)).toBeGreaterThan(0);
  });

  it("answers an in-stream 410 Gone after compaction", async () => {
    const created = await custom.createNamespacedCustomObject({ ...ns, body: widget("w-old") });
    await custom.patchNamespacedCustomObject({ ...ns, name: "w-old", body: { spec: { size: 3 } } }, mergePatch);
    double.faults.compact();
    const watch = collect({ resourceVersion: created.metadata.resourceVersion });
    await waitFor(() => watch.ended() !== "open");
    expect(watch.events).toEqual([expect.objectContaining({ type: "ERROR", code: 410 })]);
    expect(double.faults.watchesGone()).toBeGreaterThanOrEqual(1);
  });

  it("ends open watches cleanly on endWatches: the client sees an end, not an error", async () => {
    const watch = collect({});
    await waitFor(() => watch.events.length > 0);
    double.faults.endWatches();
    await waitFor(() => watch.ended() !== "open");
    expect(watch.ended()).toBeNull();
  });

  it("ends open watches abruptly on dropWatches", async () => {
    const watch = collect({});
    await waitFor(() => watch.events.length > 0);
    double.faults.dropWatches();
    await waitFor(() => watch.ended() !== "open");
  });

  it("turns selector scope changes into ADDED and DELETED", async () => {
    await custom.createNamespacedCustomObject({
      ...ns,
      body: widget("w-sel", { size: 1, color: "red" }, { labels: { team: "x" } }),
    });
    const watch = collect({ labelSelector: "team=y" });
    await custom.patchNamespacedCustomObject(
      { ...ns, name: "w-sel", body: { metadata: { labels: { team: "y" } } } },
      mergePatch,
    );
    await custom.patchNamespacedCustomObject(
      { ...ns, name: "w-sel", body: { metadata: { labels: { team: "z" } } } },
      mergePatch,
    );
    await waitFor(() => watch.events.length === 2);
    expect(watch.events.map((event) => `${event.type} ${event.name}`)).toEqual(["ADDED w-sel", "DELETED w-sel"]);
    (await watch.controller).abort();
  });

  it("streams Table rows when asked (kubectl get -w)", async () => {
    const response = await fetch(
      `${double.url}${path}?watch=true&resourceVersion=0&fieldSelector=metadata.name%3Dw-a`,
      {
        headers: { Accept: "application/json;as=Table;v=v1;g=meta.k8s.io,application/json" },
      },
    );
    const reader = response.body?.getReader();
    const chunk = await reader?.read();
    await reader?.cancel();
    const event = JSON.parse(new TextDecoder().decode(chunk?.value).split("\n")[0] ?? "");
    expect(event.type).toBe("ADDED");
    expect(event.object.kind).toBe("Table");
    expect(event.object.columnDefinitions.map((column: { name: string }) => column.name)).toEqual([
      "Name",
      "Size",
      "Ready",
      "Age",
    ]);
    expect(event.object.rows[0].cells.slice(0, 2)).toEqual(["w-a", 2]);
  });
});

describe("client-node informer", () => {
  it("lists, watches and relists after a drop with compaction", async () => {
    const informer = makeInformer<KubernetesObject>(kubeConfig, path, () => custom.listNamespacedCustomObject(ns));
    const added: string[] = [];
    const deleted: string[] = [];
    informer.on("add", (object) => added.push(object.metadata?.name ?? ""));
    informer.on("delete", (object) => deleted.push(object.metadata?.name ?? ""));
    informer.on("error", () => {
      // A dropped watch surfaces as an error; restart like a controller would.
      setTimeout(() => void informer.start(), 50);
    });
    await informer.start();
    await waitFor(() => informer.list("default").length > 0);

    await custom.createNamespacedCustomObject({ ...ns, body: widget("w-inf") });
    await waitFor(() => added.includes("w-inf"));

    double.faults.compact();
    double.faults.dropWatches();
    await custom.deleteNamespacedCustomObject({ ...ns, name: "w-inf" });
    await waitFor(() => deleted.includes("w-inf"), 8000);
    expect(informer.get("w-inf", "default")).toBeUndefined();
    await informer.stop();
  });
});
