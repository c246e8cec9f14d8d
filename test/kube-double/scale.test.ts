// The scale subresource of custom resources, as kube-apiserver serves it: discovery names `<plural>/scale` as an
// autoscaling/v1 Scale (kubectl scale and the HorizontalPodAutoscaler look it up there), GET builds the Scale from
// the CRD's paths, PUT and PATCH change only the spec replicas field through the object's own validation.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningKubeDouble, startKubeDouble } from "../../src/kube-double/index.ts";
import { kubectlWith } from "./helpers.ts";

const CRD = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "crews.example.dev" },
  spec: {
    group: "example.dev",
    scope: "Namespaced",
    names: { plural: "crews", singular: "crew", kind: "Crew", listKind: "CrewList", shortNames: ["crw"] },
    versions: [
      {
        name: "v1",
        served: true,
        storage: true,
        subresources: {
          status: {},
          scale: {
            specReplicasPath: ".spec.replicas",
            statusReplicasPath: ".status.replicas",
            labelSelectorPath: ".status.selector",
          },
        },
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: {
              spec: {
                type: "object",
                properties: {
                  replicas: { type: "integer", minimum: 0, maximum: 10 },
                  role: { type: "string" },
                },
              },
              status: {
                type: "object",
                properties: { replicas: { type: "integer" }, selector: { type: "string" } },
              },
            },
          },
        },
      },
    ],
  },
};

let double: RunningKubeDouble;
let directory: string;
const base = () => `${double.url}/apis/example.dev/v1/namespaces/default/crews`;
const kubectl = (...args: string[]): Promise<string> => kubectlWith(join(directory, "kubeconfig"))(...args);

