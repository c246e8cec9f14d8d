// The GpuVmPool CRD as an API server applies it (through the Kubernetes API test double, which runs the CEL rules
// and defaults of crds/): defaults, the rules that keep a pool workable, and the scale subresource.
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningKubeDouble, startKubeDouble } from "../../src/kube-double/index.ts";

const CRD_DIR = fileURLToPath(new URL("../../crds", import.meta.url));
const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFJd4knmLnu7vb1EZH4MrFswCzeoXJt+H962yEUHk+WU me@example.com";

let double: RunningKubeDouble;
const pools = () => `${double.url}/apis/gpucloud.dev/v1alpha1/namespaces/default/gpuvmpools`;

async function create(name: string, spec: Record<string, unknown>) {
  // As kubectl apply sends it: unknown fields are refused, not pruned.
  const response = await fetch(`${pools()}?fieldValidation=Strict`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ apiVersion: "gpucloud.dev/v1alpha1", kind: "GpuVmPool", metadata: { name }, spec }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

function pool(extra: Record<string, unknown> = {}, template: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    template: { spec: { type: "a100.1x", sshPublicKey: KEY }, ...template },
    placement: { locations: ["us-east1-a", "eu-iceland1-a"] },
    ...extra,
  };
}

beforeAll(async () => {
  double = await startKubeDouble({ crdDir: CRD_DIR });
});
afterAll(async () => {
  await double.close();
});

describe("the GpuVmPool CRD", () => {
  it("defaults one replica, Spread, RollingReplace 1/0, Delete, and the template's GpuVm defaults", async () => {
    const created = await create("defaults", pool());
    expect(created.status).toBe(201);
    expect(created.body.spec).toMatchObject({
      replicas: 1,
      placement: { strategy: "Spread" },
      updateStrategy: { type: "RollingReplace", maxUnavailable: 1, maxSurge: 0 },
      deletionPolicy: "Delete",
      persistentDiskPolicy: "Delete",
      template: {
        spec: { powerState: "Running", deletionPolicy: "Delete", credentialsRef: { name: "gpucloud-credentials" } },
      },
    });
  });

  it.each([
    ["no SSH key", pool({}, { spec: { type: "a100.1x" } }), "set sshPublicKey or sshPublicKeySecretRef"],
    [
      "both budgets 0",
      pool({ updateStrategy: { maxUnavailable: 0, maxSurge: 0 } }),
      "maxUnavailable and maxSurge cannot both be 0",
    ],
    [
      "a label of the pool's own",
      pool({}, { metadata: { labels: { "gpucloud.dev/pool-revision": "x" } } }),
      "labels starting with gpucloud.dev/pool are set by the pool",
    ],
    [
      "a location in the template",
      pool({}, { spec: { type: "a100.1x", sshPublicKey: KEY, location: "x" } }),
      "unknown field",
    ],
    ["a negative replica count", pool({ replicas: -1 }), "spec.replicas"],
  ])("refuses %s", async (_label, spec, message) => {
    const created = await create(`bad-${Math.random().toString(36).slice(2, 8)}`, spec);
    expect([400, 422]).toContain(created.status);
    expect(JSON.stringify(created.body)).toContain(message);
  });

  it("serves /scale from spec.replicas, status.replicas and status.selector", async () => {
    await create("scaled", pool({ replicas: 3 }));
    const scale = (await (await fetch(`${pools()}/scaled/scale`)).json()) as Record<string, unknown>;
    expect(scale).toMatchObject({
      kind: "Scale",
      apiVersion: "autoscaling/v1",
      spec: { replicas: 3 },
      status: { replicas: 0 },
    });
  });
});
