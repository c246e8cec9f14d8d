// Property test through the real operator (simulator + Kubernetes API test double): random sequences of spec
// changes, annotation changes, cloud faults, deletions and operator restarts over a few GpuVms, two of which
// claim one cloud name and two of which had colliding default names before 0.2; and tenants' moves against a
// victim VM of another namespace: an Observe object of its name switched to Manage and back, status.id edits
// pointing at it, a credentials Secret switched to another project and back, a namespace deleted and made again.
// Whatever the sequence:
//   - no cloud resource has two owners (no id in two claims; at rest, every VM is held once);
//   - no resource is changed by an object that does not own it (the victim's VM sees its CREATE only);
//   - nothing is created in an account under objects whose resources live in another (the second project stays
//     empty while its Secret only switched under existing VMs);
//   - no non-idempotent action is repeated (no mutating request answered 409; no more RESETs than reset
//     values asked; no more creates of a name than objects that could claim it);
//   - no status write is rejected (no 422 from the Kubernetes API, no StatusRejected);
//   - no object is left without its conditions.
// Deterministic by seed: GPUVM_PROPERTY_SEEDS=1,2,3 replays or widens the search (default: two seeds; CI runs
// more).
import { afterEach, describe, expect, it } from "vitest";
import { GROUP, VERSION } from "../../src/api/common.ts";
import type { Operation, Vm } from "../../src/cloud/wire.ts";
import { condition, type Env, type ManagedView, NAMESPACE, startEnv, vmSpec, WATCHED } from "./harness.ts";
import { seededRandom } from "./seeded-random.ts";

const SEEDS = (process.env.GPUVM_PROPERTY_SEEDS ?? "11,29")
  .split(",")
  .map((seed) => Number(seed.trim()))
  .filter((seed) => Number.isInteger(seed));
const STEPS = Number(process.env.GPUVM_PROPERTY_STEPS ?? 14);

interface Subject {
  namespace: string;
  name: string;
  spec: Record<string, unknown>;
}

/**
 * Two objects claim one cloud name; `default/x-vm` and `default-x/vm` shared a default name before 0.2; `mallory`
 * wants the victim's cloud name (and switches between Observe and Manage); `carol` has a Secret of her own; `dave`
 * lives in a namespace that is deleted now and then.
 */
const SUBJECTS: Subject[] = [
  { namespace: NAMESPACE, name: "alpha", spec: vmSpec({ cloudName: "shared-vm" }) },
  { namespace: "team-b", name: "beta", spec: vmSpec({ cloudName: "shared-vm" }) },
  { namespace: NAMESPACE, name: "x-vm", spec: vmSpec() },
  { namespace: "default-x", name: "vm", spec: vmSpec() },
  { namespace: "team-m", name: "mallory", spec: vmSpec({ cloudName: "victim-vm", managementPolicy: "Observe" }) },
  { namespace: "team-d", name: "dave", spec: vmSpec() },
];
/** The victim: created first, never changed by the run. */
const VICTIM: Subject = {
  namespace: "team-v",
  name: "victim",
  spec: vmSpec({ cloudName: "victim-vm", type: "a100.2x" }),
};
// (Its type differs from everyone else's: an object that took its VM would change it, which the run would see.)
/** Created first in a namespace with its own credentials Secret, which the run switches to another project. */
const CAROL: Subject = { namespace: "team-c", name: "carol", spec: vmSpec() };
const NAMESPACES = ["team-b", "default-x", "team-m", "team-d", "team-v", "team-c"];

const keyOf = (s: { namespace: string; name: string }) => `${s.namespace}/${s.name}`;
const ref = (s: Subject) => ({
  group: GROUP,
  version: VERSION,
  plural: "gpuvms",
  namespace: s.namespace,
  name: s.name,
});
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Counters of one operator process, read from its metrics before it stops. */
interface Counters {
  mutatingConflicts: string[];
  rejectedWrites: number;
}

async function countersOf(env: Env): Promise<Counters> {
  const text = await env.manager.metrics.registry.metrics();
  const mutatingConflicts = text
    .split("\n")
    .filter((line) => /^gpucloud_api_requests_total\{method="(POST|PATCH|PUT|DELETE)"[^}]*code="409"\}/.test(line));
  const rejectedWrites = text
    .split("\n")
    .filter((line) => /^rest_client_requests_total\{[^}]*code="422"/.test(line))
    .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
  return { mutatingConflicts, rejectedWrites };
}

