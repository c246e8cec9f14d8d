// @kubernetes/client-node 2 against the double: CRUD, conflicts, generation, status subresource,
// finalizers, validation and selectors.
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  V1MicroTime,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningKubeDouble } from "../../src/kube-double/index.ts";
import { GROUP, PLURAL, rejectionOf, startWithFixture, statusOf, VERSION, widget } from "./helpers.ts";

let double: RunningKubeDouble;
let kubeConfig: KubeConfig;
let core: CoreV1Api;
let custom: CustomObjectsApi;
const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const ns = { group: GROUP, version: VERSION, namespace: "default", plural: PLURAL };

beforeAll(async () => {
  ({ double, kubeConfig } = await startWithFixture());
  core = kubeConfig.makeApiClient(CoreV1Api);
  custom = kubeConfig.makeApiClient(CustomObjectsApi);
});
afterAll(() => double.close());

describe("core resources", () => {
  it("creates, reads, lists and updates ConfigMaps with resourceVersion preconditions", async () => {
    const created = await core.createNamespacedConfigMap({
      namespace: "default",
      body: { metadata: { name: "settings", labels: { tier: "a" } }, data: { x: "1" } },
    });
    expect(created.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.metadata?.creationTimestamp).toBeInstanceOf(Date);
    const rv = created.metadata?.resourceVersion ?? "";
    expect(Number(rv)).toBeGreaterThan(0);

    const updated = await core.replaceNamespacedConfigMap({
      name: "settings",
      namespace: "default",
      body: { ...created, data: { x: "2" } },
    });
    expect(Number(updated.metadata?.resourceVersion)).toBeGreaterThan(Number(rv));

    const stale = statusOf(
      await rejectionOf(
        core.replaceNamespacedConfigMap({
          name: "settings",
          namespace: "default",
          body: { ...created, data: { x: "3" } },
        }),
      ),
    );
    expect(stale).toMatchObject({ code: 409, reason: "Conflict" });

    const duplicate = statusOf(
      await rejectionOf(
        core.createNamespacedConfigMap({ namespace: "default", body: { metadata: { name: "settings" } } }),
      ),
    );
    expect(duplicate).toMatchObject({ code: 409, reason: "AlreadyExists" });

    const missing = statusOf(await rejectionOf(core.readNamespacedConfigMap({ name: "nope", namespace: "default" })));
    expect(missing).toMatchObject({ code: 404, reason: "NotFound", message: 'configmaps "nope" not found' });
  });

  it("refuses objects in a namespace that does not exist and names with bad characters", async () => {
    expect(
      statusOf(
        await rejectionOf(core.createNamespacedSecret({ namespace: "ghost", body: { metadata: { name: "s" } } })),
      ),
    ).toMatchObject({ code: 404 });
    const bad = statusOf(
      await rejectionOf(
        core.createNamespacedSecret({ namespace: "default", body: { metadata: { name: "Bad_Name" } } }),
      ),
    );
    expect(bad.code).toBe(422);
    expect(bad.details?.causes?.[0]?.field).toBe("metadata.name");
  });

  it("filters lists with label and field selectors and pages with limit/continue", async () => {
    await core.createNamespace({ body: { metadata: { name: "paging" } } });
    for (const [index, tier] of ["web", "web", "db", "cache"].entries()) {
      await core.createNamespacedConfigMap({
        namespace: "paging",
        body: { metadata: { name: `cm-${index}`, labels: { tier } } },
      });
    }
    const names = async (labelSelector?: string, fieldSelector?: string) =>
      (
        await core.listNamespacedConfigMap({
          namespace: "paging",
          ...(labelSelector ? { labelSelector } : {}),
          ...(fieldSelector ? { fieldSelector } : {}),
        })
      ).items.map((item) => item.metadata?.name);
    expect(await names("tier=web")).toEqual(["cm-0", "cm-1"]);
    expect(await names("tier==db")).toEqual(["cm-2"]);
    expect(await names("tier!=web")).toEqual(["cm-2", "cm-3"]);
    expect(await names("tier in (db, cache)")).toEqual(["cm-2", "cm-3"]);
    expect(await names("tier notin (db,cache)")).toEqual(["cm-0", "cm-1"]);
    expect(await names("tier")).toHaveLength(4);
    expect(await names("!tier")).toEqual([]);
    expect(await names(undefined, "metadata.name=cm-3")).toEqual(["cm-3"]);
    expect(await names(undefined, "metadata.namespace!=paging")).toEqual([]);

    const first = await core.listNamespacedConfigMap({ namespace: "paging", limit: 3 });
    expect(first.items).toHaveLength(3);
    expect(first.metadata?.remainingItemCount).toBe(1);
    const second = await core.listNamespacedConfigMap({
      namespace: "paging",
      limit: 3,
      _continue: first.metadata?._continue ?? "",
    });
    expect(second.items.map((item) => item.metadata?.name)).toEqual(["cm-3"]);
    expect(second.metadata?._continue).toBeUndefined();

    await core.deleteCollectionNamespacedConfigMap({ namespace: "paging", labelSelector: "tier=web" });
    expect(await names()).toEqual(["cm-2", "cm-3"]);
    expect(
      statusOf(await rejectionOf(core.listNamespacedConfigMap({ namespace: "paging", labelSelector: "tier in (" }))),
    ).toMatchObject({ code: 400 });
  });

  it("stores Leases with MicroTime and refuses millisecond times like the real server", async () => {
    const coordination = kubeConfig.makeApiClient(CoordinationV1Api);
    const renewTime = new V1MicroTime("2026-11-21T00:00:00.123Z");
    const lease = await coordination.createNamespacedLease({
      namespace: "default",
      body: { metadata: { name: "leader" }, spec: { holderIdentity: "me", leaseDurationSeconds: 15, renewTime } },
    });
    expect(lease.spec?.holderIdentity).toBe("me");
    const raw = (await (
      await fetch(`${double.url}/apis/coordination.k8s.io/v1/namespaces/default/leases/leader`)
    ).json()) as { spec: { renewTime: string } };
    expect(raw.spec.renewTime).toBe("2026-11-21T00:00:00.123000Z");
    const milliseconds = statusOf(
      await rejectionOf(
        coordination.createNamespacedLease({
          namespace: "default",
          body: { metadata: { name: "ms" }, spec: { renewTime: new Date() } },
        }),
      ),
    );
    expect(milliseconds).toMatchObject({ code: 400, reason: "BadRequest" });
  });
});

