// The chaos run's RESETs: every `resetEvery`-th healthy VM is asked for one (its annotation) at a seeded moment
// while faults are on, and in the end each must have been carried out exactly once: a RESET is not idempotent, so
// one sent again for the same intent (after a kill, a lost answer) would reset the VM twice.
import { setTimeout as sleep } from "node:timers/promises";
import { ANNOTATIONS } from "../../api/common.ts";
import { eventually } from "../../util/eventually.ts";
import { detailOf, type Invariants } from "./report.ts";
import { type PlannedRun, POLL_MS } from "./rig.ts";
import { HEALTHY_NAMESPACES, listObjects } from "./workload.ts";

export class ResetRequests {
  /** RESETs asked for (annotations), carried out by the cloud, and FAILED (sent again). */
  figures = { asked: 0, carriedOut: 0, failed: 0 };
  /** `namespace/name` of a VM → the reset it was asked for (its annotation's value). */
  readonly #asked = new Map<string, string>();
  readonly #plan: PlannedRun;

  constructor(plan: PlannedRun) {
    this.#plan = plan;
  }

  /** Every `resetEvery`-th VM is asked for a RESET (its annotation) at a seeded moment while faults are on. */
  async askAsPlanned(chaosStart: number): Promise<void> {
    const vms = this.#plan.healthy.filter((object) => object.kind === "GpuVm");
    const asked = vms
      .filter((_, index) => index % this.#plan.profile.resetEvery === 0)
      .map((object) => ({
        object,
        atMs: Math.round(this.#plan.profile.chaosMs * (0.2 + 0.6 * this.#plan.random.next())),
      }))
      .sort((a, b) => a.atMs - b.atMs);
    for (const { object, atMs } of asked) {
      const wait = chaosStart + atMs - Date.now();
      if (wait > 0) await sleep(wait);
      const value = new Date().toISOString();
      try {
        await this.#plan.rig.annotate(object, { [ANNOTATIONS.resetRequestedAt]: value });
        this.#asked.set(`${object.namespace}/${object.name}`, value);
      } catch (error) {
        this.#plan.say(`could not ask ${object.namespace}/${object.name} for a reset: ${String(error)}`);
      }
    }
  }

  /**
   * Every reset asked for was carried out, and none twice: per VM, the RESETs the cloud received and carried out
   * (their operation not FAILED; a failed one is sent again, rightly) are exactly one per annotation.
   */
  async check(invariants: Invariants): Promise<void> {
    const { custom, cloud, sim } = this.#plan.rig;
    const served = async () => {
      const vms = (await listObjects(custom, HEALTHY_NAMESPACES)).filter((object) => object.kind === "GpuVm");
      const byKey = new Map(vms.map((vm) => [`${vm.metadata.namespace}/${vm.metadata.name}`, vm]));
      const done = [...this.#asked].every(([key, value]) => byKey.get(key)?.status?.lastResetRequestedAt === value);
      return done ? byKey : undefined;
    };
    const byKey = await eventually("every reset served", served, this.#plan.profile.convergeTimeoutMs, POLL_MS).catch(
      async () => (await served()) ?? new Map(),
    );
    const writes = (await this.#plan.rig.cloudWrites()).filter(
      (write) => write.action === "RESET" && write.operationId,
    );
    const problems: string[] = [];
    let carriedOut = 0;
    let failed = 0;
    for (const [key, value] of this.#asked) {
      const vm = byKey.get(key);
      if (vm?.status?.lastResetRequestedAt !== value) problems.push(`${key}: reset ${value} not served`);
      const id = vm?.status?.id;
      const sent = writes.filter((write) => id !== undefined && write.path.endsWith(`/vms/${id}`));
      let succeeded = 0;
      for (const write of sent) {
        const operation = await cloud.operations.get(sim.projectId, "vm", write.operationId ?? "");
        if (operation.state === "FAILED") failed++;
        else succeeded++;
      }
      carriedOut += succeeded;
      if (succeeded > 1) problems.push(`${key}: ${succeeded} RESETs carried out for one annotation`);
    }
    this.figures = { asked: this.#asked.size, carriedOut, failed };
    invariants.check(
      "no cloud action sent twice for one intent",
      problems.length === 0,
      `${this.#asked.size} resets asked for, ${carriedOut} carried out, ${failed} FAILED (sent again)${detailOf(problems)}`,
    );
  }
}
