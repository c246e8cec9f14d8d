// The budget ledger on the real kube-apiserver, as the operator's ServiceAccount under deploy/'s RBAC (list budgets,
// patch their /status, nothing else): four processes reserving in one $22 budget at once, one SIGKILLed mid-way,
// never hold more than the limit (the conflicts and their retries are the API server's own here); kubectl shows
// LIMIT, USED, RESERVED, WAITING; a budget lowered below its use holds new spend and is Stalled (kstatus Failed,
// Argo CD Degraded).
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BudgetLedger } from "../../src/admission/budget-ledger.ts";
import { budgetOf, kubeBudgetRecords } from "../../src/admission/budget-records.ts";
import { kubeExpect } from "../../src/control-plane/http.ts";
import { installOperatorIdentity } from "../../src/control-plane/operator-identity.ts";
import { KubeClient } from "../../src/runtime/index.ts";
import { ledgerViolations, runReservers } from "../admission/concurrent-reservers.ts";
import { CREATE_A40 } from "../admission/subjects.ts";
import { argocdHealth, kstatus } from "./peers.ts";
import { adminTarget, createNamespace, deleteNamespace, kubectl, sharedKube } from "./shared.ts";

let namespace = "";
let dir = "";
let operatorKubeconfig = "";

const budgetPath = (name = "") =>
  `/apis/gpucloud.dev/v1alpha1/namespaces/${namespace}/gpubudgets${name === "" ? "" : `/${name}`}`;

async function readBudget(name: string): Promise<unknown> {
  return (await kubeExpect(adminTarget(), { method: "GET", path: budgetPath(name) }, [200])).json;
}

/** A kubeconfig for deploy/'s ServiceAccount: the operator's own rights, not the admin's. */
async function operatorKubeconfigFile(): Promise<string> {
  const account = await installOperatorIdentity(adminTarget());
  const answer = await kubeExpect(
    adminTarget(),
    {
      method: "POST",
      path: `/api/v1/namespaces/${account.namespace}/serviceaccounts/${account.name}/token`,
      body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds: 3600 } },
    },
    [200, 201],
  );
  const token = (answer.json as { status: { token: string } }).status.token;
  const kube = sharedKube();
  const file = path.join(dir, "operator.kubeconfig");
  const yaml = [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    `  - name: real\n    cluster:\n      server: ${kube.url}\n      certificate-authority-data: ${Buffer.from(kube.ca).toString("base64")}`,
    "users:",
    `  - name: operator\n    user:\n      token: ${token}`,
    "contexts:",
    "  - name: operator\n    context:\n      cluster: real\n      user: operator",
    "current-context: operator",
    "",
  ].join("\n");
  await writeFile(file, yaml, { mode: 0o600 });
  return file;
}

beforeAll(async () => {
  namespace = await createNamespace("budgets");
  dir = await mkdtemp(path.join(tmpdir(), "budgets-real-"));
  operatorKubeconfig = await operatorKubeconfigFile();
  await kubeExpect(
    adminTarget(),
    {
      method: "POST",
      path: budgetPath(),
      body: {
        apiVersion: "gpucloud.dev/v1alpha1",
        kind: "GpuBudget",
        metadata: { name: "gpus" },
        spec: { maxHourlyUSD: 22 },
      },
    },
    [201],
  );
});

afterAll(async () => {
  if (namespace !== "") await deleteNamespace(namespace);
  if (dir !== "") await rm(dir, { recursive: true, force: true });
});

describe("budgets on the real kube-apiserver", () => {
  it("four processes reserving at once, one SIGKILLed mid-way, never hold more than the limit", async () => {
    const run = await runReservers({
      kubeconfig: operatorKubeconfig,
      namespace,
      processes: 4,
      perProcess: 10,
      // The first one started dies right after its first admission, its other reservations in flight.
      killAfterAdmitted: { 0: 1 },
      readBudget: () => readBudget("gpus"),
    });
    expect(ledgerViolations(run, 22)).toEqual([]);
    expect(run.killed).toBe(1);
    const entries = Object.values(run.budget.entries);
    expect(entries.filter((entry) => entry.name.startsWith("p0-")).length).toBeGreaterThanOrEqual(1);
    expect(entries).toHaveLength(20);
    console.log(
      `budgets: ${run.answers.size} answers reported, ${run.killed} process SIGKILLed, ` +
        `${Object.keys(run.budget.waiting).length} waiting; the killed one holds ` +
        `${Object.values(run.budget.entries).filter((entry) => entry.name.startsWith("p0-")).length} entries`,
    );
  });

  it("shows LIMIT, USED, RESERVED and WAITING in kubectl get", async () => {
    const table = await kubectl("get", "gbudget", "-n", namespace);
    const [header, row] = table.trim().split("\n");
    expect(header?.split(/\s+/)).toEqual(["NAME", "LIMIT", "USED", "RESERVED", "WAITING", "READY", "REASON", "AGE"]);
    expect(row).toMatch(/^gpus\s+22\s+0\s+22\s+\d+\s+True\s+WithinLimit\s+/);
  });

  it("lowered below its use: holds new spend, says by how much it is over; kstatus Failed, Argo CD Degraded", async () => {
    await kubectl("patch", "gbudget", "gpus", "-n", namespace, "--type", "merge", "-p", '{"spec":{"maxHourlyUSD":11}}');
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(operatorKubeconfig);
    const ledger = new BudgetLedger({ records: kubeBudgetRecords(new KubeClient(kubeConfig)) });
    const subject = { kind: "GpuVm" as const, namespace, name: "late", uid: "uid-late", priority: 0 };
    const answer = await ledger.reserve(subject, CREATE_A40);
    expect(answer.type === "waiting" && answer.message).toMatch(
      /^GpuBudget gpus is over its limit by \$11\.00\/h \(\$22\.00\/h of \$11\.00\/h\): needs \$1\.10\/h/,
    );
    const budget = await readBudget("gpus");
    expect(budgetOf(budget)?.conditions.find((c) => c.type === "Stalled")).toMatchObject({
      status: "True",
      reason: "OverLimit",
    });
    expect((await kstatus([budget]))[0]?.status).toBe("Failed");
    expect((await argocdHealth([budget]))[0]?.status).toBe("Degraded");
  });
});