describe("custom resources", () => {
  it("defaults, prunes unknown fields and sets generation 1", async () => {
    const created = await custom.createNamespacedCustomObject({
      ...ns,
      body: { ...widget("defaults"), spec: { size: 2, color: "blue", unknownField: true } },
    });
    expect(created.spec).toEqual({ size: 2, color: "blue", mode: "fast" });
    expect(created.metadata.generation).toBe(1);
  });

  it("answers 422 Invalid naming each failing field, including CEL rules", async () => {
    const tooSmall = statusOf(
      await rejectionOf(
        custom.createNamespacedCustomObject({ ...ns, body: widget("bad", { size: 0, color: "green" }) }),
      ),
    );
    expect(tooSmall).toMatchObject({ code: 422, reason: "Invalid" });
    // An unsupported value keeps the CEL rules from running; the API server says so in a cause of its own.
    expect(tooSmall.details?.causes?.map((cause) => cause.field).sort()).toEqual(["<nil>", "spec.color", "spec.size"]);

    const missing = statusOf(
      await rejectionOf(custom.createNamespacedCustomObject({ ...ns, body: widget("bad", { color: "red" }) })),
    );
    expect(missing.details?.causes).toEqual([
      expect.objectContaining({ field: "spec.size", message: "Required value" }),
      expect.objectContaining({
        field: "<nil>",
        message: expect.stringContaining("some validation rules were not checked"),
      }),
    ]);

    const bothSet = statusOf(
      await rejectionOf(
        custom.createNamespacedCustomObject({ ...ns, body: widget("bad", { size: 1, color: "red", pattern: "dots" }) }),
      ),
    );
    expect(bothSet.details?.causes?.[0]).toMatchObject({
      field: "spec",
      message: expect.stringContaining("exactly one of color or pattern"),
    });

    await custom.createNamespacedCustomObject({
      ...ns,
      body: widget("immutable", { size: 1, color: "red", region: "eu" }),
    });
    const moved = statusOf(
      await rejectionOf(
        custom.patchNamespacedCustomObject({ ...ns, name: "immutable", body: { spec: { region: "us" } } }, mergePatch),
      ),
    );
    expect(moved.details?.causes?.[0]).toMatchObject({
      field: "spec.region",
      message: expect.stringContaining("region is immutable"),
    });
    const sameRegion = await custom.patchNamespacedCustomObject(
      { ...ns, name: "immutable", body: { spec: { size: 4 } } },
      mergePatch,
    );
    expect(sameRegion.spec.size).toBe(4);
  });

  it("bumps generation on spec changes only; the status subresource is separate", async () => {
    const created = await custom.createNamespacedCustomObject({
      ...ns,
      body: { ...widget("gen"), status: { observedGeneration: 99 } },
    });
    expect(created.status).toBeUndefined();

    const labelled = await custom.patchNamespacedCustomObject(
      { ...ns, name: "gen", body: { metadata: { labels: { a: "b" } } } },
      mergePatch,
    );
    expect(labelled.metadata.generation).toBe(1);
    const withStatus = await custom.patchNamespacedCustomObjectStatus(
      { ...ns, name: "gen", body: { status: { observedGeneration: 1 }, spec: { size: 50 } } },
      mergePatch,
    );
    expect(withStatus.metadata.generation).toBe(1);
    expect(withStatus.spec.size).toBe(1);
    expect(withStatus.status).toEqual({ observedGeneration: 1 });

    const spec = await custom.patchNamespacedCustomObject(
      { ...ns, name: "gen", body: { spec: { size: 7 }, status: { observedGeneration: 5 } } },
      mergePatch,
    );
    expect(spec.metadata.generation).toBe(2);
    expect(spec.status).toEqual({ observedGeneration: 1 });

    const noop = await custom.patchNamespacedCustomObject(
      { ...ns, name: "gen", body: { spec: { size: 7 } } },
      mergePatch,
    );
    expect(noop.metadata.resourceVersion).toBe(spec.metadata.resourceVersion);

    const stale = statusOf(
      await rejectionOf(
        custom.patchNamespacedCustomObject(
          {
            ...ns,
            name: "gen",
            body: { metadata: { resourceVersion: created.metadata.resourceVersion }, spec: { size: 8 } },
          },
          mergePatch,
        ),
      ),
    );
    expect(stale).toMatchObject({ code: 409, reason: "Conflict" });

    const replaceWithoutVersion = statusOf(
      await rejectionOf(custom.replaceNamespacedCustomObject({ ...ns, name: "gen", body: widget("gen") })),
    );
    expect(replaceWithoutVersion.code).toBe(422);
  });

  it("applies JSON patches (with test) and refuses strategic merge for custom resources", async () => {
    await custom.createNamespacedCustomObject({ ...ns, body: widget("jsonpatch") });
    const patched = await custom.patchNamespacedCustomObject({
      ...ns,
      name: "jsonpatch",
      body: [
        { op: "test", path: "/spec/size", value: 1 },
        { op: "replace", path: "/spec/size", value: 3 },
      ],
    });
    expect(patched.spec.size).toBe(3);
    const failed = statusOf(
      await rejectionOf(
        custom.patchNamespacedCustomObject({
          ...ns,
          name: "jsonpatch",
          body: [{ op: "test", path: "/spec/size", value: 1 }],
        }),
      ),
    );
    expect(failed.code).toBe(422);
    const strategic = statusOf(
      await rejectionOf(
        custom.patchNamespacedCustomObject(
          { ...ns, name: "jsonpatch", body: { spec: { size: 2 } } },
          setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch),
        ),
      ),
    );
    expect(strategic.code).toBe(415);
  });

  it("keeps an object with finalizers until the last one is removed", async () => {
    await custom.createNamespacedCustomObject({
      ...ns,
      body: widget("held", { size: 1, color: "red" }, { finalizers: ["example.dev/hold"] }),
    });
    const deleting = await custom.deleteNamespacedCustomObject({
      ...ns,
      name: "held",
      body: { propagationPolicy: "Background" },
    });
    expect(deleting.metadata.deletionTimestamp).toBeDefined();
    const still = await custom.getNamespacedCustomObject({ ...ns, name: "held" });
    expect(still.metadata.finalizers).toEqual(["example.dev/hold"]);

    const addMore = statusOf(
      await rejectionOf(
        custom.patchNamespacedCustomObject(
          { ...ns, name: "held", body: { metadata: { finalizers: ["example.dev/hold", "other/x"] } } },
          mergePatch,
        ),
      ),
    );
    expect(addMore).toMatchObject({ code: 422 });
    expect(addMore.details?.causes?.[0]?.field).toBe("metadata.finalizers");

    await custom.patchNamespacedCustomObject(
      { ...ns, name: "held", body: { metadata: { finalizers: null } } },
      mergePatch,
    );
    expect(statusOf(await rejectionOf(custom.getNamespacedCustomObject({ ...ns, name: "held" })))).toMatchObject({
      code: 404,
    });
  });

  it("generates names from generateName", async () => {
    const created = await custom.createNamespacedCustomObject({
      ...ns,
      body: { ...widget(""), metadata: { generateName: "auto-", namespace: "default" } },
    });
    expect(created.metadata.name).toMatch(/^auto-[a-z0-9]{5}$/);
  });

  it("serves CRDs created through the API", async () => {
    const extensions = `${double.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions`;
    const crd = {
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: "gadgets.example.dev" },
      spec: {
        group: "example.dev",
        scope: "Cluster",
        names: { plural: "gadgets", singular: "gadget", kind: "Gadget" },
        versions: [
          {
            name: "v1",
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: {
                type: "object",
                properties: { spec: { type: "object", properties: { n: { type: "integer" } } } },
              },
            },
          },
        ],
      },
    };
    const response = await fetch(extensions, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(crd),
    });
    expect(response.status).toBe(201);
    const gadget = await custom.createClusterCustomObject({
      group: "example.dev",
      version: "v1",
      plural: "gadgets",
      body: { apiVersion: "example.dev/v1", kind: "Gadget", metadata: { name: "g" }, spec: { n: 1 } },
    });
    expect(gadget.metadata.namespace).toBeUndefined();
    const invalidCrd = await fetch(extensions, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ...crd, metadata: { name: "x.example.dev" }, spec: { ...crd.spec, scope: "Nowhere" } }),
    });
    expect(invalidCrd.status).toBe(422);
    await fetch(`${extensions}/gadgets.example.dev`, { method: "DELETE" });
    expect((await fetch(`${double.url}/apis/example.dev/v1/gadgets`)).status).toBe(404);
  });
});