class Run {
  readonly log: string[] = [];
  readonly violations: string[] = [];
  readonly resetsAsked = new Map<string, number>();
  /** Object instances created per cloud name (each may create it once). */
  readonly claimantsOfName = new Map<string, number>();
  /** key → VM ids the object held at some sample. */
  readonly held = new Map<string, Set<string>>();
  readonly present = new Set<string>();
  readonly counters: Counters = { mutatingConflicts: [], rejectedWrites: 0 };
  resetSerial = 0;
  readonly env: Env;
  readonly next: () => number;
  /** The victim's VM, once Ready. */
  victimId = "";
  /** The second project carol's Secret is switched to (and whether it names it now). */
  other: { projectId: string; apiKey: string } = { projectId: "", apiKey: "" };
  carolMoved = false;

  constructor(env: Env, seed: number) {
    this.env = env;
    this.next = seededRandom(seed);
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)] as T;
  }

  async get(subject: Subject): Promise<ManagedView | undefined> {
    try {
      return (await this.env.custom.getNamespacedCustomObject(ref(subject))) as ManagedView;
    } catch {
      return undefined;
    }
  }

  async create(subject: Subject): Promise<void> {
    await this.env.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      plural: "gpuvms",
      namespace: subject.namespace,
      body: { apiVersion: `${GROUP}/${VERSION}`, kind: "GpuVm", metadata: { name: subject.name }, spec: subject.spec },
    });
    this.present.add(keyOf(subject));
    const name = (subject.spec.cloudName as string | undefined) ?? `default-of:${keyOf(subject)}`;
    this.claimantsOfName.set(name, (this.claimantsOfName.get(name) ?? 0) + 1);
  }

  async patch(subject: Subject, body: Record<string, unknown>): Promise<void> {
    const { PatchStrategy, setHeaderOptions } = await import("@kubernetes/client-node");
    await this.env.custom
      .patchNamespacedCustomObject(
        { ...ref(subject), body },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      )
      .catch(() => undefined); // gone meanwhile (being deleted): nothing to change
  }

  /** One random step: a tenant's move (a third of them), or an owner's change, a fault or a restart. */
  async step(index: number): Promise<void> {
    if (this.next() < 0.33) return this.tenantMove(index);
    const subject = this.pick(SUBJECTS);
    const key = keyOf(subject);
    const roll = this.next();
    if (!this.present.has(key)) {
      this.log.push(`${index}: create ${key}`);
      await this.env.core.createNamespace({ body: { metadata: { name: subject.namespace } } }).catch(() => undefined);
      await this.create(subject).catch((error: unknown) => {
        // Its namespace is still terminating: made at a later step.
        this.log.push(`${index}: (not created: ${String(error).slice(0, 60)})`);
      });
    } else if (roll < 0.2) {
      const type = this.pick(["a100.1x", "a100.2x"]);
      this.log.push(`${index}: ${key} type ${type}`);
      await this.patch(subject, { spec: { type } });
    } else if (roll < 0.35) {
      const powerState = this.pick(["Running", "Stopped"]);
      this.log.push(`${index}: ${key} powerState ${powerState}`);
      await this.patch(subject, { spec: { powerState } });
    } else if (roll < 0.5) {
      // A new reset value; sometimes far longer than status can hold.
      const serial = ++this.resetSerial;
      const value =
        this.next() < 0.3
          ? `reset-${serial}-${"x".repeat(90)}`
          : `2026-11-22T10:00:${String(serial).padStart(2, "0")}Z`;
      this.log.push(`${index}: ${key} reset ${value.slice(0, 24)}`);
      this.resetsAsked.set(key, (this.resetsAsked.get(key) ?? 0) + 1);
      await this.patch(subject, { metadata: { annotations: { "gpucloud.dev/reset-requested-at": value } } });
    } else if (roll < 0.65) {
      const fault = this.pick(FAULTS);
      this.log.push(`${index}: fault ${fault.name}`);
      await this.env.admin("PUT", "/faults", fault.config);
    } else if (roll < 0.72) {
      this.log.push(`${index}: clear faults`);
      await this.env.admin("DELETE", "/faults");
    } else if (roll < 0.82) {
      this.log.push(`${index}: restart the operator`);
      await this.restart();
    } else {
      this.log.push(`${index}: delete ${key}`);
      await this.env.custom.deleteNamespacedCustomObject(ref(subject)).catch(() => undefined);
      this.present.delete(key);
      await this.waitGone(subject);
    }
  }

  /** What a hostile or careless tenant does (cases 1–4 of issue #28). */
  async tenantMove(index: number): Promise<void> {
    const move = this.pick(["policy", "status", "secret", "namespace"] as const);
    const mallory = SUBJECTS[4] as Subject;
    if (move === "policy" && this.present.has(keyOf(mallory))) {
      const managementPolicy = this.pick(["Observe", "Manage"]);
      this.log.push(`${index}: mallory managementPolicy ${managementPolicy}`);
      await this.patch(mallory, { spec: { managementPolicy } });
    } else if (move === "status") {
      const subject = this.pick(SUBJECTS);
      const id = this.next() < 0.7 ? this.victimId : `not-a-vm-${index}`;
      this.log.push(`${index}: ${keyOf(subject)} status.id := ${id === this.victimId ? "the victim's" : id}`);
      const { PatchStrategy, setHeaderOptions } = await import("@kubernetes/client-node");
      await this.env.custom
        .patchNamespacedCustomObjectStatus(
          { ...ref(subject), body: { status: { id, projectId: this.env.sim.projectId } } },
          setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
        )
        .catch(() => undefined);
    } else if (move === "secret") {
      this.carolMoved = !this.carolMoved;
      this.log.push(`${index}: carol's Secret names ${this.carolMoved ? "another project" : "her own again"}`);
      await this.carolSecret(this.carolMoved);
    } else {
      const dave = SUBJECTS[5] as Subject;
      this.log.push(`${index}: delete namespace team-d`);
      await this.env.core.deleteNamespace({ name: "team-d" }).catch(() => undefined);
      this.present.delete(keyOf(dave));
    }
  }

  async carolSecret(moved: boolean): Promise<void> {
    const { PatchStrategy, setHeaderOptions } = await import("@kubernetes/client-node");
    const stringData = moved
      ? { apiKey: this.other.apiKey, projectId: this.other.projectId }
      : { apiKey: this.env.sim.apiKey, projectId: this.env.sim.projectId };
    await this.env.core.patchNamespacedSecret(
      { namespace: CAROL.namespace, name: "gpucloud-credentials", body: { stringData } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
  }

  async restart(): Promise<void> {
    await this.collectCounters();
    await this.env.stopOperator();
    await this.env.startOperator();
  }

  async collectCounters(): Promise<void> {
    const counters = await countersOf(this.env);
    this.counters.mutatingConflicts.push(...counters.mutatingConflicts);
    this.counters.rejectedWrites += counters.rejectedWrites;
  }

  async waitGone(subject: Subject): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if ((await this.get(subject)) === undefined) return;
      await sleep(50);
    }
    // A delete held up by a fault is fine; it is checked again at rest.
  }

  /**
   * What must hold at any moment: one owner per resource (by the claims, which tenants cannot write: a status
   * edit may show any id for a moment), never a rejected status.
   */
  async sample(): Promise<void> {
    for (const subject of SUBJECTS) {
      const object = await this.get(subject);
      if (condition(object, "Ready")?.reason === "StatusRejected")
        this.violations.push(`${keyOf(subject)} StatusRejected: ${condition(object, "Ready")?.message}`);
    }
    const holders = new Map<string, string>();
    for (const claim of await claimsOf(this.env)) {
      if (claim.id === undefined) continue;
      const other = holders.get(claim.id);
      if (other !== undefined) this.violations.push(`two owners of ${claim.id}: ${other} and ${claim.holder}`);
      holders.set(claim.id, claim.holder);
      const held = this.held.get(claim.holder) ?? new Set<string>();
      held.add(claim.id);
      this.held.set(claim.holder, held);
    }
  }

  /** Faults off, carol's Secret restored; wait until every object has settled (Ready, or stalled on a conflict). */
  async settle(): Promise<void> {
    await this.env.admin("DELETE", "/faults");
    if (this.carolMoved) await this.carolSecret(false);
    const deadline = Date.now() + 30_000;
    let last = "";
    while (Date.now() < deadline) {
      const states: string[] = [];
      let settled = true;
      for (const subject of SUBJECTS) {
        const object = await this.get(subject);
        if (!this.present.has(keyOf(subject))) {
          if (object !== undefined) settled = false;
          continue;
        }
        const ready = condition(object, "Ready");
        const operation = object?.status?.operation as { state?: string } | undefined;
        const done =
          object?.status?.observedGeneration === object?.metadata.generation &&
          operation?.state !== "IN_PROGRESS" &&
          (ready?.status === "True" || ["NameConflict", "NotPermitted", "Observed"].includes(ready?.reason ?? ""));
        states.push(`${keyOf(subject)}=${ready?.reason ?? "none"}`);
        if (!done) settled = false;
      }
      last = states.join(" ");
      if (settled) return;
      await sleep(100);
    }
    this.violations.push(`did not settle within 30 s: ${last}`);
  }
}

