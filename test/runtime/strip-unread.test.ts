import { setFlagsFromString } from "node:v8";
import { describe, expect, it } from "vitest";
import { stripUnread } from "../../src/runtime/informer-cache.ts";

// V8's own test of an object's representation; the flag is this test worker's, never the operator's.
setFlagsFromString("--allow-natives-syntax");
const hasFastProperties = new Function("object", "return %HasFastProperties(object)") as (object: object) => boolean;

function listed(): { metadata: Record<string, unknown> } {
  // As the API server sends it: managedFields before other keys, as JSON.parse builds it.
  return JSON.parse(
    JSON.stringify({
      metadata: {
        name: "trainer",
        namespace: "team-a",
        managedFields: [{ manager: "kubectl", operation: "Apply" }],
        uid: "2f7c",
        resourceVersion: "17",
        creationTimestamp: "2026-11-27T10:00:00Z",
        finalizers: ["gpucloud.dev/finalizer"],
        annotations: { "kubectl.kubernetes.io/last-applied-configuration": "{}", kept: "yes" },
      },
    }),
  );
}

describe("stripUnread (the informer's default transform)", () => {
  it("drops managedFields and last-applied-configuration and keeps everything else in order", () => {
    const object = listed();
    stripUnread(object);
    expect(object.metadata).toEqual({
      name: "trainer",
      namespace: "team-a",
      uid: "2f7c",
      resourceVersion: "17",
      creationTimestamp: "2026-11-27T10:00:00Z",
      finalizers: ["gpucloud.dev/finalizer"],
      annotations: { kept: "yes" },
    });
  });

  it("leaves metadata and annotations as fast objects, not hash tables (what `delete` makes of them)", () => {
    const object = listed();
    stripUnread(object);
    expect(hasFastProperties(object.metadata)).toBe(true);
    expect(hasFastProperties(object.metadata.annotations as object)).toBe(true);
    const deleted = listed();
    delete deleted.metadata.managedFields;
    expect(hasFastProperties(deleted.metadata)).toBe(false);
  });

  it("leaves an object with nothing to drop as it was", () => {
    const object = { metadata: { name: "plain", annotations: { kept: "yes" } } };
    const metadata = object.metadata;
    stripUnread(object);
    expect(object.metadata).toBe(metadata);
  });
});
