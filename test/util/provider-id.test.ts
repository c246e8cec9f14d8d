import { describe, expect, it } from "vitest";
import { PROVIDER_ID_PATTERN, providerIdOf, vmIdOfProviderId } from "../../src/util/provider-id.ts";

describe("providerID", () => {
  it("is gpucloud://<vm id>, and reads back the VM id", () => {
    const id = "0b6f3f0e-5d4a-4c53-9b1e-2f0d7c9a1e42";
    expect(providerIdOf(id)).toBe(`gpucloud://${id}`);
    expect(vmIdOfProviderId(providerIdOf(id))).toBe(id);
    expect(PROVIDER_ID_PATTERN.test(providerIdOf(id))).toBe(true);
  });

  it.each(["", "a/b", "with space", "../x", "x".repeat(129)])("refuses %j as a VM id", (id) => {
    expect(() => providerIdOf(id)).toThrow(/is not a VM id/);
  });

  it.each(["aws:///us-east-1a/i-0abc", "gpucloud:///x", "gpucloud://", "gpucloud://a b", "GPUCLOUD://x"])(
    "reads no VM id from %j",
    (text) => {
      expect(vmIdOfProviderId(text)).toBeUndefined();
    },
  );
});
