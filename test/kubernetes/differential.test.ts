// The contract of the Kubernetes API test double: the requests the operator and kubectl send, sent to the double
// and to a real kube-apiserver of the release in test/kubernetes/go.mod, answered alike. Each test runs the same
// steps on both servers and compares what matters: status codes, Status reasons and causes, messages where
// clients show them, and the shape (keys and value types) of the objects. Deliberate limits of the double are
// in docs/kube-double.md; a difference found here is fixed in src/kube-double or documented there.
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { REPO_ROOT } from "../../src/control-plane/binaries.ts";
import {
  type KubeRequest,
  type KubeResponse,
  type KubeTarget,
  kubeRequest,
  kubeWatch,
} from "../../src/control-plane/http.ts";
import { type RunningKubeDouble, startKubeDouble } from "../../src/kube-double/index.ts";
import { isRecord } from "../../src/util/is-record.ts";
import { errorsOf, invalidFixtures } from "../fixtures/invalid-fixtures.ts";
import { adminTarget, createNamespace, deleteNamespace } from "./shared.ts";

type ServerName = "double" | "real";

interface Server {
  name: ServerName;
  target: KubeTarget;
  namespace: string;
}

let double: RunningKubeDouble;
let servers: Server[] = [];

beforeAll(async () => {
  double = await startKubeDouble({ crdDir: path.join(REPO_ROOT, "crds"), bookmarkIntervalMs: 500 });
  const namespace = await createNamespace("differential");
  const doubleTarget: KubeTarget = { url: double.url };
  const created = await kubeRequest(doubleTarget, {
    method: "POST",
    path: "/api/v1/namespaces",
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } },
  });
  expect(created.status).toBe(201);
  servers = [
    { name: "double", target: doubleTarget, namespace },
    { name: "real", target: adminTarget(), namespace },
  ];
});

afterAll(async () => {
  await double?.close();
  const real = servers.find((server) => server.name === "real");
  if (real !== undefined) await deleteNamespace(real.namespace);
});

/** Runs the same steps on both servers, the double first; returns both results. */
async function onBoth<T>(steps: (server: Server) => Promise<T>): Promise<Record<ServerName, T>> {
  const results: Partial<Record<ServerName, T>> = {};
  for (const server of servers) results[server.name] = await steps(server);
  return results as Record<ServerName, T>;
}

/** The double's answer must equal the real one's (printed side by side when not). */
function expectSame<T>(results: Record<ServerName, T>, what: string): void {
  expect(results.double, `${what}: the double answered differently from kube-apiserver`).toEqual(results.real);
}

const DISKS = "/apis/gpucloud.dev/v1alpha1/namespaces";

function disksPath(server: Server, name = "", query = ""): string {
  return `${DISKS}/${server.namespace}/gpudisks${name === "" ? "" : `/${name}`}${query === "" ? "" : `?${query}`}`;
}

function disk(name: string, spec: Record<string, unknown> = {}, labels?: Record<string, string>) {
  return {
    apiVersion: "gpucloud.dev/v1alpha1",
    kind: "GpuDisk",
    metadata: labels === undefined ? { name } : { name, labels },
    spec: { size: "100GiB", location: "us-east1-a", ...spec },
  };
}

/** managedFields as clients read them (the time aside). */
function managedFields(object: unknown): unknown {
  const entries = field(object, "metadata", "managedFields");
  return Array.isArray(entries)
    ? entries.map((entry) => ({
        manager: field(entry, "manager"),
        operation: field(entry, "operation"),
        apiVersion: field(entry, "apiVersion"),
        subresource: field(entry, "subresource"),
        fieldsV1: field(entry, "fieldsV1"),
      }))
    : entries;
}

function send(server: Server, request: KubeRequest): Promise<KubeResponse> {
  return kubeRequest(server.target, request);
}

/** Keys and value types, not values: what a client that parses the answer relies on. */
function shapeOf(value: unknown): unknown {
  if (Array.isArray(value)) return value.length === 0 ? [] : [shapeOf(value[0])];
  if (isRecord(value)) {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, shapeOf(value[key])]),
    );
  }
  return value === null ? "null" : typeof value;
}

