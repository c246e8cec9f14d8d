// Crash safety of a GpuVmPool's scale-up: wherever the operator dies (before or after recording the slots, between
// two creates, after a create whose answer was lost), a restarted operator ends with exactly spec.replicas GpuVms,
// never two for one slot. The Kubernetes side is an in-memory store whose writes can "crash" the process; a fresh
// reconciler plays the restart. (The GpuVm controller, proven crash-safe in crash.test.ts, then makes exactly one
// cloud VM per GpuVm; test/e2e/pool.test.ts kills the real process with SIGKILL.)

import { pino } from "pino";
import { describe, expect, it } from "vitest";
import type { KubeAccess } from "../../../src/controllers/core/kube-access.ts";
import type { ManagedObject, ManagedStatusBase } from "../../../src/controllers/core/object-model.ts";
import type { MemberAccess, MemberKind } from "../../../src/controllers/pool/actions.ts";
import { PoolReconciler } from "../../../src/controllers/pool/reconciler.ts";
import { SSH_KEY } from "../harness.ts";

class CrashError extends Error {
  override name = "CrashError";
}

interface StoredObject {
  metadata: Record<string, unknown> & { name: string; uid: string; resourceVersion: string; generation: number };
  spec: Record<string, unknown>;
  status?: Record<string, unknown>;
}

/** Where the process dies: before or after the n-th write of a kind ("status" of the pool, "create" of a GpuVm). */
interface Crash {
  write: "status" | "create";
  at: number;
  when: "before" | "after";
}

class World {
  version = 1;
  pool: StoredObject;
  vms = new Map<string, StoredObject>();
  dead = false;
  /** Every GpuVm ever created (a second one for a slot would make a second cloud VM, however briefly). */
  everCreated = new Set<string>();
  /** A lagging informer: each list shows only this many of the GpuVms (in creation order), one more each time. */
  visible: number | undefined;
  #writes = { status: 0, create: 0 };
  #crash: Crash | undefined;

  constructor(replicas: number) {
    this.pool = {
      metadata: { name: "burst", namespace: "default", uid: "pool-uid", resourceVersion: "1", generation: 1 },
      spec: {
        replicas,
        template: { spec: { type: "a100.1x", sshPublicKey: SSH_KEY } },
        placement: { locations: ["us-east1-a", "us-southcentral1-a"] },
      },
    };
  }

  arm(crash: Crash | undefined): void {
    this.#crash = crash;
    this.#writes = { status: 0, create: 0 };
    this.dead = false;
  }

  /** Count a write; throws when the process is dead or dies before it; returns whether it dies after it. */
  #write(kind: "status" | "create"): boolean {
    if (this.dead) throw new CrashError("the process is dead");
    this.#writes[kind]++;
    const crashing = this.#crash?.write === kind && this.#crash.at === this.#writes[kind];
    if (crashing && this.#crash?.when === "before") {
      this.dead = true;
      throw new CrashError(`crash before ${kind} ${this.#writes[kind]}`);
    }
    return crashing;
  }

  #die(crashing: boolean, what: string): void {
    if (!crashing) return;
    this.dead = true;
    throw new CrashError(`crash after ${what}`);
  }

  kube(): KubeAccess {
    return {
      get: () => structuredClone(this.pool),
      writeStatus: async (mr: ManagedObject, status: ManagedStatusBase) => {
        // As the runtime's patchStatus: an unchanged status sends nothing.
        if (JSON.stringify(status) === JSON.stringify(this.pool.status ?? {}) && !this.dead)
          return { type: "written", resourceVersion: this.pool.metadata.resourceVersion };
        const crashing = this.#write("status");
        if (mr.metadata.resourceVersion !== this.pool.metadata.resourceVersion) return { type: "conflict" };
        this.pool.status = structuredClone(status);
        this.pool.metadata.resourceVersion = String(++this.version);
        this.#die(crashing, "status write");
        return { type: "written", resourceVersion: this.pool.metadata.resourceVersion };
      },
      setFinalizer: async (_mr, present) => {
        if (this.dead) throw new CrashError("the process is dead");
        this.pool.metadata.finalizers = present ? ["gpucloud.dev/finalizer"] : [];
        this.pool.metadata.resourceVersion = String(++this.version);
        return { type: "written", resourceVersion: this.pool.metadata.resourceVersion };
      },
      event: () => undefined,
    };
  }

  members(): MemberAccess {
    return {
      list: (kind: MemberKind) => {
        if (kind !== "GpuVm") return [];
        const all = [...this.vms.values()].map((vm) => structuredClone(vm));
        if (this.visible === undefined) return all;
        this.visible++;
        return all.slice(0, this.visible - 1);
      },
      create: async (kind, _namespace, body) => {
        if (kind !== "GpuVm") return "created";
        const crashing = this.#write("create");
        const name = body.metadata.name;
        if (this.vms.has(name)) return "exists";
        const stored = structuredClone(body) as unknown as StoredObject;
        stored.metadata.uid = `uid-${name}`;
        stored.metadata.resourceVersion = String(++this.version);
        stored.metadata.generation = 1;
        stored.metadata.creationTimestamp = new Date().toISOString();
        this.vms.set(name, stored);
        this.everCreated.add(name);
        this.#die(crashing, `create of ${name} (the answer is lost)`);
        return "created";
      },
      delete: async (_kind, _namespace, name) => {
        if (this.dead) throw new CrashError("the process is dead");
        return this.vms.delete(name) ? "deleted" : "gone";
      },
      patch: async () => {
        if (this.dead) throw new CrashError("the process is dead");
        return { type: "conflict" };
      },
    };
  }
}

