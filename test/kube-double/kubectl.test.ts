import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningKubeDouble } from "../../src/kube-double/index.ts";
import { kubectlWith, startWithFixture } from "./helpers.ts";

let double: RunningKubeDouble;
let directory: string;

const kubectl = (...args: string[]): Promise<string> => kubectlWith(join(directory, "kubeconfig"))(...args);

async function kubectlFailure(...args: string[]): Promise<string> {
  try {
    await kubectl(...args);
  } catch (error) {
    return String((error as { stderr?: string }).stderr);
  }
  throw new Error(`kubectl ${args.join(" ")} was expected to fail`);
}

async function manifest(name: string, text: string): Promise<string> {
  const path = join(directory, name);
  await writeFile(path, text);
  return path;
}

const widgetYaml = (name: string, spec: string) => `apiVersion: example.dev/v1
kind: Widget
metadata:
  name: ${name}
  namespace: default
spec:
${spec}
`;

beforeAll(async () => {
  ({ double } = await startWithFixture({ bookmarkIntervalMs: 200 }));
  directory = await mkdtemp(join(tmpdir(), "kube-double-kubectl-"));
  await double.writeKubeconfig(join(directory, "kubeconfig"));
});
afterAll(async () => {
  await double.close();
  await rm(directory, { recursive: true, force: true });
});

