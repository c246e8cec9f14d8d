import { execFileSync } from "node:child_process";
import { defineConfig, type TestProjectInlineConfiguration } from "vitest/config";

// Projects: fast unit/integration tests (default), the slow end-to-end journeys under test/e2e, and — when Go is
// on PATH — the suites that need a real Kubernetes control plane built from Go modules (test/kubernetes: the
// journeys on a real API server, the differential suite against the double, RBAC, Argo CD's Lua and kstatus).
// `npm test` runs them all, unit first; CI reads the JSON report for the summary line.

function goVersion(): string | undefined {
  try {
    return execFileSync("go", ["env", "GOVERSION"], { encoding: "utf8", timeout: 60_000 }).trim() || undefined;
  } catch {
    return undefined;
  }
}

function kubernetesProjects(): TestProjectInlineConfiguration[] {
  const go = goVersion();
  if (go === undefined) {
    if (process.env.CI === "true") {
      throw new Error("CI=true and go is not on PATH: the real-Kubernetes suites (test/kubernetes) need Go 1.26+");
    }
    // The one line that says what is not run; everything else runs as usual.
    console.log(
      "kubernetes: SKIPPED the real-Kubernetes suites (test/kubernetes): go is not on PATH (install Go 1.26+)",
    );
    return [];
  }
  return [
    {
      test: {
        name: "kubernetes",
        // After the journeys on the double: these start real processes too.
        sequence: { groupOrder: 2 },
        include: ["test/kubernetes/**/*.test.ts"],
        // Builds the binaries when the cache lacks them, then starts one control plane for the whole run.
        globalSetup: ["test/kubernetes/global-setup.ts"],
        testTimeout: 300_000,
        hookTimeout: 180_000,
        fileParallelism: false,
      },
    },
  ];
}

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          sequence: { groupOrder: 0 },
          include: ["test/**/*.test.ts"],
          exclude: ["test/e2e/**", "test/kubernetes/**"],
          // Most of a unit file's time is waiting (timers, the simulator's latency, watches), not CPU: three files
          // at a time on the 2-core machine, where vitest's default (cores − 1) would run them one by one.
          maxWorkers: 3,
          testTimeout: 30_000,
          hookTimeout: 30_000,
        },
      },
      {
        test: {
          name: "e2e",
          // After the unit project, not beside it: the journeys spawn real processes and time real work, and
          // two cores shared with the unit suite make them slow for no benefit.
          sequence: { groupOrder: 1 },
          include: ["test/e2e/**/*.test.ts"],
          testTimeout: 300_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      ...kubernetesProjects(),
    ],
  },
});
