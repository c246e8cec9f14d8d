import { readFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  assessHealth,
  GENERATED_FILES,
  HEALTH_KINDS,
  healthCustomizationKeys,
  renderHealthLua,
} from "../../deploy/argocd/health.ts";

const ARGOCD_DIR = path.resolve(import.meta.dirname, "../../deploy/argocd");
const REPO_ROOT = path.resolve(import.meta.dirname, "../..");

interface HealthTestCase {
  healthStatus: { status: string; message: string };
  inputPath: string;
}

async function loadCases(): Promise<HealthTestCase[]> {
  const document = parse(await readFile(path.join(ARGOCD_DIR, "health_test.yaml"), "utf8")) as {
    tests: HealthTestCase[];
  };
  return document.tests;
}

describe("Argo CD health (kstatus) for gpucloud.dev kinds", () => {
  it("gives the documented answer for every case in deploy/argocd/health_test.yaml", async () => {
    const cases = await loadCases();
    expect(cases.length).toBeGreaterThanOrEqual(9);
    for (const testCase of cases) {
      const input: unknown = parse(await readFile(path.join(ARGOCD_DIR, testCase.inputPath), "utf8"));
      expect({ input: testCase.inputPath, ...assessHealth(input) }).toEqual({
        input: testCase.inputPath,
        ...testCase.healthStatus,
      });
    }
  });

  it("covers every health status and every kind in the cases", async () => {
    const cases = await loadCases();
    expect(new Set(cases.map((c) => c.healthStatus.status))).toEqual(
      new Set(["Healthy", "Progressing", "Degraded", "Suspended"]),
    );
    const kinds = new Set<string>();
    for (const testCase of cases) {
      const input = parse(await readFile(path.join(ARGOCD_DIR, testCase.inputPath), "utf8")) as { kind: string };
      kinds.add(input.kind);
    }
    expect(kinds).toEqual(new Set(HEALTH_KINDS));
  });

  it.each([
    ["null", null],
    ["a string", "GpuVm"],
    [
      "conditions that are not a list",
      { metadata: { generation: 1 }, status: { observedGeneration: 1, conditions: 7 } },
    ],
    [
      "conditions holding junk",
      { metadata: { generation: 1 }, status: { observedGeneration: 1, conditions: [null, 3] } },
    ],
  ])("treats %s as Progressing without throwing", (_label, input) => {
    expect(assessHealth(input).status).toBe("Progressing");
  });

  it("treats a paused Cluster API object as Suspended even when its generation is not observed yet", () => {
    const health = assessHealth({
      metadata: { generation: 3 },
      status: { observedGeneration: 2, conditions: [{ type: "Paused", status: "True", reason: "Paused" }] },
    });
    expect(health).toEqual({ status: "Suspended", message: "Paused" });
    const resumed = {
      observedGeneration: 3,
      conditions: [
        { type: "Paused", status: "False" },
        { type: "Ready", status: "True" },
      ],
    };
    expect(assessHealth({ metadata: { generation: 3 }, status: resumed }).status).toBe("Healthy");
  });

  it("treats deletion as Progressing even when the object is also Stalled", () => {
    const health = assessHealth({
      metadata: { generation: 1, deletionTimestamp: "2026-11-21T00:00:00Z" },
      status: { observedGeneration: 1, conditions: [{ type: "Stalled", status: "True" }] },
    });
    expect(health.status).toBe("Progressing");
  });

  it.each(GENERATED_FILES.map((file) => [file.path, file.render] as const))(
    "%s is up to date (regenerate with `npx node deploy/argocd/health.ts`)",
    async (file, render) => {
      expect(await readFile(path.join(REPO_ROOT, file), "utf8")).toBe(render());
    },
  );

  it("installs the same script for every kind in the argocd-cm patch", async () => {
    const patch = parse(await readFile(path.join(ARGOCD_DIR, "argocd-cm-patch.yaml"), "utf8")) as {
      kind: string;
      metadata: { name: string };
      data: Record<string, string>;
    };
    expect(patch.kind).toBe("ConfigMap");
    expect(patch.metadata.name).toBe("argocd-cm");
    expect(Object.keys(patch.data).sort()).toEqual(healthCustomizationKeys().sort());
    expect(patch.data).toHaveProperty(["resource.customizations.health.infrastructure.cluster.x-k8s.io_GpuMachine"]);
    for (const script of Object.values(patch.data)) expect(script).toBe(renderHealthLua());
  });
});
