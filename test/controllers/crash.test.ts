// Crash safety: no sequence of crashes, lost answers or eventual consistency creates a second cloud VM.
// The cloud side is real (simulator + client + GpuVm kind); the Kubernetes side is an in-memory object store
// whose status write can "crash" the operator at a chosen moment, and a fresh reconciler plays the restart.

import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { GpuVmSpec } from "../../src/api/gpu-vm.ts";
import type { Vm } from "../../src/cloud/wire.ts";
import { CloudAccount } from "../../src/controllers/accounts/cloud-account.ts";
import { clientFor } from "../../src/controllers/accounts/credentials.ts";
import type { KubeAccess } from "../../src/controllers/core/kube-access.ts";
import type { ManagedStatusBase } from "../../src/controllers/core/object-model.ts";
import { parseManaged } from "../../src/controllers/core/object-model.ts";
import { gpuVm } from "../../src/controllers/kinds/gpu-vm.ts";
import type { ClaimStore } from "../../src/controllers/managed/claims.ts";
import { ManagedReconciler } from "../../src/controllers/managed/reconciler.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/index.ts";
import { condition, type Env, startEnv, vmSpec } from "./harness.ts";
import { MemoryClaimRecords } from "./memory-claims.ts";

const logger = pino({ level: "silent" });
let sim: RunningSimulator | undefined;
let env: Env | undefined;
afterEach(async () => {
  await sim?.close();
  await env?.close();
  sim = undefined;
  env = undefined;
});

class CrashError extends Error {
  override name = "CrashError";
}

interface Crash {
  /** The n-th status write is where the process dies… */
  write: number;
  /** …before it reaches the API server, or right after it was stored. */
  when: "before" | "after";
}

/** One object in memory. After the crash every write fails: the dead process does nothing more. */
function memoryKube(object: Record<string, unknown>, crash?: Crash): KubeAccess & { stored: Record<string, unknown> } {
  let writes = 0;
  let dead = false;
  let version = 1;
  const stored = structuredClone(object);
  const meta = () => stored.metadata as { resourceVersion: string; finalizers?: string[] };
  return {
    stored,
    get: () => structuredClone(stored),
    async writeStatus(_mr, status: ManagedStatusBase) {
      writes++;
      if (dead) throw new CrashError("the process is dead");
      const crashing = writes === crash?.write;
      if (crashing && crash?.when === "before") dead = true;
      if (dead) throw new CrashError(`crash before status write ${writes}`);
      stored.status = structuredClone(status);
      meta().resourceVersion = String(++version);
      if (crashing) {
        dead = true;
        throw new CrashError(`crash after status write ${writes}`);
      }
      return { type: "written", resourceVersion: meta().resourceVersion };
    },
    async setFinalizer(_mr, present) {
      const finalizers = new Set(meta().finalizers ?? []);
      if (present) finalizers.add("gpucloud.dev/finalizer");
      else finalizers.delete("gpucloud.dev/finalizer");
      meta().finalizers = [...finalizers];
      meta().resourceVersion = String(++version);
      return { type: "written", resourceVersion: meta().resourceVersion };
    },
    event: () => undefined,
  };
}

/** The claims outlive every operator process of a test, as they would in the API server. */
function operator(simulator: RunningSimulator, kube: KubeAccess, claims: ClaimStore) {
  const parsed = { credentials: { apiKey: simulator.apiKey }, projectId: simulator.projectId, apiUrl: simulator.url };
  const account = new CloudAccount({
    client: clientFor(parsed, `test-${Math.random()}`, { ratePerSec: 1000 }),
    projectId: simulator.projectId,
    apiUrl: simulator.url,
    credentialKey: "test",
    snapshotMaxAgeMs: 60_000,
    operationPollMs: 20,
    wake: () => undefined,
    logger,
  });
  const deps = { managed: () => undefined, listManaged: () => [], dataKey: () => undefined };
  const reconciler = new ManagedReconciler<GpuVmSpec>({
    kind: "GpuVm",
    parse: (raw) => parseManaged(raw, gpuVm.info.specSchema, gpuVm.info.statusSchema),
    locations: (spec) => gpuVm.locations(spec),
    kube,
    claims,
    connect: async () => ({
      type: "connected",
      connection: {
        external: gpuVm.external(account, deps),
        projectId: account.projectId,
        account: { apiUrl: account.apiUrl, projectId: account.projectId },
        usingCachedCredentials: false,
        paymentProblem: (signal) => account.paymentProblem(signal),
        operation: (id, key) => account.operation("vm", id, key),
        nextFollowTurnMs: () => account.nextFollowTurnMs("vm"),
      },
    }),
    timing: { operationFallbackMs: 20, shortMs: 20, createGraceMs: 500 },
  });
  const pass = () =>
    reconciler
      .reconcile(
        { namespace: "default", name: "trainer" },
        { signal: new AbortController().signal, logger, reconcileId: "test", priority: "normal" },
      )
      .catch((error: unknown) => {
        if (error instanceof CrashError) return { type: "crashed" as const };
        throw error;
      });
  return { account, pass };
}

const object = {
  apiVersion: "gpucloud.dev/v1alpha1",
  kind: "GpuVm",
  metadata: { namespace: "default", name: "trainer", uid: "u1", generation: 1, resourceVersion: "1" },
  spec: vmSpec(),
};

