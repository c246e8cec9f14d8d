// The chaos run's disruptions of the leader while its objects are applied under faults: SIGKILLs at seeded moments,
// two of them right after a disk resize and a VM type change went in flight, and SIGSTOPs past its Lease (the
// standby takes over; the frozen one must act on nothing it had decided). A Lease still naming a process killed
// before does not count as a leader.
import { setTimeout as sleep } from "node:timers/promises";
import { eventually } from "../../util/eventually.ts";
import { LEASE_DURATION_MS, type PlannedRun, POLL_MS } from "./rig.ts";
import { isReady } from "./workload.ts";

export class LeaderDisruptions {
  kills = 0;
  freezes = 0;
  /** The changes a targeted kill followed, and whether their operation was in flight when it came. */
  readonly inFlight: { change: string; operationInFlight: boolean }[] = [];
  /** Lease identities of the processes killed so far. */
  readonly #killed = new Set<string>();
  readonly #plan: PlannedRun;

  constructor(plan: PlannedRun) {
    this.#plan = plan;
  }

  /** SIGKILLs and freezes of the leader at seeded moments, one after the other. */
  async runAsPlanned(chaosStart: number): Promise<void> {
    const { chaosMs, kills, freezes } = this.#plan.profile;
    const targeted = Math.min(2, kills);
    const at = (): number => Math.round(chaosMs * (0.1 + 0.8 * this.#plan.random.next()));
    const schedule: { atMs: number; run: () => Promise<void> }[] = Array.from({ length: kills - targeted }, () => ({
      atMs: at(),
      run: () => this.#killLeader("at random"),
    }));
    for (let i = 0; i < freezes; i++) schedule.push({ atMs: at(), run: () => this.#freezeLeader() });
    if (targeted >= 1) schedule.push({ atMs: chaosMs * 0.3, run: () => this.#killInFlight("disk resize") });
    if (targeted >= 2) schedule.push({ atMs: chaosMs * 0.55, run: () => this.#killInFlight("VM type change") });
    schedule.sort((a, b) => a.atMs - b.atMs);
    for (const step of schedule) {
      const wait = chaosStart + step.atMs - Date.now();
      if (wait > 0) await sleep(wait);
      await step.run();
    }
  }

  /** The replica leading now: a Lease still naming a process killed before does not count. */
  async #liveLeader(): Promise<{ name: string; identity: string }> {
    return eventually(
      "a live leader",
      async () => {
        const current = await this.#plan.rig.leader();
        return current !== undefined && !this.#killed.has(current.identity) ? current : undefined;
      },
      60_000,
      POLL_MS,
    );
  }

  /** SIGSTOP the leader past its Lease (the standby takes over), then SIGCONT: it must act on nothing it had decided. */
  async #freezeLeader(): Promise<void> {
    const leader = await this.#liveLeader();
    this.freezes++;
    const ms = LEASE_DURATION_MS + 3000;
    this.#plan.say(`SIGSTOP ${leader.name} for ${ms} ms, freeze ${this.freezes} of ${this.#plan.profile.freezes}`);
    await this.#plan.rig.replicas.freeze(leader.name, ms);
  }

  /** SIGKILL the replica leading now. */
  async #killLeader(why: string): Promise<void> {
    const leader = await this.#liveLeader();
    this.#killed.add(leader.identity);
    this.kills++;
    this.#plan.say(`SIGKILL ${leader.name} (${why}), kill ${this.kills} of ${this.#plan.profile.kills}`);
    await this.#plan.rig.replicas.kill(leader.name, 2000);
  }

  /** Change a Ready disk's size or VM's type, wait until its operation is in flight, then kill the leader. */
  async #killInFlight(change: "disk resize" | "VM type change"): Promise<void> {
    const kind = change === "disk resize" ? "GpuDisk" : "GpuVm";
    const candidates = this.#plan.healthy.filter((object) => object.kind === kind);
    const target = await eventually(
      `a Ready ${kind} to change`,
      async () => {
        const object = this.#plan.random.pick(candidates);
        return isReady(await this.#plan.rig.read(object)) ? object : undefined;
      },
      this.#plan.profile.chaosMs,
      POLL_MS,
    );
    const spec = change === "disk resize" ? { size: "200GiB" } : { type: "a40.2x" };
    await this.#plan.rig.patchSpec(target, spec);
    target.spec = { ...target.spec, ...spec };
    let operationInFlight = false;
    const deadline = Date.now() + 20_000;
    while (!operationInFlight && Date.now() < deadline) {
      const operation = (await this.#plan.rig.read(target).catch(() => undefined))?.status?.operation;
      operationInFlight = operation?.state === "IN_PROGRESS" && operation.name !== "CREATE";
      if (!operationInFlight) await sleep(20);
    }
    this.inFlight.push({ change: `${change} of ${target.namespace}/${target.name}`, operationInFlight });
    await this.#killLeader(`${change} ${operationInFlight ? "in flight" : "requested"}`);
  }
}
