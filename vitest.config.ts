import { defineConfig } from "vitest/config";

// Two projects: fast unit/integration tests (default) and the slow end-to-end journeys under test/e2e.
// `npm test` runs both, unit first; CI reads the JSON report for the summary line.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          sequence: { groupOrder: 0 },
          include: ["test/**/*.test.ts"],
          exclude: ["test/e2e/**"],
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
    ],
  },
});