/** Cloud faults the runs draw from (each replaces the previous set). */
const FAULTS: { name: string; config: Record<string, unknown> }[] = [
  {
    name: "a third of VM writes answer 503",
    config: { errors: [{ route: "/projects/:projectId/vms*", method: "PATCH", status: 503, rate: 0.33 }] },
  },
  {
    name: "the next VM action's answer is lost",
    config: { lost_responses: [{ route: "/projects/:projectId/vms/:vmId", method: "PATCH", count: 1 }] },
  },
  {
    name: "the next VM create's answer is lost",
    config: { lost_responses: [{ route: "/projects/:projectId/vms", method: "POST", count: 1 }] },
  },
  {
    name: "VM operations fail with internal_error now and then",
    config: { operation_failures: [{ family: "vm", code: "internal_error", rate: 0.5, count: 2 }] },
  },
  {
    name: "VM lists answer 503 now and then, and are slow",
    config: {
      errors: [{ route: "/projects/:projectId/vms", method: "GET", status: 503, rate: 0.3 }],
      latency: [{ route: "/projects/:projectId/vms*", ms: 80 }],
    },
  },
];

let env: Env | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** The claims as the API server holds them: who holds which VM id. */
async function claimsOf(e: Env): Promise<{ holder: string; id?: string }[]> {
  const list = (await e.custom.listNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    plural: "gpucloudclaims",
    namespace: NAMESPACE,
  })) as { items: { spec: { id?: string; holder: { namespace: string; name: string } } }[] };
  return list.items.map((item) => ({
    holder: `${item.spec.holder.namespace}/${item.spec.holder.name}`,
    ...(item.spec.id !== undefined ? { id: item.spec.id } : {}),
  }));
}

