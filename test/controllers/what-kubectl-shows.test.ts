// What a person reads in `kubectl get` and `kubectl describe`: the display forms in status (State, Protocols,
// Attached), names of objects instead of cloud ids, and the Synced condition.

import { describe, expect, it } from "vitest";
import { REASONS } from "../../src/api/common.ts";
import type { Disk, FirewallRule } from "../../src/cloud/wire.ts";
import type { Condition, ManagedObject } from "../../src/controllers/core/object-model.ts";
import { IN_STEP_MESSAGE, syncedCondition } from "../../src/controllers/core/synced.ts";
import type { Verdict } from "../../src/controllers/core/verdict.ts";
import { diskAtProvider, diskInUse, printableAttachments } from "../../src/controllers/kinds/gpu-disk.ts";
import { observeRule } from "../../src/controllers/kinds/gpu-firewall-rule.ts";
import { diskChange, nextVmStep, vmAtProvider } from "../../src/controllers/kinds/gpu-vm-mappers.ts";

const AT = "2026-11-22T10:00:00Z";
const EARLIER = "2026-11-22T09:00:00Z";

function verdictOf(reason: Verdict["reason"], extra: Partial<Verdict> = {}): Verdict {
  return {
    ready: false,
    reason,
    message: `${reason} message`,
    progressing: false,
    stalled: false,
    outcome: { type: "done" },
    ...extra,
  };
}

function synced(status: Condition["status"], reason: string, generation = 2): Condition {
  return {
    type: "Synced",
    status,
    reason,
    message: "before",
    lastTransitionTime: EARLIER,
    observedGeneration: generation,
  };
}

describe("the Synced condition (is the cloud resource in step with the spec?)", () => {
  it("is True when the pass found the resource as the spec asks, keeping its transition time", () => {
    const condition = syncedCondition({
      result: verdictOf(REASONS.Available, { ready: true }),
      upToDate: undefined,
      previous: synced("True", REASONS.Available),
      generation: 2,
      at: AT,
    });
    expect(condition).toEqual({
      type: "Synced",
      status: "True",
      reason: "Available",
      message: IN_STEP_MESSAGE,
      lastTransitionTime: EARLIER,
      observedGeneration: 2,
    });
  });

  it("is False while a change is applied or cannot be, with the verdict's reason and message", () => {
    for (const reason of [
      REASONS.Creating,
      REASONS.Updating,
      REASONS.WaitingForOperation,
      REASONS.InvalidSpec,
      REASONS.ImmutableFieldChanged,
      REASONS.NotSupported,
      REASONS.ReferenceNotFound,
      REASONS.InUse,
    ]) {
      const condition = syncedCondition({
        result: verdictOf(reason),
        upToDate: undefined,
        previous: synced("True", REASONS.Available),
        generation: 2,
        at: AT,
      });
      expect(condition, reason).toMatchObject({ status: "False", reason, message: `${reason} message` });
      expect(condition.lastTransitionTime).toBe(AT);
    }
  });

  it("is False for a working resource whose create-only values changed (UpToDate=False)", () => {
    const upToDate: Condition = {
      type: "UpToDate",
      status: "False",
      reason: REASONS.CreateOnlyFieldChanged,
      message: "sshPublicKey changed",
      lastTransitionTime: AT,
    };
    const condition = syncedCondition({
      result: verdictOf(REASONS.Available, { ready: true }),
      upToDate,
      previous: undefined,
      generation: 2,
      at: AT,
    });
    expect(condition).toMatchObject({
      status: "False",
      reason: "CreateOnlyFieldChanged",
      message: "sshPublicKey changed",
    });
  });

  it("keeps the last comparison of the same generation when the pass could not look, else Unknown", () => {
    for (const reason of [REASONS.ApiUnavailable, REASONS.RateLimited, REASONS.CredentialsInvalid, REASONS.Paused]) {
      const previous = synced("True", REASONS.Available);
      const same = syncedCondition({ result: verdictOf(reason), upToDate: undefined, previous, generation: 2, at: AT });
      expect(same, reason).toBe(previous);
      const newer = syncedCondition({
        result: verdictOf(reason),
        upToDate: undefined,
        previous,
        generation: 3,
        at: AT,
      });
      expect(newer, reason).toMatchObject({ status: "Unknown", reason, observedGeneration: 3 });
    }
  });

  it("is False for an observed object whose cloud resource is missing (verdict.synced false)", () => {
    const condition = syncedCondition({
      result: verdictOf(REASONS.Observed, { synced: false }),
      upToDate: undefined,
      previous: undefined,
      generation: 1,
      at: AT,
    });
    expect(condition).toMatchObject({ status: "False", reason: "Observed" });
  });
});

