import { describe, expect, it } from "vitest";
import {
  ANNOTATIONS,
  API_VERSION,
  CONDITION_TYPES,
  defaultCloudName,
  FINALIZER,
  GROUP,
  MAX_CLOUD_NAME_LENGTH,
  REASON_DESCRIPTIONS,
  REASONS,
  VERSION,
} from "../../src/api/common.ts";

describe("constants", () => {
  it("names the group, version, finalizer and annotations as the issue fixes them", () => {
    expect([GROUP, VERSION, API_VERSION]).toEqual(["gpucloud.dev", "v1alpha1", "gpucloud.dev/v1alpha1"]);
    expect(FINALIZER).toBe("gpucloud.dev/finalizer");
    expect(ANNOTATIONS).toEqual({
      paused: "gpucloud.dev/paused",
      resetRequestedAt: "gpucloud.dev/reset-requested-at",
      syncPeriod: "gpucloud.dev/sync-period",
    });
    expect(CONDITION_TYPES).toEqual(["Ready", "Reconciling", "Stalled"]);
  });

  it("documents every reason with one line, and each reason is its own name", () => {
    expect(Object.keys(REASONS)).toHaveLength(19);
    for (const [key, reason] of Object.entries(REASONS)) {
      expect(reason).toBe(key);
      const description = REASON_DESCRIPTIONS[reason];
      expect(description.length).toBeGreaterThan(20);
      expect(description).not.toContain("\n");
    }
  });
});

describe("defaultCloudName", () => {
  it.each([
    { namespace: "default", name: "trainer", want: "default-trainer" },
    { namespace: "Team-A", name: "Trainer.V2", want: "team-a-trainer.v2" },
  ])("$namespace/$name → $want", ({ namespace, name, want }) => {
    expect(defaultCloudName(namespace, name)).toBe(want);
  });

  it("shortens long names to 63 characters with a stable hash suffix", () => {
    const namespace = "research-infrastructure";
    const long = "a".repeat(40);
    const first = defaultCloudName(namespace, long);
    expect(first).toHaveLength(MAX_CLOUD_NAME_LENGTH);
    expect(first).toMatch(/^research-infrastructure-a+-[0-9a-f]{8}$/);
    expect(defaultCloudName(namespace, long)).toBe(first);
    // Names that only differ beyond the cut must not collide.
    expect(defaultCloudName(namespace, `${long}b`)).not.toBe(defaultCloudName(namespace, `${long}c`));
  });

  it("never leaves a separator before the hash", () => {
    const name = defaultCloudName("ns", `${"x".repeat(49)}----------tail`);
    expect(name.length).toBeLessThanOrEqual(MAX_CLOUD_NAME_LENGTH);
    expect(name).toMatch(/^ns-x+-[0-9a-f]{8}$/);
  });

  it("rejects an empty namespace or name", () => {
    expect(() => defaultCloudName("", "trainer")).toThrow(/namespace and a name/);
    expect(() => defaultCloudName("default", "")).toThrow(/namespace and a name/);
  });
});
