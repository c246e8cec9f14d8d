// deploy/argocd/health.lua in Argo CD's own interpreter, and kstatus, on the documented cases and on objects
// with malformed statuses. Live objects from the journeys are checked in journey.test.ts.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { assessHealth } from "../../deploy/argocd/health.ts";
import { REPO_ROOT } from "../../src/control-plane/binaries.ts";
import { argocdHealth, kstatus } from "./peers.ts";

const ARGOCD_DIR = path.join(REPO_ROOT, "deploy/argocd");

interface HealthCase {
  healthStatus: { status: string; message: string };
  inputPath: string;
}

async function cases(): Promise<
  { name: string; object: Record<string, unknown>; expected: HealthCase["healthStatus"] }[]
> {
  const document = parse(await readFile(path.join(ARGOCD_DIR, "health_test.yaml"), "utf8")) as { tests: HealthCase[] };
  return Promise.all(
    document.tests.map(async (test) => ({
      name: test.inputPath,
      object: parse(await readFile(path.join(ARGOCD_DIR, test.inputPath), "utf8")) as Record<string, unknown>,
      expected: test.healthStatus,
    })),
  );
}

function gpuVm(status: unknown, metadata: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: "gpucloud.dev/v1alpha1",
    kind: "GpuVm",
    metadata: { name: "trainer", namespace: "default", generation: 2, ...metadata },
    spec: { type: "a100-80gb.1x" },
    status,
  };
}

/** Statuses a hand edit, an old operator or a bug could leave behind. */
const MALFORMED: [string, Record<string, unknown>][] = [
  ["status a string", gpuVm("Ready")],
  ["status a number", gpuVm(7)],
  ["status a list", gpuVm([{ type: "Ready", status: "True" }])],
  ["conditions not a list", gpuVm({ observedGeneration: 2, conditions: "Ready" })],
  ["conditions a number", gpuVm({ observedGeneration: 2, conditions: 7 })],
  ["conditions a map", gpuVm({ observedGeneration: 2, conditions: { type: "Ready", status: "True" } })],
  ["conditions holding junk", gpuVm({ observedGeneration: 2, conditions: [null, 3, "Ready", [1]] })],
  ["a number for status", gpuVm({ observedGeneration: 2, conditions: [{ type: "Ready", status: 1 }] })],
  ["a boolean for status", gpuVm({ observedGeneration: 2, conditions: [{ type: "Stalled", status: true }] })],
  [
    "a table for reason",
    gpuVm({
      observedGeneration: 2,
      conditions: [{ type: "Stalled", status: "True", reason: { code: 3 }, message: ["a", "b"] }],
    }),
  ],
  [
    "a number for message",
    gpuVm({ observedGeneration: 2, conditions: [{ type: "Reconciling", status: "True", reason: 5, message: 12 }] }),
  ],
  ["metadata a string", { ...gpuVm({ observedGeneration: 2 }), metadata: "trainer" }],
  ["generation a string", gpuVm({ observedGeneration: 2 }, { generation: "2" })],
  ["no status, no generation", { apiVersion: "gpucloud.dev/v1alpha1", kind: "GpuVm", metadata: { name: "x" } }],
];

describe("Argo CD health in Argo CD's interpreter (gopher-lua)", () => {
  it("gives the documented answer for every case of health_test.yaml", async () => {
    const all = await cases();
    const answers = await argocdHealth(all.map((test) => test.object));
    expect(all.map((test, index) => ({ case: test.name, ...answers[index] }))).toEqual(
      all.map((test) => ({ case: test.name, ...test.expected })),
    );
  });

  it("answers Progressing or Degraded for malformed statuses, never a Lua error, exactly as its TypeScript twin", async () => {
    const answers = await argocdHealth(MALFORMED.map(([, object]) => object));
    const seen = MALFORMED.map(([label], index) => ({ label, ...answers[index] }));
    for (const answer of seen) {
      expect(answer.error, `${answer.label}: Argo CD would show a health error`).toBeUndefined();
      expect(["Progressing", "Degraded"], answer.label).toContain(answer.status);
    }
    expect(seen).toEqual(MALFORMED.map(([label, object]) => ({ label, ...assessHealth(object) })));
  });
});

describe("kstatus (sigs.k8s.io/cli-utils)", () => {
  it("computes Current for Ready objects, InProgress while reconciling and Failed when Stalled", async () => {
    const byName = new Map((await cases()).map((test) => [path.basename(test.name, ".yaml"), test.object]));
    const expected: Record<string, string> = {
      ready: "Current",
      creating: "InProgress",
      "updating-while-ready": "InProgress",
      "generation-not-observed": "InProgress",
      "ready-unknown": "InProgress",
      stalled: "Failed",
      "stalled-without-message": "Failed",
      deleting: "Terminating",
    };
    const names = Object.keys(expected);
    const answers = await kstatus(names.map((name) => byName.get(name)));
    expect(Object.fromEntries(names.map((name, index) => [name, answers[index]?.status]))).toEqual(expected);
  });
});