describe("display forms in status", () => {
  it("a VM's State column shows RUNNING, status.state keeps the cloud's STATE_RUNNING", () => {
    const at = vmAtProvider({
      id: "vm-1",
      name: "default-trainer",
      type: "a100.1x",
      state: "STATE_RUNNING",
      location: "us-east1-a",
      disks: [],
    } as unknown as Parameters<typeof vmAtProvider>[0]);
    expect([at.state, at.printableState]).toEqual(["STATE_RUNNING", "RUNNING"]);
    // A server that spells states without the prefix is normalised the same way.
    const bare = vmAtProvider({ ...({} as object), state: "stopped", disks: [] } as never);
    expect([bare.state, bare.printableState]).toEqual(["STATE_STOPPED", "STOPPED"]);
  });

  it("a rule's Protocols column shows tcp,udp", () => {
    const rule = { id: "r1", name: "n", state: "active", vpc_network_id: "net", protocols: ["tcp", "udp"] };
    expect(observeRule(undefined, rule as unknown as FirewallRule).atProvider.printableProtocols).toBe("tcp,udp");
  });

  it("a disk's Attached column names the GpuVm, and falls back to the VM id for VMs not managed here", () => {
    const disk = {
      id: "dsk-1",
      name: "default-datasets",
      size: "1TiB",
      attached_to: [
        { vm_id: "vm-1", mode: "read-write" },
        { vm_id: "vm-9", mode: "read-only" },
      ],
    } as unknown as Disk;
    const at = diskAtProvider(disk, (vmId) => (vmId === "vm-1" ? "trainer" : undefined));
    expect(at.attachedTo).toEqual([
      { vmId: "vm-1", mode: "read-write", gpuVm: "trainer" },
      { vmId: "vm-9", mode: "read-only" },
    ]);
    expect(at.printableAttachedTo).toBe("trainer,vm-9");
  });

  it("cuts a long list of attachments to its bound with a count of the rest", () => {
    const many = Array.from({ length: 40 }, (_, i) => ({ vmId: `vm-${i}`, gpuVm: `trainer-node-${i}` }));
    const text = printableAttachments(many);
    expect(text.length).toBeLessThanOrEqual(256);
    expect(text).toMatch(/^trainer-node-0,trainer-node-1,.*,\+\d+ more$/);
  });
});

describe("why a disk being deleted waits (names objects, says whether it resolves itself)", () => {
  const disk = {
    metadata: { namespace: "default", name: "datasets" },
    spec: {},
    status: {},
  } as unknown as ManagedObject<never>;
  const vm = (name: string, spec: Record<string, unknown>, deleting = false) =>
    ({
      metadata: { namespace: "default", name, ...(deleting ? { deletionTimestamp: AT } : {}) },
      spec,
      status: {},
    }) as unknown as ManagedObject;

  it("a GpuVm that still lists the disk: the user's to change (Stalled), with the fix", () => {
    const blocker = diskInUse(disk, "dsk-1", [{ vmId: "vm-1" }], () =>
      vm("trainer", { disks: [{ diskRef: { name: "datasets" } }] }),
    );
    expect(blocker).toEqual({
      message:
        "still attached to GpuVm default/trainer: remove the disk from its spec.disks, or delete the GpuVm. The disk is deleted once it is detached",
      needsAction: true,
    });
  });

  it("a VM no GpuVm here manages: the user's to detach, named by its id", () => {
    const blocker = diskInUse(disk, "dsk-1", [{ vmId: "vm-7" }], () => undefined);
    expect(blocker.needsAction).toBe(true);
    expect(blocker.message).toMatch(/VM vm-7, which no GpuVm in namespace default manages: detach it in the cloud/);
  });

  it("a GpuVm being deleted, or one that no longer lists the disk, detaches it by itself (Reconciling)", () => {
    const deleting = diskInUse(disk, "dsk-1", [{ vmId: "vm-1" }], () =>
      vm("trainer", { disks: [{ diskRef: { name: "datasets" } }] }, true),
    );
    expect(deleting).toEqual({
      message: "waiting to be detached from GpuVm default/trainer (being deleted)",
      needsAction: false,
    });
    const detaching = diskInUse(disk, "dsk-1", [{ vmId: "vm-1" }], () => vm("trainer", { disks: [] }));
    expect(detaching).toEqual({
      message: "waiting to be detached from GpuVm default/trainer (detaching it)",
      needsAction: false,
    });
  });
});

describe("a VM's disk update names the GpuDisks", () => {
  it("attach and detach say which GpuDisk (or, for a disk no GpuDisk manages, its id)", () => {
    const desired = {
      type: "a100.1x",
      powerState: "Running" as const,
      disks: [{ id: "dsk-2", mode: "read-only" as const }],
      diskNames: { "dsk-2": "datasets" },
    };
    const observed = [
      { id: "dsk-1", mode: "read-write", gpuDisk: "scratch" },
      { id: "dsk-9", mode: "read-write" },
    ];
    expect(diskChange(desired, observed)).toBe(
      "attach GpuDisk datasets (read-only), detach GpuDisk scratch, detach disk dsk-9",
    );
    const step = nextVmStep(desired, { type: "a100.1x", state: "STATE_RUNNING", disks: observed });
    expect(step).toMatchObject({ action: "UPDATE", why: `UPDATE disks: ${diskChange(desired, observed)}` });
  });
});
