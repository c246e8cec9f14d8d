// An object no replica reconciles (its shard has no leader): its Synced condition turns False (WaitingForOwner)
// once its spec is ahead of its status, and nothing else changes; a status that says nothing untrue is left alone.

import pino from "pino";
import { describe, expect, it } from "vitest";
import type { WriteResult } from "../../../src/controllers/core/kube-access.ts";
import type { Condition, ManagedObject } from "../../../src/controllers/core/object-model.ts";
import { markWithoutOwner, withoutOwnerStatus } from "../../../src/controllers/managed/without-owner.ts";
import { FencedError } from "../../../src/util/fence.ts";

const NOW = Date.parse("2026-11-27T12:00:00Z");
const condition = (type: string, status: Condition["status"], reason: string): Condition => ({
  type,
  status,
  reason,
  message: "",
  lastTransitionTime: "2026-11-27T11:00:00Z",
  observedGeneration: 3,
});

function vm(generation: number, synced: Condition["status"]): ManagedObject {
  return {
    apiVersion: "gpucloud.dev/v1alpha1",
    kind: "GpuVm",
    metadata: {
      namespace: "team",
      name: "vm-1",
      uid: "u1",
      generation,
      resourceVersion: "7",
      finalizers: [],
      annotations: {},
      labels: {},
    },
    spec: {},
    status: {
      observedGeneration: 3,
      id: "vm-id",
      conditions: [condition("Ready", "True", "Available"), condition("Synced", synced, "Available")],
    },
  };
}

describe("objects without an owner", () => {
  it("a spec ahead of a status that says Synced: Synced=False WaitingForOwner, the rest as it was", () => {
    const status = withoutOwnerStatus(vm(4, "True"), NOW);
    expect(status?.conditions).toEqual([
      condition("Ready", "True", "Available"),
      {
        type: "Synced",
        status: "False",
        reason: "WaitingForOwner",
        message:
          "no replica of this object's shard holds its Lease: generation 4 waits for one (status describes generation 3)",
        lastTransitionTime: "2026-11-27T12:00:00Z",
        observedGeneration: 4,
      },
    ]);
    expect(status?.id).toBe("vm-id");
    expect(status?.observedGeneration).toBe(3);
  });

  it("leaves alone a status of the current generation, and one that does not say Synced", () => {
    expect(withoutOwnerStatus(vm(3, "True"), NOW)).toBeUndefined();
    expect(withoutOwnerStatus(vm(4, "False"), NOW)).toBeUndefined();
  });

  it("writes through the guarded status write, and lets a refused write go (the owner is back, or no Lease)", async () => {
    const written: string[] = [];
    const answers: (WriteResult | Error)[] = [{ type: "conflict" }, new FencedError("no Lease")];
    await markWithoutOwner(["team/vm-1", "team/vm-2", "team/gone"], {
      read: (key) =>
        key === "team/gone" ? undefined : { ...vm(4, "True"), metadata: { ...vm(4, "True").metadata, name: key } },
      kube: {
        writeStatus: async (mr) => {
          written.push(mr.metadata.name);
          const answer = answers.shift() ?? { type: "written", resourceVersion: "8" };
          if (answer instanceof Error) throw answer;
          return answer;
        },
      },
      now: () => NOW,
      logger: pino({ level: "silent" }),
    });
    expect(written).toEqual(["team/vm-1", "team/vm-2"]);
  });
});
