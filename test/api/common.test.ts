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
      deleteFirst: "gpucloud.dev/delete-first",
    });
    expect(CONDITION_TYPES).toEqual(["Ready", "Reconciling", "Stalled", "Synced", "UpToDate"]);
  });

  it("documents every reason with one line, and each reason is its own name", () => {
    expect(Object.keys(REASONS)).toHaveLength(38);
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
    { namespace: "default", name: "reset-vm", want: "default-reset-vm" },
    { namespace: "Team", name: "Trainer.V2", want: "team-trainer.v2" },
  ])("$namespace/$name → $want (readable when the namespace has no '-')", ({ namespace, name, want }) => {
    expect(defaultCloudName(namespace, name)).toBe(want);
  });

  it("never gives two objects the same name (default/reset-vm and default-reset/vm would read alike)", () => {
    expect(defaultCloudName("default-reset", "vm")).not.toBe(defaultCloudName("default", "reset-vm"));
    expect(defaultCloudName("default-reset", "vm")).toMatch(/^default-reset-vm-[0-9a-f]{8}$/);
    // Every split of one text into namespace and name gets its own name.
    const namespaces = ["a", "a-b", "a-b-c", "b", "b-c", "c"];
    const names = ["a", "b-c", "c", "b", "a-b", "x.y", "c-d"];
    const seen = new Map<string, string>();
    for (const namespace of namespaces) {
      for (const name of names) {
        const cloudName = defaultCloudName(namespace, name);
        expect(seen.get(cloudName), `${namespace}/${name} → ${cloudName}`).toBeUndefined();
        seen.set(cloudName, `${namespace}/${name}`);
        expect(cloudName.length).toBeLessThanOrEqual(MAX_CLOUD_NAME_LENGTH);
      }
    }
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