/**
 * At rest: every VM in the cloud is claimed by exactly one live object, which shows it in status; every claimed id
 * exists; conditions are there.
 */
async function expectOneOwnerEach(run: Run, context: string): Promise<void> {
  const vms = (await run.env.cloud<{ items: Vm[] }>("vms?limit=500")).items;
  const claims = await claimsOf(run.env);
  for (const subject of [...SUBJECTS, VICTIM, CAROL]) {
    if (!run.present.has(keyOf(subject))) continue;
    const object = await run.get(subject);
    const types = object?.status?.conditions?.map((c) => c.type);
    expect(types, `${keyOf(subject)} conditions; ${context}`).toEqual(
      expect.arrayContaining(["Ready", "Reconciling", "Stalled"]),
    );
    const claimed = claims.find((claim) => claim.holder === keyOf(subject))?.id;
    if (claimed === undefined) continue;
    expect(object?.status?.id, `${keyOf(subject)} shows the VM its claim records; ${context}`).toBe(claimed);
    expect(
      vms.some((vm) => vm.id === claimed),
      `${keyOf(subject)} holds ${claimed}, which exists; ${context}`,
    ).toBe(true);
  }
  for (const vm of vms) {
    const holders = claims.filter((claim) => claim.id === vm.id).map((claim) => claim.holder);
    expect(holders, `VM ${vm.name} (${vm.id}) has one owner; ${context}`).toHaveLength(1);
    expect(run.present.has(holders[0] ?? ""), `VM ${vm.name}'s owner is alive; ${context}`).toBe(true);
  }
}