async function call(method: string, path: string, body?: unknown, contentType = "application/json") {
  const response = await fetch(`${base()}${path}`, {
    method,
    ...(body === undefined
      ? {}
      : { body: typeof body === "string" ? body : JSON.stringify(body), headers: { "content-type": contentType } }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function createCrew(name: string, spec: Record<string, unknown>): Promise<void> {
  const created = await call("POST", "", { apiVersion: "example.dev/v1", kind: "Crew", metadata: { name }, spec });
  expect(created.status).toBe(201);
}

beforeAll(async () => {
  double = await startKubeDouble({ crds: [CRD] });
  directory = await mkdtemp(join(tmpdir(), "kube-double-scale-"));
  await double.writeKubeconfig(join(directory, "kubeconfig"));
});
afterAll(async () => {
  await double.close();
  await rm(directory, { recursive: true, force: true });
});

describe("the scale subresource", () => {
  it("is listed in discovery as an autoscaling/v1 Scale", async () => {
    const list = (await (await fetch(`${double.url}/apis/example.dev/v1`)).json()) as {
      resources: Record<string, unknown>[];
    };
    expect(list.resources.find((resource) => resource.name === "crews/scale")).toEqual({
      name: "crews/scale",
      singularName: "",
      namespaced: true,
      group: "autoscaling",
      version: "v1",
      kind: "Scale",
      verbs: ["get", "patch", "update"],
    });
  });

  it("answers GET with the Scale built from the CRD's paths (status replicas 0 and no selector when absent)", async () => {
    await createCrew("alpha", { replicas: 2, role: "train" });
    const fresh = await call("GET", "/alpha/scale");
    expect(fresh.status).toBe(200);
    expect(fresh.body).toMatchObject({
      kind: "Scale",
      apiVersion: "autoscaling/v1",
      metadata: { name: "alpha", namespace: "default" },
      spec: { replicas: 2 },
      status: { replicas: 0 },
    });
    expect(fresh.body.status).not.toHaveProperty("selector");
    const crew = await call("GET", "/alpha");
    expect(fresh.body.metadata).toMatchObject({
      uid: (crew.body.metadata as { uid: string }).uid,
      resourceVersion: (crew.body.metadata as { resourceVersion: string }).resourceVersion,
    });
    const status = await call(
      "PATCH",
      "/alpha/status",
      { status: { replicas: 2, selector: "crew=alpha" } },
      "application/merge-patch+json",
    );
    expect(status.status).toBe(200);
    expect((await call("GET", "/alpha/scale")).body.status).toEqual({ replicas: 2, selector: "crew=alpha" });
  });

  it("is what kubectl scale uses: spec.replicas changes, the generation grows, the rest stays", async () => {
    await createCrew("bravo", { replicas: 1, role: "train" });
    expect(await kubectl("scale", "crew/bravo", "--replicas", "5")).toContain("crew.example.dev/bravo scaled");
    const crew = await call("GET", "/bravo");
    expect(crew.body.spec).toEqual({ replicas: 5, role: "train" });
    expect((crew.body.metadata as { generation: number }).generation).toBe(2);
    // --current-replicas reads the Scale first and refuses when it differs.
    await expect(kubectl("scale", "crew/bravo", "--replicas", "3", "--current-replicas", "4")).rejects.toThrow(
      /Expected replicas to be 4, was 5/,
    );
    // --resource-version too (the server's precondition is checked with PUT below).
    await expect(kubectl("scale", "crew/bravo", "--replicas", "3", "--resource-version", "1")).rejects.toThrow(
      /Expected resource version to be 1/,
    );
    expect((await call("GET", "/bravo/scale")).body.spec).toEqual({ replicas: 5 });
  });

  it("checks PUT like an update of the object: resourceVersion precondition and the schema", async () => {
    await createCrew("charlie", { replicas: 1 });
    const scale = (await call("GET", "/charlie/scale")).body;
    const stale = await call("PUT", "/charlie/scale", {
      ...scale,
      metadata: { ...(scale.metadata as object), resourceVersion: "1" },
      spec: { replicas: 2 },
    });
    expect(stale.status).toBe(409);
    expect(stale.body.reason).toBe("Conflict");
    const tooMany = await call("PUT", "/charlie/scale", { ...scale, spec: { replicas: 11 } });
    expect(tooMany.status).toBe(422);
    expect(JSON.stringify(tooMany.body)).toContain("spec.replicas");
    // As kube-apiserver: the schema's cause and the scale subresource's own (field with the CRD's leading dot).
    const negative = await call("PUT", "/charlie/scale", { ...scale, spec: { replicas: -1 } });
    expect(negative.status).toBe(422);
    expect((negative.body.details as { causes: { field: string; message: string }[] }).causes).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          field: ".spec.replicas",
          message: "Invalid value: -1: should be a non-negative integer",
        }),
      ]),
    );
    const wrongKind = await call("PUT", "/charlie/scale", { kind: "Crew", spec: { replicas: 2 } });
    expect(wrongKind.status).toBe(400);
    const put = await call("PUT", "/charlie/scale", { ...scale, spec: { replicas: 3 } });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ kind: "Scale", spec: { replicas: 3 } });
    expect((put.body.metadata as { resourceVersion: string }).resourceVersion).not.toBe(
      (scale.metadata as { resourceVersion: string }).resourceVersion,
    );
  });

  it("takes merge, JSON and strategic merge patches, and refuses other media types", async () => {
    await createCrew("delta", { replicas: 1 });
    const json = await call(
      "PATCH",
      "/delta/scale",
      [{ op: "replace", path: "/spec/replicas", value: 4 }],
      "application/json-patch+json",
    );
    expect(json.body.spec).toEqual({ replicas: 4 });
    const strategic = await call(
      "PATCH",
      "/delta/scale",
      { spec: { replicas: 6 } },
      "application/strategic-merge-patch+json",
    );
    expect(strategic.body.spec).toEqual({ replicas: 6 });
    const apply = await call("PATCH", "/delta/scale", { spec: { replicas: 1 } }, "text/plain");
    expect(apply.status).toBe(415);
    expect((await call("DELETE", "/delta/scale")).status).toBe(405);
  });

  it("answers a missing spec replicas field as the real server does", async () => {
    await createCrew("echo", { role: "idle" });
    const get = await call("GET", "/echo/scale");
    expect(get.status).toBe(500);
    expect(get.body.message).toBe('the spec replicas field ".spec.replicas" does not exist');
    const untouched = await call(
      "PATCH",
      "/echo/scale",
      [{ op: "add", path: "/metadata/labels", value: { a: "b" } }],
      "application/json-patch+json",
    );
    expect(untouched.status).toBe(400);
    expect(untouched.body.message).toBe('the spec replicas field ".spec.replicas" cannot be empty');
    const set = await call("PATCH", "/echo/scale", { spec: { replicas: 2 } }, "application/merge-patch+json");
    expect(set.body.spec).toEqual({ replicas: 2 });
    expect((await call("GET", "/echo")).body.spec).toEqual({ role: "idle", replicas: 2 });
  });

  it("is a 404 for an object that does not exist and for kinds without it", async () => {
    expect((await call("GET", "/nobody/scale")).status).toBe(404);
    const secret = await fetch(`${double.url}/api/v1/namespaces/default/secrets/x/scale`);
    expect(secret.status).toBe(404);
  });
});