function field(value: unknown, ...keys: (string | number)[]): unknown {
  let current = value;
  for (const key of keys) {
    if (Array.isArray(current) && typeof key === "number") current = current[key];
    else if (isRecord(current) && typeof key === "string") current = current[key];
    else return undefined;
  }
  return current;
}

/**
 * A 422's message lists its causes, `Kind "name" is invalid: [a, b]`, in the order kube-apiserver met them: its
 * CEL validator walks an object's properties in Go map order, so two causes come in either order from one run to
 * the next. Listed in sorted order here, when the list is exactly the causes; left as sent otherwise.
 */
function causesInOrder(message: unknown, causes: unknown): unknown {
  if (typeof message !== "string" || !Array.isArray(causes) || causes.length < 2) return message;
  const items = causes.map((cause) => `${String(field(cause, "field"))}: ${String(field(cause, "message"))}`);
  const start = message.indexOf(": [");
  if (start < 0 || !message.endsWith("]")) return message;
  const listed = message.slice(start + 3, -1);
  const exact = items.every((item) => listed.includes(item)) && listed.length === items.join(", ").length;
  return exact ? `${message.slice(0, start)}: [${items.sort().join(", ")}]` : message;
}

/** A Status answer as clients read it: code, reason, message, details (causes sorted by field). */
function statusAnswer(response: KubeResponse, options: { message?: boolean } = {}): unknown {
  const body = response.json;
  const causes = field(body, "details", "causes");
  return {
    http: response.status,
    kind: field(body, "kind"),
    status: field(body, "status"),
    code: field(body, "code"),
    reason: field(body, "reason"),
    ...(options.message === false ? {} : { message: causesInOrder(field(body, "message"), causes) }),
    details: {
      name: field(body, "details", "name"),
      group: field(body, "details", "group"),
      kind: field(body, "details", "kind"),
      causes: Array.isArray(causes)
        ? causes
            .map((cause) => ({ field: field(cause, "field"), reason: field(cause, "reason") }))
            .sort((a, b) => String(a.field).localeCompare(String(b.field)))
        : undefined,
    },
  };
}

function names(list: unknown): unknown {
  const items = field(list, "items");
  return Array.isArray(items) ? items.map((item) => field(item, "metadata", "name")) : items;
}