const logger = pino({ level: "silent" });

/** A fresh operator process: reconciles the pool until a pass ends without a crash and nothing changes. */
async function runOperator(world: World): Promise<void> {
  const reconciler = new PoolReconciler({
    kube: world.kube(),
    members: world.members(),
    availability: async () => ({ available: true }),
  });
  const request = { namespace: "default", name: "burst" };
  for (let pass = 0; pass < 20; pass++) {
    const before = JSON.stringify([world.pool, [...world.vms.keys()]]);
    try {
      await reconciler.reconcile(request, {
        signal: new AbortController().signal,
        logger,
        reconcileId: "test",
        priority: "normal",
      });
    } catch (error) {
      if (!(error instanceof CrashError)) throw error;
    }
    // Dead: nothing of this process runs any more.
    if (world.dead) return;
    if (JSON.stringify([world.pool, [...world.vms.keys()]]) === before) return;
  }
  throw new Error("the pool did not settle");
}

const CRASHES: Crash[] = [
  { write: "status", at: 1, when: "before" },
  { write: "status", at: 1, when: "after" },
  { write: "create", at: 1, when: "before" },
  { write: "create", at: 3, when: "before" },
  { write: "create", at: 3, when: "after" },
  { write: "create", at: 8, when: "after" },
];

describe("GpuVmPool crash safety", () => {
  it.each(CRASHES.map((crash) => [`${crash.when} ${crash.write} ${crash.at}`, crash] as const))(
    "ends with exactly spec.replicas GpuVms after a crash %s",
    async (_label, crash) => {
      const world = new World(8);
      world.arm(crash);
      await runOperator(world);
      expect(world.dead, "the crash happened").toBe(true);
      world.arm(undefined);
      await runOperator(world);
      expect(world.vms.size).toBe(8);
      const slots = (world.pool.status?.slots ?? []) as { name: string }[];
      expect(slots.map((slot) => slot.name).sort()).toEqual([...world.vms.keys()].sort());
      expect(world.everCreated.size).toBe(8);
    },
  );

  it("records every slot before it creates the GpuVm", async () => {
    const world = new World(4);
    world.arm({ write: "create", at: 1, when: "before" });
    await runOperator(world);
    expect(world.vms.size).toBe(0);
    expect(((world.pool.status?.slots ?? []) as unknown[]).length).toBe(4);
  });

  it("never makes a second GpuVm for a slot when the cache lags behind its creates", async () => {
    const world = new World(8);
    world.visible = 0;
    await runOperator(world);
    world.visible = undefined;
    await runOperator(world);
    expect(world.vms.size).toBe(8);
    expect(world.everCreated.size).toBe(8);
  });
});