describe("kubectl", () => {
  it("applies client-side (create, then update) with strict server-side validation", async () => {
    const file = await manifest("w1.yaml", widgetYaml("w1", "  size: 3\n  color: red\n  region: eu"));
    expect(await kubectl("apply", "-f", file)).toContain("widget.example.dev/w1 created");
    await manifest("w1.yaml", widgetYaml("w1", "  size: 4\n  color: red\n  region: eu"));
    expect(await kubectl("apply", "-f", file)).toContain("widget.example.dev/w1 configured");

    const unknown = await manifest(
      "unknown.yaml",
      widgetYaml("w1", "  size: 4\n  color: red\n  region: eu\n  colour: red"),
    );
    expect(await kubectlFailure("apply", "-f", unknown)).toContain('unknown field "spec.colour"');
    const invalid = await manifest("invalid.yaml", widgetYaml("w9", "  size: 0\n  color: red"));
    expect(await kubectlFailure("apply", "-f", invalid)).toMatch(/spec\.size: Invalid value/);
  });

  it("gets with printer columns, the short name and the category", async () => {
    const table = await kubectl("get", "widgets");
    expect(table.split("\n")[0]).toMatch(/^NAME\s+SIZE\s+READY\s+AGE$/);
    expect(table).toMatch(/w1\s+4\s/);
    expect(await kubectl("get", "wdg", "-o", "name")).toContain("widget.example.dev/w1");
    expect(await kubectl("get", "examples")).toMatch(/w1\s+4/);
  });

  it("applies server-side and reports conflicts between field managers", async () => {
    const file = await manifest("w2.yaml", widgetYaml("w2", "  size: 1\n  pattern: dots"));
    expect(await kubectl("apply", "--server-side", "-f", file)).toContain("serverside-applied");
    await kubectl("patch", "widget", "w2", "--type=merge", "-p", '{"spec":{"size":5}}');
    expect(await kubectlFailure("apply", "--server-side", "-f", file)).toContain('conflict with "kubectl-patch"');
    await kubectl("apply", "--server-side", "--force-conflicts", "-f", file);
    expect(await kubectl("get", "widget", "w2", "-o", "jsonpath={.spec.size}")).toBe("1");
  });

  it("patches with merge and JSON patch types", async () => {
    await kubectl("patch", "widget", "w1", "--type=merge", "-p", '{"spec":{"size":7}}');
    await kubectl(
      "patch",
      "widget",
      "w1",
      "--type=json",
      "-p",
      '[{"op":"test","path":"/spec/size","value":7},{"op":"replace","path":"/spec/size","value":8}]',
    );
    expect(await kubectl("get", "widget", "w1", "-o", "jsonpath={.spec.size} {.metadata.generation}")).toBe("8 4");
  });

  it("explains fields from the OpenAPI v3 document", async () => {
    const text = await kubectl("explain", "widgets.spec.size");
    expect(text).toContain("How big.");
  });

  it("waits for a Ready condition set through the status subresource", async () => {
    const waiting = kubectl("wait", "--for=condition=Ready", "widget/w1", "--timeout=15s");
    await new Promise((resolve) => setTimeout(resolve, 300));
    await kubectl(
      "patch",
      "widget",
      "w1",
      "--subresource=status",
      "--type=merge",
      "-p",
      '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}',
    );
    expect(await waiting).toContain("condition met");
    expect(await kubectl("get", "widget", "w1")).toMatch(/w1\s+8\s+True/);
  });

  it("deletes with a finalizer held, then released", async () => {
    await kubectl("patch", "widget", "w2", "--type=merge", "-p", '{"metadata":{"finalizers":["example.dev/hold"]}}');
    const deleting = kubectl("delete", "widget", "w2", "--timeout=15s");
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await kubectl("get", "widget", "w2", "-o", "jsonpath={.metadata.deletionTimestamp}")).not.toBe("");
    await kubectl("patch", "widget", "w2", "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]');
    expect(await deleting).toContain('"w2" deleted');
    expect(await kubectlFailure("get", "widget", "w2")).toContain("NotFound");
  });

  it("shows Events written through events.k8s.io/v1 in kubectl get events and kubectl describe", async () => {
    const uid = await kubectl("get", "widget", "w1", "-o", "jsonpath={.metadata.uid}");
    const response = await fetch(`${double.url}/apis/events.k8s.io/v1/namespaces/default/events`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        apiVersion: "events.k8s.io/v1",
        kind: "Event",
        metadata: { name: "w1.resized", namespace: "default" },
        eventTime: "2026-11-22T10:00:00.000000Z",
        reportingController: "example.dev/widget-controller",
        reportingInstance: "widget-controller-0",
        action: "Resize",
        reason: "Resized",
        note: "grew to 8",
        type: "Normal",
        regarding: { apiVersion: "example.dev/v1", kind: "Widget", name: "w1", namespace: "default", uid },
      }),
    });
    expect(response.status).toBe(201);
    const core = JSON.parse(await kubectl("get", "events", "-n", "default", "-o", "json")) as {
      items: Record<string, unknown>[];
    };
    expect(core.items.find((event) => event.reason === "Resized")).toMatchObject({
      apiVersion: "v1",
      kind: "Event",
      involvedObject: { kind: "Widget", name: "w1", uid },
      message: "grew to 8",
      reportingComponent: "example.dev/widget-controller",
    });
    const described = await kubectl("describe", "widget", "w1");
    expect(described).toMatch(/Events:\s+Type\s+Reason\s+Age\s+From\s+Message/);
    expect(described).toMatch(/Normal\s+Resized\s+.*grew to 8/);
    // And the other way round: events.k8s.io/v1 serves it with its own field names.
    const modern = JSON.parse(
      await kubectl("get", "events.v1.events.k8s.io", "w1.resized", "-n", "default", "-o", "json"),
    ) as Record<string, unknown>;
    expect(modern).toMatchObject({ apiVersion: "events.k8s.io/v1", regarding: { name: "w1" }, note: "grew to 8" });
    expect(modern.involvedObject).toBeUndefined();
  });

  it("creates namespaces and ConfigMaps and deletes them with -f", async () => {
    const file = await manifest(
      "cm.yaml",
      "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: team-a\ndata:\n  a: '1'\n",
    );
    expect(await kubectl("apply", "-f", file)).toContain("configmap/cfg created");
    expect(await kubectl("get", "configmaps", "-n", "team-a", "-o", "name")).toBe("configmap/cfg\n");
    const deleted = await kubectl("delete", "-f", file);
    expect(deleted).toContain('namespace "team-a" deleted');
    expect(deleted).toContain('configmap "cfg" deleted');
  });

  it("creates built-in objects through kubectl's protobuf clients", async () => {
    await kubectl("create", "namespace", "team-b");
    await kubectl("create", "secret", "generic", "creds", "-n", "team-b", "--from-literal=apiKey=k1");
    await kubectl("create", "configmap", "conf", "-n", "team-b", "--from-literal=a=1", "--from-literal=b=2");
    expect(await kubectl("get", "secret", "creds", "-n", "team-b", "-o", "jsonpath={.data.apiKey} {.type}")).toBe(
      `${Buffer.from("k1").toString("base64")} Opaque`,
    );
    expect(await kubectl("get", "configmaps", "-n", "team-b")).toMatch(/conf\s+2\s/);
    expect(await kubectlFailure("delete", "namespace", "default")).toContain("may not be deleted");
  });
});