describe("differential: the double against kube-apiserver", () => {
  it("creates a custom resource with defaults, generation 1 and managedFields", async () => {
    const results = await onBoth(async (server) => {
      const response = await send(server, {
        method: "POST",
        path: disksPath(server, "", "fieldManager=differential"),
        body: disk("alpha", {}, { tier: "a" }),
      });
      const body = response.json;
      return {
        http: response.status,
        shape: shapeOf(body),
        spec: field(body, "spec"),
        generation: field(body, "metadata", "generation"),
        managedFields: managedFields(body),
      };
    });
    expectSame(results, "create");
  });

  it("answers 409 AlreadyExists and 404 NotFound with the same Status", async () => {
    const results = await onBoth(async (server) => {
      const again = await send(server, { method: "POST", path: disksPath(server), body: disk("alpha") });
      const missing = await send(server, { path: disksPath(server, "nothing-here") });
      return { again: statusAnswer(again), missing: statusAnswer(missing) };
    });
    expectSame(results, "409 and 404");
  });

  it("lists with label selectors, field selectors and pages", async () => {
    const results = await onBoth(async (server) => {
      for (const [name, tier] of [
        ["beta", "b"],
        ["gamma", "c"],
        ["delta", "b"],
      ] as const) {
        const created = await send(server, { method: "POST", path: disksPath(server), body: disk(name, {}, { tier }) });
        expect(created.status, created.text).toBe(201);
      }
      const list = (query: string) => send(server, { path: disksPath(server, "", query) });
      const all = await list("");
      const inSet = await list(`labelSelector=${encodeURIComponent("tier in (a,b),tier!=c")}`);
      const byName = await list(`fieldSelector=${encodeURIComponent("metadata.name=gamma")}`);
      const firstPage = await list("limit=2");
      const secondPage = await list(
        `limit=2&continue=${encodeURIComponent(String(field(firstPage.json, "metadata", "continue")))}`,
      );
      const badSelector = await list(`labelSelector=${encodeURIComponent("tier in a")}`);
      return {
        listShape: shapeOf({ ...(all.json as object), items: [] }),
        all: names(all.json),
        inSet: names(inSet.json),
        byName: names(byName.json),
        firstPage: [names(firstPage.json), field(firstPage.json, "metadata", "remainingItemCount")],
        secondPage: [names(secondPage.json), field(secondPage.json, "metadata", "continue")],
        badSelector: statusAnswer(badSelector, { message: false }),
      };
    });
    expectSame(results, "lists");
  });

  it("watches from a resourceVersion: the changes after it, in order", async () => {
    const results = await onBoth(async (server) => {
      const start = await send(server, { path: disksPath(server) });
      const from = String(field(start.json, "metadata", "resourceVersion"));
      await send(server, {
        method: "PATCH",
        path: disksPath(server, "beta"),
        body: { metadata: { labels: { tier: "c" } } },
        contentType: "application/merge-patch+json",
      });
      await send(server, { method: "DELETE", path: disksPath(server, "delta") });
      await send(server, { method: "POST", path: disksPath(server), body: disk("epsilon") });
      const watch = await kubeWatch(server.target, {
        path: disksPath(server, "", `watch=true&resourceVersion=${from}&labelSelector=tier%3Db`),
      });
      const seen: unknown[] = [];
      for (let event = await watch.next(5000); event !== undefined; event = await watch.next(1500)) {
        seen.push([field(event, "type"), field(event, "object", "metadata", "name")]);
      }
      watch.close();
      return { http: watch.status, seen };
    });
    expectSame(results, "watch");
    // beta left the selector's scope (DELETED), delta was deleted; epsilon has no label.
    expect(results.real.seen).toEqual([
      ["DELETED", "beta"],
      ["DELETED", "delta"],
    ]);
  });

  it("answers a watch from a resourceVersion that is gone with an in-stream 410 Expired", async () => {
    // The real server keeps a window of history per resource (its watch cache) and expires what is older; the
    // double expires what is older than its last compaction.
    double.faults.compact();
    const results = await onBoth(async (server) => {
      const watch = await kubeWatch(server.target, { path: disksPath(server, "", "watch=true&resourceVersion=1") });
      const first = await watch.next(5000);
      watch.close();
      const status = field(first, "object");
      return {
        http: watch.status,
        type: field(first, "type"),
        status: [field(status, "kind"), field(status, "code"), field(status, "reason")],
        // "too old resource version: 1 (224)": the numbers are each server's own.
        message: String(field(status, "message")).replace(/\d+/g, "N"),
      };
    });
    expectSame(results, "410");
    expect(results.real.type).toBe("ERROR");
  });

  it("patches status and finalizers with resourceVersion preconditions, and rejects stale ones with 409", async () => {
    const results = await onBoth(async (server) => {
      const current = await send(server, { path: disksPath(server, "alpha") });
      const resourceVersion = field(current.json, "metadata", "resourceVersion");
      const status = await send(server, {
        method: "PATCH",
        path: disksPath(server, "alpha/status"),
        contentType: "application/merge-patch+json",
        body: {
          metadata: { resourceVersion },
          status: {
            observedGeneration: 1,
            conditions: [
              {
                type: "Ready",
                status: "False",
                reason: "Creating",
                message: "m",
                lastTransitionTime: "2026-11-22T10:00:00Z",
                observedGeneration: 1,
              },
            ],
          },
        },
      });
      const stale = await send(server, {
        method: "PATCH",
        path: disksPath(server, "alpha"),
        contentType: "application/merge-patch+json",
        body: { metadata: { resourceVersion, finalizers: ["gpucloud.dev/finalizer"] } },
      });
      const fresh = await send(server, {
        method: "PATCH",
        path: disksPath(server, "alpha"),
        contentType: "application/merge-patch+json",
        body: {
          metadata: {
            resourceVersion: field(status.json, "metadata", "resourceVersion"),
            finalizers: ["gpucloud.dev/finalizer"],
          },
        },
      });
      const spec = await send(server, {
        method: "PATCH",
        path: disksPath(server, "alpha/status"),
        contentType: "application/merge-patch+json",
        body: { spec: { size: "200GiB" } },
      });
      return {
        status: [
          status.status,
          field(status.json, "status", "conditions", 0, "reason"),
          field(status.json, "metadata", "generation"),
        ],
        stale: statusAnswer(stale),
        fresh: [fresh.status, field(fresh.json, "metadata", "finalizers"), field(fresh.json, "metadata", "generation")],
        specThroughStatus: [spec.status, field(spec.json, "spec", "size")],
      };
    });
    expectSame(results, "status and finalizer patches");
  });

  it("applies server-side: creates, reports conflicts between managers, forces", async () => {
    const results = await onBoth(async (server) => {
      const apply = (manager: string, size: string, force = false) =>
        send(server, {
          method: "PATCH",
          path: disksPath(server, "applied", `fieldManager=${manager}${force ? "&force=true" : ""}`),
          contentType: "application/apply-patch+yaml",
          body: JSON.stringify(disk("applied", { size })),
        });
      const created = await apply("ci", "100GiB");
      const otherManager = await apply("someone-else", "200GiB");
      const forced = await apply("someone-else", "300GiB", true);
      const withoutManager = await send(server, {
        method: "PATCH",
        path: disksPath(server, "applied"),
        contentType: "application/apply-patch+yaml",
        body: JSON.stringify(disk("applied")),
      });
      return {
        created: [created.status, field(created.json, "spec", "size"), managedFields(created.json)],
        conflict: statusAnswer(otherManager),
        forced: [forced.status, field(forced.json, "spec", "size"), managedFields(forced.json)],
        withoutManager: statusAnswer(withoutManager),
      };
    });
    expectSame(results, "server-side apply");
  });

  it("serves Tables for kubectl get", async () => {
    const results = await onBoth(async (server) => {
      const table = await send(server, {
        path: disksPath(server, "", "labelSelector=tier%3Da"),
        accept: "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
      });
      const rows = field(table.json, "rows") as unknown[];
      return {
        http: table.status,
        kind: field(table.json, "kind"),
        columns: (field(table.json, "columnDefinitions") as unknown[]).map((column) => [
          field(column, "name"),
          field(column, "type"),
          field(column, "format"),
          field(column, "priority"),
        ]),
        cells: rows.map((row) => (field(row, "cells") as unknown[]).map((cell) => typeof cell)),
        firstCell: field(rows, 0, "cells", 0),
        object: shapeOf(field(rows, 0, "object", "metadata")),
      };
    });
    expectSame(results, "Table");
  });

  it("serves Tables of Events for kubectl get events", async () => {
    const results = await onBoth(async (server) => {
      await send(server, {
        method: "POST",
        path: `/api/v1/namespaces/${server.namespace}/events`,
        body: {
          metadata: { name: "gamma.resized" },
          involvedObject: {
            apiVersion: "gpucloud.dev/v1alpha1",
            kind: "GpuDisk",
            name: "gamma",
            namespace: server.namespace,
          },
          reason: "Resized",
          message: "grew ",
          type: "Normal",
          source: { component: "gpuvm-operator" },
          firstTimestamp: "2026-11-22T10:00:00Z",
          lastTimestamp: "2026-11-22T10:05:00Z",
          count: 2,
        },
      });
      const table = await send(server, {
        path: `/api/v1/namespaces/${server.namespace}/events?fieldSelector=${encodeURIComponent("involvedObject.name=gamma")}`,
        accept: "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
      });
      return {
        http: table.status,
        columns: (field(table.json, "columnDefinitions") as unknown[]).map((column) => [
          field(column, "name"),
          field(column, "priority"),
        ]),
        cells: (field(table.json, "rows", 0, "cells") as unknown[]).slice(1),
      };
    });
    expectSame(results, "Event Table");
  });

  it("rejects invalid fields: strict decoding, schema and CEL rules", async () => {
    const results = await onBoth(async (server) => {
      const unknownField = await send(server, {
        method: "POST",
        path: disksPath(server, "", "fieldValidation=Strict"),
        body: disk("strict", { colour: "red" }),
      });
      const badSize = await send(server, {
        method: "POST",
        path: disksPath(server),
        body: disk("bad", { size: "12 GB" }),
      });
      const location = await send(server, {
        method: "PATCH",
        path: disksPath(server, "alpha"),
        contentType: "application/merge-patch+json",
        body: { spec: { location: "eu-west1-b" } },
      });
      const shrink = await send(server, {
        method: "PATCH",
        path: disksPath(server, "alpha"),
        contentType: "application/merge-patch+json",
        body: { spec: { size: "10GiB" } },
      });
      return {
        unknownField: statusAnswer(unknownField),
        badSize: statusAnswer(badSize, { message: false }),
        location: statusAnswer(location),
        shrink: statusAnswer(shrink),
      };
    });
    expectSame(results, "validation");
  });

  it("refuses every manifest of test/fixtures/invalid/ alike, with the errors its header lists", async () => {
    // The double's validation wording (CEL messages, its IP and CIDR libraries, OpenAPI errors, strict decoding)
    // against kube-apiserver's, one fixture at a time; dryRun so that a fixture that were accepted leaves nothing.
    const fixtures = await invalidFixtures();
    expect(fixtures.length).toBeGreaterThan(15);
    for (const { file, object, collectionPath, expected } of fixtures) {
      const results = await onBoth(async (server) => {
        const refused = await send(server, {
          method: "POST",
          path: `${collectionPath(server.namespace)}?fieldValidation=Strict&dryRun=All`,
          body: { ...object, metadata: { ...object.metadata, namespace: server.namespace } },
        });
        return { answer: statusAnswer(refused), errors: errorsOf(refused.json).sort() };
      });
      expect(results.real.errors, `${file}: kube-apiserver's errors against its '# expect:' lines`).toEqual(
        [...expected].sort(),
      );
      expectSame(results, file);
    }
  });

  it("refuses a bad size on update with one error per mistake: its format, or its meaning", async () => {
    const results = await onBoth(async (server) => {
      const created = await send(server, {
        method: "POST",
        path: disksPath(server),
        body: disk("resized", { size: "2TiB", type: "persistent-ssd" }),
      });
      const resize = async (size: string) =>
        statusAnswer(
          await send(server, {
            method: "PATCH",
            path: disksPath(server, "resized"),
            contentType: "application/merge-patch+json",
            body: { spec: { size } },
          }),
        );
      // Malformed (and larger-looking), smaller, above the type's limit.
      return {
        created: created.status,
        malformed: await resize("20TB"),
        shrink: await resize("1TiB"),
        tooBig: await resize("20TiB"),
      };
    });
    expectSame(results, "update validation");
  });

  it("deletes with a finalizer: deletionTimestamp first, gone when the finalizer goes", async () => {
    const results = await onBoth(async (server) => {
      const deleting = await send(server, { method: "DELETE", path: disksPath(server, "alpha") });
      const held = await send(server, { path: disksPath(server, "alpha") });
      const released = await send(server, {
        method: "PATCH",
        path: disksPath(server, "alpha"),
        contentType: "application/merge-patch+json",
        body: { metadata: { finalizers: null } },
      });
      const gone = await send(server, { path: disksPath(server, "alpha") });
      return {
        deleting: [
          deleting.status,
          field(deleting.json, "kind"),
          typeof field(deleting.json, "metadata", "deletionTimestamp"),
        ],
        held: [held.status, typeof field(held.json, "metadata", "deletionTimestamp")],
        released: [released.status, field(released.json, "metadata", "finalizers")],
        gone: gone.status,
      };
    });
    expectSame(results, "delete with finalizer");
  });

  it("serves an Event written through events.k8s.io/v1 through core/v1, with the field names of each API", async () => {
    const results = await onBoth(async (server) => {
      const created = await send(server, {
        method: "POST",
        path: `/apis/events.k8s.io/v1/namespaces/${server.namespace}/events`,
        body: {
          apiVersion: "events.k8s.io/v1",
          kind: "Event",
          metadata: { name: "beta.created", namespace: server.namespace },
          eventTime: "2026-11-22T10:00:00.000000Z",
          reportingController: "gpucloud.dev/gpuvm-operator",
          reportingInstance: "gpuvm-operator-0",
          action: "Create",
          reason: "Created",
          note: "created in the cloud",
          type: "Normal",
          regarding: {
            apiVersion: "gpucloud.dev/v1alpha1",
            kind: "GpuDisk",
            name: "beta",
            namespace: server.namespace,
          },
        },
      });
      const core = await send(server, {
        path: `/api/v1/namespaces/${server.namespace}/events?fieldSelector=${encodeURIComponent("involvedObject.name=beta")}`,
      });
      const item = field(core.json, "items", 0);
      return {
        created: [created.status, shapeOf(created.json)],
        core: [core.status, names(core.json)],
        coreFields: {
          involvedObject: field(item, "involvedObject", "name"),
          message: field(item, "message"),
          reportingComponent: field(item, "reportingComponent"),
          reportingInstance: field(item, "reportingInstance"),
          action: field(item, "action"),
        },
      };
    });
    expectSame(results, "Events");
  });

  it("fills every kind's printer columns alike: kubectl get gnet, gfw, gdisk, gvm, gpool", async () => {
    // The examples with a status like the operator's (whole and fractional prices, integers, conditions found
    // by type, a missing condition): every cell compared, date cells (ages) by type only.
    const condition = (type: string, status: string, reason: string) => ({
      type,
      status,
      reason,
      message: `${type} is ${status}`,
      lastTransitionTime: "2026-11-22T10:00:00Z",
      observedGeneration: 1,
    });
    const common = {
      observedGeneration: 1,
      conditions: [condition("Ready", "True", "Available"), condition("Synced", "True", "Synced")],
    };
    const statuses: Record<string, Record<string, unknown>> = {
      GpuNetwork: { ...common, id: "net-1" },
      GpuFirewallRule: { ...common, id: "fw-1", state: "ACTIVE", printableProtocols: "tcp,udp" },
      GpuDisk: { ...common, id: "disk-1", printableAttachedTo: "trainer" },
      GpuVm: {
        ...common,
        conditions: [...common.conditions, condition("UpToDate", "False", "Resizing")],
        id: "vm-1",
        location: "us-east1-a",
        printableState: "RUNNING",
        publicIP: "198.18.0.6",
        hourlyPriceUSD: 14.48,
      },
      GpuVmPool: {
        observedGeneration: 1,
        conditions: [condition("Ready", "False", "Scaling")],
        replicas: 2,
        readyReplicas: 1,
        updatedReplicas: 2,
        pendingReplicas: 1,
        currentRevision: "5d8c7f",
        locationSummary: "us-east1-a=1,us-southcentral1-a=1",
        hourlyPriceUSD: 8,
      },
    };
    const examples = await exampleObjects();
    expect(examples.map((object) => object.kind).sort()).toEqual(Object.keys(statuses).sort());
    const results = await onBoth(async (server) => {
      const tables: Record<string, unknown> = {};
      for (const object of examples) {
        const plural = `${object.kind.toLowerCase()}s`;
        const collection = `${DISKS}/${server.namespace}/${plural}`;
        const body = { ...object, metadata: { ...object.metadata, namespace: server.namespace } };
        const created = await send(server, { method: "POST", path: collection, body });
        const patched = await send(server, {
          method: "PATCH",
          path: `${collection}/${object.metadata.name}/status`,
          contentType: "application/merge-patch+json",
          body: { status: statuses[object.kind] },
        });
        const table = await send(server, {
          path: `${collection}?fieldSelector=${encodeURIComponent(`metadata.name=${object.metadata.name}`)}`,
          accept: "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        });
        const columns = (field(table.json, "columnDefinitions") as unknown[]).map((column) => ({
          name: field(column, "name"),
          type: field(column, "type"),
        }));
        const cells = (field(table.json, "rows", 0, "cells") as unknown[]).map((cell, index) =>
          columns[index]?.type === "date" ? typeof cell : cell,
        );
        tables[object.kind] = { created: created.status, patched: patched.status, columns, cells };
      }
      return tables;
    });
    expectSame(results, "printer columns");
  });
});

/** The gpucloud.dev objects of examples/. */
async function exampleObjects(): Promise<{ kind: string; metadata: { name: string } & Record<string, unknown> }[]> {
  const directory = path.join(REPO_ROOT, "examples");
  const objects = [];
  for (const file of (await readdir(directory)).filter((name) => name.endsWith(".yaml")).sort()) {
    for (const document of parseAllDocuments(await readFile(path.join(directory, file), "utf8"))) {
      const object = document.toJSON() as { apiVersion?: string; kind: string; metadata: { name: string } };
      if (object?.apiVersion?.startsWith("gpucloud.dev/")) objects.push(object);
    }
  }
  return objects;
}
