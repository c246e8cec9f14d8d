// The ledger on the Kubernetes API test double, through the runtime's KubeClient (merge patches of the status
// subresource, guarded by resourceVersion): separate processes reserving at once, some SIGKILLed mid-way, never hold
// more than the limit; a hand-edited status is read without a crash and its bad entries dropped at the next write.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BudgetLedger } from "../../src/admission/budget-ledger.ts";
import { budgetOf, kubeBudgetRecords } from "../../src/admission/budget-records.ts";
import { type RunningKubeDouble, startKubeDouble } from "../../src/kube-double/index.ts";
import { KubeClient } from "../../src/runtime/index.ts";
import { ledgerViolations, runReservers } from "./concurrent-reservers.ts";

const CRD_DIR = fileURLToPath(new URL("../../crds", import.meta.url));
let double: RunningKubeDouble;
let dir: string;
let kubeconfig: string;

const budgetsPath = (namespace: string) =>
  `${double.url}/apis/gpucloud.dev/v1alpha1/namespaces/${namespace}/gpubudgets`;

async function createBudget(namespace: string, name: string, spec: Record<string, unknown>): Promise<void> {
  await fetch(`${double.url}/api/v1/namespaces`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } }),
  });
  const response = await fetch(budgetsPath(namespace), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ apiVersion: "gpucloud.dev/v1alpha1", kind: "GpuBudget", metadata: { name }, spec }),
  });
  if (response.status !== 201) throw new Error(`create budget: ${response.status} ${await response.text()}`);
}

async function readBudget(namespace: string, name: string): Promise<unknown> {
  return (await fetch(`${budgetsPath(namespace)}/${name}`)).json();
}

beforeAll(async () => {
  double = await startKubeDouble({ crdDir: CRD_DIR });
  dir = await mkdtemp(path.join(tmpdir(), "budget-records-"));
  kubeconfig = path.join(dir, "kubeconfig");
  await double.writeKubeconfig(kubeconfig);
});
afterAll(async () => {
  await double?.close();
  await rm(dir, { recursive: true, force: true });
});

describe("the budget ledger on the Kubernetes API test double", () => {
  it("four processes reserving at once, one SIGKILLed mid-way: never above the limit, every admission recorded", async () => {
    await createBudget("race", "gpus", { maxHourlyUSD: 22 });
    const run = await runReservers({
      kubeconfig,
      namespace: "race",
      processes: 4,
      perProcess: 10,
      // The first one started dies right after its first admission, its other reservations in flight.
      killAfterAdmitted: { 0: 1 },
      readBudget: () => readBudget("race", "gpus"),
    });
    expect(ledgerViolations(run, 22)).toEqual([]);
    expect(run.killed).toBe(1);
    // What the dead process reserved still counts (nothing is lost, nothing overspent): the limit is full.
    const entries = Object.values(run.budget.entries);
    expect(entries.filter((entry) => entry.name.startsWith("p0-")).length).toBeGreaterThanOrEqual(1);
    expect(entries).toHaveLength(20);
    expect(run.budget.conditions.find((c) => c.type === "Ready")).toMatchObject({
      status: "True",
      reason: "WithinLimit",
    });
  });

  it("reads a hand-edited status without a crash and drops the bad entries at its next write", async () => {
    await createBudget("edited", "gpus", { maxHourlyUSD: 22 });
    const status = {
      entries: {
        good: {
          kind: "GpuVm",
          name: "g",
          amountUSD: 1.1,
          gpus: 1,
          purpose: "Running",
          state: "Used",
          since: "2026-11-28T10:00:00Z",
        },
      },
    };
    const patched = await fetch(`${budgetsPath("edited")}/gpus/status`, {
      method: "PATCH",
      headers: { "content-type": "application/merge-patch+json" },
      body: JSON.stringify({ status }),
    });
    expect(patched.status).toBe(200);
    const raw = (await readBudget("edited", "gpus")) as { status: { entries: Record<string, unknown> } };
    // A broken entry as a careless hand (or an older operator) might leave it: unreadable, not fatal.
    raw.status.entries.broken = { kind: "GpuVm", amountUSD: "lots" };
    const budget = budgetOf(raw);
    expect(budget?.malformed).toBe(1);
    expect(Object.keys(budget?.entries ?? {})).toEqual(["good"]);

    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfig);
    const ledger = new BudgetLedger({ records: kubeBudgetRecords(new KubeClient(kubeConfig)) });
    const subject = { kind: "GpuVm" as const, namespace: "edited", name: "n", uid: "uid-n", priority: 0 };
    expect(await ledger.reserve(subject, { micros: 1_100_000, gpus: 1, gpuModel: "a40", purpose: "Create" })).toEqual({
      type: "admitted",
      budgets: ["gpus"],
    });
    const after = budgetOf(await readBudget("edited", "gpus"));
    expect(Object.keys(after?.entries ?? {}).sort()).toEqual(["good", "uid-n"]);
    expect(after?.conditions.find((c) => c.type === "Ready")?.message).toBe(
      "$2.20/h of $22.00/h used or reserved by 2 objects, 2 GPUs",
    );
  });
});