async function vmsNamed(simulator: RunningSimulator, name: string): Promise<Vm[]> {
  const response = await fetch(`${simulator.url}/projects/${simulator.projectId}/vms?names=${name}`, {
    headers: { authorization: `Bearer ${simulator.apiKey}` },
  });
  return ((await response.json()) as { items: Vm[] }).items.filter((vm) => vm.name === name);
}

/** Reconcile until Ready (or give up), like a work queue would, sleeping a little between passes. */
async function untilReady(pass: () => Promise<unknown>, kube: { stored: Record<string, unknown> }): Promise<void> {
  for (let i = 0; i < 100; i++) {
    await pass();
    const status = kube.stored.status as ManagedStatusBase | undefined;
    if (status?.conditions?.some((c) => c.type === "Ready" && c.status === "True")) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`never Ready: ${JSON.stringify(kube.stored.status)}`);
}

describe("crash safety", () => {
  const rows: { reason: string; crash: Crash; faults: object }[] = [
    { reason: "crash after the POST, before the status write", crash: { write: 2, when: "before" }, faults: {} },
    {
      reason: "crash after the POST while the new VM is not readable yet",
      crash: { write: 2, when: "before" },
      faults: { not_found_after_create_ms: 300 },
    },
    { reason: "crash after the intent was stored, before the POST", crash: { write: 1, when: "after" }, faults: {} },
  ];
  it.each(rows)("$reason: exactly one VM", async ({ crash, faults }) => {
    sim = await startSimulator({ port: 0, latencyMs: 0, rateLimit: false, faults });
    const first = memoryKube(object, crash);
    const claims = new MemoryClaimRecords();
    const before = operator(sim, first, claims.attach());
    expect(await before.pass()).toMatchObject({ type: "crashed" });
    before.account.stop();
    if (Object.keys(faults).length === 0) {
      // Proof that the crash happened where intended: the POST went through (write 2) or not (write 1).
      expect(await vmsNamed(sim, "default-trainer")).toHaveLength(crash.write === 2 ? 1 : 0);
    }
    // The restarted operator sees what was stored before the crash.
    const stored = first.stored;
    const second = memoryKube(stored);
    const after = operator(sim, second, claims.attach());
    await untilReady(after.pass, second);
    after.account.stop();
    expect(await vmsNamed(sim, "default-trainer")).toHaveLength(1);
    const status = second.stored.status as ManagedStatusBase;
    expect(status.createPending).toBeUndefined();
    expect(status.id).toBe((await vmsNamed(sim, "default-trainer"))[0]?.id);
  });

  it("a RESET whose answer was lost, its operation forgotten by the cloud before the restart, is not sent again", async () => {
    // Issue #28, case 6: the process dies while a RESET's answer is on its way; the cloud forgets finished
    // operations after 2 s. "Operation not listed" must not read as "not carried out": the VM's updated_at,
    // later than the one seen before the RESET, says it was.
    sim = await startSimulator({ port: 0, latencyMs: 200, rateLimit: false, operationRetentionMs: 2000 });
    const ready = memoryKube(object);
    const claims = new MemoryClaimRecords();
    const first = operator(sim, ready, claims.attach());
    await untilReady(first.pass, ready);
    first.account.stop();
    await new Promise((resolve) => setTimeout(resolve, 1100)); // the reset is asked for a while after the VM was made
    const annotations = { "gpucloud.dev/reset-requested-at": "2026-11-21T12:00:00Z" };
    const asked = structuredClone(ready.stored);
    (asked.metadata as { annotations?: Record<string, string> }).annotations = annotations;
    // The RESET is carried out, its answer never arrives, and the process dies at its next status write.
    await fetch(`${sim.adminUrl}/faults`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        lost_responses: [{ method: "PATCH", route: "/projects/:projectId/vms/:vmId", count: 1 }],
      }),
    });
    const dying = memoryKube(asked, { write: 2, when: "before" });
    const before = operator(sim, dying, claims.attach());
    expect(await before.pass()).toMatchObject({ type: "crashed" });
    before.account.stop();
    expect((dying.stored.status as ManagedStatusBase).actionPending?.name).toBe("RESET");
    await new Promise((resolve) => setTimeout(resolve, 3000)); // settled, then forgotten
    const restarted = memoryKube(dying.stored);
    const after = operator(sim, restarted, claims.attach());
    for (let i = 0; i < 20; i++) {
      await after.pass();
      const status = restarted.stored.status as ManagedStatusBase;
      if (status.lastResetRequestedAt === annotations["gpucloud.dev/reset-requested-at"]) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    after.account.stop();
    const status = restarted.stored.status as ManagedStatusBase;
    expect(status.actionPending).toBeUndefined();
    expect(status.lastResetRequestedAt).toBe("2026-11-21T12:00:00Z");
    const counts = (await (await fetch(`${sim.adminUrl}/requests`)).json()) as { counts: Record<string, number> };
    expect(counts.counts["PATCH /v0.1/projects/:projectId/vms/:vmId"]).toBe(1);
  });

  it("a lost answer to the create (applied, socket dropped) still ends with one VM, through the full operator", async () => {
    env = await startEnv({
      simulator: { faults: { lost_responses: [{ method: "POST", route: "/projects/:projectId/vms", count: 1 }] } },
    });
    await env.apply("GpuVm", "lost", vmSpec());
    const ready = await env.waitReady("GpuVm", "lost", 15_000);
    expect(condition(ready, "Ready")?.reason).toBe("Available");
    const vms = await vmsNamed(env.sim, "default-lost");
    expect(vms).toHaveLength(1);
    expect(ready.status?.id).toBe(vms[0]?.id);
  });
});
