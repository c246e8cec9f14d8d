// What the claims informer keeps of a claim object, and the record read from it.
import { describe, expect, it } from "vitest";
import { claimNameOf } from "../../../src/api/gpu-cloud-claim.ts";
import { accountOf } from "../../../src/controllers/accounts/account.ts";
import { claimOfObject, keepClaimRecord } from "../../../src/controllers/managed/claim-records.ts";

const slot = { kind: "GpuVm" as const, ...accountOf("https://cloud.test/v0.1", "project-1"), cloudName: "trainer" };

function claimAsListed(): Record<string, unknown> & { metadata: Record<string, unknown>; spec: { holder: object } } {
  return JSON.parse(
    JSON.stringify({
      apiVersion: "gpucloud.dev/v1alpha1",
      kind: "GpuCloudClaim",
      metadata: {
        name: claimNameOf(slot),
        namespace: "gpuvm-system",
        uid: "claim-uid",
        resourceVersion: "42",
        generation: 2,
        creationTimestamp: "2026-11-27T10:00:00Z",
        labels: { "gpucloud.dev/holder-uid": "vm-uid", "gpucloud.dev/resource-id": "vm-1" },
        managedFields: [{ manager: "gpuvm-operator" }],
      },
      spec: { ...slot, id: "vm-1", holder: { namespace: "team-a", name: "trainer", uid: "vm-uid" } },
    }),
  );
}

describe("keepClaimRecord (the claims informer's transform)", () => {
  it("keeps what the claim record and the informer read, and not labels, timestamps or managedFields", () => {
    const object = claimAsListed();
    keepClaimRecord(object);
    expect(object.metadata).toEqual({
      name: claimNameOf(slot),
      namespace: "gpuvm-system",
      uid: "claim-uid",
      resourceVersion: "42",
      generation: 2,
    });
    expect(claimOfObject(object)).toEqual(claimOfObject(claimAsListed()));
    expect(claimOfObject(object)).toMatchObject({ objectName: claimNameOf(slot), id: "vm-1", resourceVersion: "42" });
  });

  it("keeps a deletion in progress", () => {
    const object = claimAsListed();
    object.metadata.deletionTimestamp = "2026-11-27T11:00:00Z";
    object.metadata.finalizers = ["x"];
    keepClaimRecord(object);
    expect(object.metadata).toMatchObject({ deletionTimestamp: "2026-11-27T11:00:00Z", finalizers: ["x"] });
  });

  it("shares the object's holder with the record instead of a copy", () => {
    const object = claimAsListed();
    expect(claimOfObject(object)?.holder).toBe(object.spec.holder);
  });
});
