// The GpuBudget CRD as an API server applies it (the Kubernetes API test double runs the CEL rules of crds/) and
// its zod twin: a limit is required, selectors are Kubernetes selectors, GPU limits name known models; the
// priority of GpuVms and pool templates is bounded.
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GpuBudgetSpec, GpuBudgetStatus } from "../../src/api/gpu-budget.ts";
import { GpuVmSpec } from "../../src/api/gpu-vm.ts";
import { PoolTemplateSpec } from "../../src/api/gpu-vm-pool.ts";
import { type RunningKubeDouble, startKubeDouble } from "../../src/kube-double/index.ts";

const CRD_DIR = fileURLToPath(new URL("../../crds", import.meta.url));
const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFJd4knmLnu7vb1EZH4MrFswCzeoXJt+H962yEUHk+WU me@example.com";

let double: RunningKubeDouble;

async function create(plural: string, kind: string, name: string, spec: Record<string, unknown>) {
  const response = await fetch(
    `${double.url}/apis/gpucloud.dev/v1alpha1/namespaces/default/${plural}?fieldValidation=Strict`,
    {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ apiVersion: "gpucloud.dev/v1alpha1", kind, metadata: { name }, spec }),
    },
  );
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const budget = (name: string, spec: Record<string, unknown>) => create("gpubudgets", "GpuBudget", name, spec);

beforeAll(async () => {
  double = await startKubeDouble({ crdDir: CRD_DIR });
});
afterAll(async () => {
  await double.close();
});

describe("the GpuBudget CRD", () => {
  it("takes a limit alone, and a full one with GPU limits, a selector and a priority cap", async () => {
    expect((await budget("plain", { maxHourlyUSD: 22 })).status).toBe(201);
    const full = {
      maxHourlyUSD: 100.5,
      maxGpus: { total: 16, byModel: { "a100-80gb": 8, a40: 16 } },
      selector: {
        matchLabels: { "example.com/team": "vision" },
        matchExpressions: [
          { key: "tier", operator: "In", values: ["batch", "dev"] },
          { key: "gpucloud.dev/pool", operator: "Exists" },
        ],
      },
      maxPriority: 100,
    };
    const created = await budget("full", full);
    expect(created.status).toBe(201);
    expect(created.body.spec).toEqual(full);
    expect(GpuBudgetSpec.parse(full)).toEqual(full);
  });

  it.each([
    ["no limit", {}, "maxHourlyUSD"],
    ["a negative limit", { maxHourlyUSD: -1 }, "maxHourlyUSD"],
    [
      "an unknown GPU model",
      { maxHourlyUSD: 1, maxGpus: { byModel: { h100: 8 } } },
      "keys must be GPU models (VM type families): a40, a100, a100-80gb, l40s-48gb",
    ],
    [
      "In without values",
      { maxHourlyUSD: 1, selector: { matchExpressions: [{ key: "team", operator: "In" }] } },
      "In and NotIn need values; Exists and DoesNotExist take none",
    ],
    [
      "Exists with values",
      { maxHourlyUSD: 1, selector: { matchExpressions: [{ key: "team", operator: "Exists", values: ["a"] }] } },
      "In and NotIn need values; Exists and DoesNotExist take none",
    ],
    [
      "a label key that is not one",
      { maxHourlyUSD: 1, selector: { matchLabels: { "team a": "x" } } },
      "keys must be a label key such as team or example.com/team",
    ],
    [
      "a label value that is not one",
      { maxHourlyUSD: 1, selector: { matchLabels: { team: "-x" } } },
      "must be a label value",
    ],
    ["a priority cap out of range", { maxHourlyUSD: 1, maxPriority: 5000 }, "maxPriority"],
  ])("refuses %s, saying what to fix (CRD and zod)", async (_label, spec, message) => {
    const answer = await budget(`bad-${Math.random().toString(36).slice(2, 8)}`, spec);
    expect(answer.status).toBe(422);
    expect(String(answer.body.message)).toContain(message);
    const parsed = GpuBudgetSpec.safeParse(spec);
    expect(parsed.success).toBe(false);
  });

  it("holds the ledger and the waiting line as maps by object UID", () => {
    const status = {
      usedUSD: 1.1,
      reservedUSD: 14.48,
      overLimitUSD: 0,
      gpus: 9,
      waitingCount: 1,
      waitingUSD: 1.1,
      entries: {
        "3f1c": {
          kind: "GpuVm",
          name: "a",
          amountUSD: 1.1,
          gpus: 1,
          gpuModel: "a40",
          purpose: "Running",
          state: "Used",
          since: "2026-11-28T10:00:00Z",
        },
      },
      waiting: {
        "9d2e": {
          kind: "GpuVm",
          name: "b",
          amountUSD: 1.1,
          gpus: 1,
          gpuModel: "a40",
          purpose: "Create",
          priority: 0,
          since: "2026-11-28T10:01:00Z",
        },
      },
    };
    expect(GpuBudgetStatus.parse(status)).toEqual(status);
  });
});

describe("priority", () => {
  it("is optional on a GpuVm and a pool template, from -1000 to 1000", async () => {
    const vm = { type: "a40.1x", location: "us-east1-a", sshPublicKey: KEY };
    expect(GpuVmSpec.parse(vm).priority).toBeUndefined();
    expect(GpuVmSpec.parse({ ...vm, priority: -1000 }).priority).toBe(-1000);
    expect(GpuVmSpec.safeParse({ ...vm, priority: 1001 }).success).toBe(false);
    expect(GpuVmSpec.safeParse({ ...vm, priority: 1.5 }).success).toBe(false);
    expect(PoolTemplateSpec.parse({ type: "a40.1x", sshPublicKey: KEY, priority: 10 }).priority).toBe(10);
    expect((await create("gpuvms", "GpuVm", "high", { ...vm, priority: 1000 })).status).toBe(201);
    const refused = await create("gpuvms", "GpuVm", "too-high", { ...vm, priority: 1001 });
    expect(refused.status).toBe(422);
    expect(String(refused.body.message)).toContain("spec.priority");
    const pool = {
      template: { spec: { type: "a40.1x", sshPublicKey: KEY, priority: 5 } },
      placement: { locations: ["us-east1-a"] },
    };
    expect((await create("gpuvmpools", "GpuVmPool", "prioritised", pool)).status).toBe(201);
  });
});