/** The victim's VM was changed by nobody (its CREATE only), and the second project never got a VM. */
async function expectNoForeignTouch(run: Run, context: string): Promise<void> {
  const operations = (await run.env.cloud<{ items: Operation[] }>(`vms/operations?resource_id=${run.victimId}`)).items;
  expect(
    operations.map((op) => op.metadata.operation_name),
    `operations on the victim's VM; ${context}`,
  ).toEqual(["CREATE"]);
  const victim = await run.get(VICTIM);
  expect(victim?.status?.id, `the victim keeps its VM; ${context}`).toBe(run.victimId);
  expect(condition(victim, "Ready")?.status, `the victim is Ready; ${context}`).toBe("True");
  const response = await fetch(`${run.env.sim.url}/projects/${run.other.projectId}/vms?limit=500`, {
    headers: { authorization: `Bearer ${run.other.apiKey}` },
  });
  const created = ((await response.json()) as { items: Vm[] }).items;
  expect(
    created.map((vm) => vm.name),
    `VMs made in the project carol's Secret switched to; ${context}`,
  ).toEqual([]);
}

/** No action repeated: nothing answered 409, no RESET or create beyond what was asked. */
async function expectNoRepeatedAction(run: Run, context: string): Promise<void> {
  expect(run.counters.mutatingConflicts, context).toEqual([]);
  // A FAILED operation did not happen, and what it was for is asked again: only the others count.
  const operations = (await run.env.cloud<{ items: Operation[] }>("vms/operations")).items.filter(
    (op) => op.state !== "FAILED",
  );
  for (const [key, ids] of run.held) {
    const resets = operations.filter((op) => op.metadata.operation_name === "RESET" && ids.has(op.metadata.id));
    const asked = run.resetsAsked.get(key) ?? 0;
    expect(resets.length, `RESETs of ${key}'s VMs (asked ${asked}); ${context}`).toBeLessThanOrEqual(asked);
  }
  const sharedCreates = operations.filter(
    (op) =>
      op.metadata.operation_name === "CREATE" &&
      (op.metadata.request as { name?: unknown } | undefined)?.name === "shared-vm",
  ).length;
  const claimants = run.claimantsOfName.get("shared-vm") ?? 0;
  expect(sharedCreates, `creates of shared-vm (${claimants} claimants); ${context}`).toBeLessThanOrEqual(claimants);
}

/** A second tenant of the simulator (its own organization, project and API key). */
async function otherProject(e: Env): Promise<{ projectId: string; apiKey: string }> {
  const made = (await e.admin("POST", "/projects", { name: "elsewhere" })) as { project_id: string; api_key: string };
  return { projectId: made.project_id, apiKey: made.api_key };
}

/** The id of a subject's VM once it is Ready. */
async function readyId(run: Run, subject: Subject): Promise<string> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const object = await run.get(subject);
    if (condition(object, "Ready")?.status === "True" && object?.status?.id !== undefined) return object.status.id;
    await sleep(50);
  }
  throw new Error(`${keyOf(subject)} never Ready`);
}

describe("ownership and safe writes under random sequences", () => {
  it.each(SEEDS)(
    "seed %i: one owner per resource, no repeated action, no rejected status, conditions always",
    async (seed) => {
      env = await startEnv({
        config: {
          credentialsSecret: { namespace: NAMESPACE, name: "gpucloud-credentials" },
          operationPollIntervalMs: 50,
        },
      });
      for (const namespace of NAMESPACES) {
        await env.core.createNamespace({ body: { metadata: { name: namespace } } }).catch(() => undefined);
      }
      const run = new Run(env, seed);
      run.other = await otherProject(env);
      await env.core.createNamespacedSecret({
        namespace: CAROL.namespace,
        body: {
          metadata: { name: "gpucloud-credentials", labels: WATCHED },
          stringData: { apiKey: env.sim.apiKey, projectId: env.sim.projectId, apiUrl: env.sim.url },
        },
      });
      await run.create(VICTIM);
      await run.create(CAROL);
      run.victimId = await readyId(run, VICTIM);
      await readyId(run, CAROL);
      for (let index = 0; index < STEPS; index++) {
        await run.step(index);
        await sleep(100 + Math.floor(run.next() * 400));
        await run.sample();
      }
      await run.settle();
      await run.sample();
      await run.collectCounters();
      const context = `seed ${seed}, steps:\n${run.log.join("\n")}`;

      await expectOneOwnerEach(run, context);
      await expectNoForeignTouch(run, context);
      await expectNoRepeatedAction(run, context);
      // No rejected status write, ever.
      expect(run.counters.rejectedWrites, context).toBe(0);
      expect(run.violations, context).toEqual([]);
    },
    120_000,
  );
});
