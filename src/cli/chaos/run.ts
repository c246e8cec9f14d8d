// One chaos run, phase by phase: set up (rig.ts), time a healthy VM alone and beside the hostile tenants, apply
// every object at once under faults and SIGKILLs of the leader (in the full profile also while a disk resize and a
// VM type change are in flight), stop the faults and time the convergence, watch memory and descriptors while
// steady, delete everything, and check what is left, the processes and the logs.
import { loadavg } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { eventually } from "../../util/eventually.ts";
import { checkOwnership, cloudInventory, flatness, scanLogs, writesWithoutLease } from "./checks.ts";
import { LeaderDisruptions } from "./disruptions.ts";
import { CLOUD_FAULTS, KubeFaults } from "./faults.ts";
import type { ChaosProfile } from "./profiles.ts";
import { type Random, seededRandom } from "./random.ts";
import { type ChaosReport, detailOf, Invariants } from "./report.ts";
import { ResetRequests } from "./resets.ts";
import { LEASE_DURATION_MS, POLL_MS, REPLICA_NAMES, Rig } from "./rig.ts";
import { TRESPASS_NAMESPACES, Trespasser } from "./trespasser.ts";
import {
  describeObject,
  GROUP_VERSION,
  HEALTHY_NAMESPACES,
  HOSTILE_NAMESPACES,
  healthyObjects,
  hostileObjects,
  inParallel,
  isReady,
  KIND_ORDER,
  type LiveObject,
  listObjects,
  type ObjectSpec,
  PLURALS,
  poolMembers,
  readyNow,
  vmSpecOf,
} from "./workload.ts";

export interface ChaosOptions {
  profile: ChaosProfile;
  seed: number;
  stateDir: string;
  /** Progress lines (stderr). */
  say(line: string): void;
}

const round2 = (n: number): number => Math.round(n * 100) / 100;
const mib = (bytes: number): string => `${Math.round(bytes / 1024 / 1024)} MiB`;

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const rig = await Rig.start(options.profile, seededRandom(options.seed ^ 0x5eed), options.stateDir);
  return new ChaosRun(options, rig).run();
}

class ChaosRun {
  readonly #options: ChaosOptions;
  readonly #profile: ChaosProfile;
  readonly #rig: Rig;
  readonly #started = Date.now();
  readonly #loadStart = loadavg().map(round2);
  readonly #healthy: ObjectSpec[];
  readonly #hostile: ObjectSpec[];
  readonly #probes: ObjectSpec[] = ["probe-warm-up", "probe-alone", "probe-beside-hostile"].map((name) => ({
    kind: "GpuVm",
    namespace: HEALTHY_NAMESPACES[0],
    name,
    spec: vmSpecOf("a40.1x"),
  }));
  readonly #invariants: Invariants;
  /** A tenant with rights in its own namespaces only, trying to take the probes' VMs while the chaos goes on. */
  readonly #trespasser: Trespasser;
  readonly #timers: NodeJS.Timeout[] = [];
  #before = new Set<string>();
  readonly #disruptions: LeaderDisruptions;
  readonly #resets: ResetRequests;
  readonly #kubeFaults = new KubeFaults();
  /** Seeded: the moments of the disruptions and resets, the trespasser's pace. */
  readonly #random: Random;
  #simulatorFaults: Record<string, number> = {};
  #hostileTimes = { aloneMs: 0, besideMs: 0 };
  #convergeMs: number | undefined;
  #ownership = { duplicates: 0, leaks: 0 };
  #left = { stuck: 0, ownedSecrets: 0, cloud: 0 };
  #steadyWindow = { from: Number.POSITIVE_INFINITY, to: Number.POSITIVE_INFINITY };
  /** Phase name → when it began (the replicas' sample clock). */
  readonly #phases: [string, number][] = [];
  #allReadyUnderFaultsMs: number | undefined;

  constructor(options: ChaosOptions, rig: Rig) {
    this.#options = options;
    this.#profile = options.profile;
    this.#rig = rig;
    this.#random = seededRandom(options.seed);
    this.#healthy = healthyObjects(options.profile);
    this.#hostile = hostileObjects(options.profile);
    this.#invariants = new Invariants(options.say);
    const planned = { rig, profile: options.profile, random: this.#random, healthy: this.#healthy, say: options.say };
    this.#disruptions = new LeaderDisruptions(planned);
    this.#resets = new ResetRequests(planned);
    this.#trespasser = new Trespasser(rig, seededRandom(options.seed ^ 0x7e5), options.say);
  }

  #check(name: string, ok: boolean, detail: string): void {
    this.#invariants.check(name, ok, detail);
  }

  async run(): Promise<ChaosReport> {
    const rig = this.#rig;
    try {
      this.#before = new Set((await cloudInventory(rig.cloud, rig.sim.projectId)).map((resource) => resource.id));
      for (const name of REPLICA_NAMES) rig.replicas.start(name);
      this.#timers.push(setInterval(() => void rig.replicas.sample(), 2000));
      await eventually("a leader", () => rig.leader(), 120_000, POLL_MS);
      this.#options.say(`leader elected; ${this.#healthy.length} healthy and ${this.#hostile.length} hostile objects`);
      this.#phase("hostile tenants");
      await this.#hostileTenants();
      // Its victims: the probes, Ready now and changed by nobody for the rest of the run.
      await this.#trespasser.prepare(this.#probes);
      this.#phase("chaos");
      await this.#chaos();
      this.#phase("converge");
      await this.#converge();
      this.#phase("steady");
      this.#steadyWindow.from = rig.replicas.elapsedMs();
      await sleep(this.#profile.steadyMs);
      this.#steadyWindow.to = rig.replicas.elapsedMs();
      this.#phase("delete");
      await this.#deleteEverything();
      await this.#checkLeaseWrites();
    } finally {
      for (const timer of this.#timers.splice(0)) clearInterval(timer);
      await rig.close();
    }
    return this.#report();
  }

  /** Healthy objects there should be: applied, probes, and the pools' replicas with their disks. */
  #wanted(): number {
    return this.#healthy.length + this.#probes.length + poolMembers(this.#profile);
  }

  #phase(name: string): void {
    this.#phases.push([name, this.#rig.replicas.elapsedMs()]);
  }

  #peakRssByPhase(): Record<string, number> {
    const samples = this.#rig.replicas.samples;
    return Object.fromEntries(
      this.#phases.map(([name, from], index) => {
        const to = this.#phases[index + 1]?.[1] ?? Number.POSITIVE_INFINITY;
        const inPhase = samples.filter((sample) => sample.atMs >= from && sample.atMs < to);
        return [name, Math.max(0, ...inPhase.map((sample) => sample.rssBytes))];
      }),
    );
  }

  async #timeToReady(object: ObjectSpec): Promise<number> {
    const begin = performance.now();
    await this.#rig.apply(object);
    await eventually(
      `${object.name} Ready`,
      async () => (isReady(await this.#rig.read(object)) ? true : undefined),
      180_000,
      POLL_MS,
    );
    return Math.round(performance.now() - begin);
  }

  /** A healthy VM alone (after a warm-up one), then beside the hostile tenants' objects. */
  async #hostileTenants(): Promise<void> {
    const [warmUp, alone, beside] = this.#probes as [ObjectSpec, ObjectSpec, ObjectSpec];
    await this.#timeToReady(warmUp);
    const aloneMs = await this.#timeToReady(alone);
    await inParallel(this.#hostile, 16, (object) => this.#rig.apply(object));
    await sleep(3000); // their requests are in flight (or failing) now
    const besideMs = await this.#timeToReady(beside);
    this.#hostileTimes = { aloneMs, besideMs };
    this.#options.say(`hostile tenants: a healthy VM took ${aloneMs} ms alone and ${besideMs} ms beside them`);
  }

  /** Faults on, every object at once, the kills; faults off at the end of the chaos time. */
  async #chaos(): Promise<void> {
    await this.#rig.admin("PUT", "/faults", CLOUD_FAULTS);
    this.#kubeFaults.start(this.#rig.double);
    const chaosStart = Date.now();
    let watching = true;
    const allReady = (async () => {
      const wanted = this.#wanted();
      while (watching) {
        const live = await listObjects(this.#rig.custom, HEALTHY_NAMESPACES).catch(() => []);
        if (live.length === wanted && live.every(readyNow)) {
          this.#allReadyUnderFaultsMs = Date.now() - chaosStart;
          return;
        }
        await sleep(2000);
      }
    })();
    await Promise.all([
      inParallel(this.#healthy, 32, (object) => this.#rig.apply(object)),
      this.#disruptions.runAsPlanned(chaosStart),
      this.#resets.askAsPlanned(chaosStart),
      this.#trespass(chaosStart),
    ]);
    const left = chaosStart + this.#profile.chaosMs - Date.now();
    if (left > 0) await sleep(left);
    watching = false;
    await allReady;
    this.#kubeFaults.stop();
    await this.#rig.admin("DELETE", "/faults");
    this.#simulatorFaults = (await this.#rig.admin("GET", "/faults/fired")) as Record<string, number>;
  }

  /** The trespasser's moves, one every 2 to 4 s while the chaos lasts. */
  async #trespass(chaosStart: number): Promise<void> {
    while (Date.now() - chaosStart < this.#profile.chaosMs - 5000) {
      await this.#trespasser.move();
      await sleep(2000 + Math.floor(this.#random.next() * 2000));
    }
    this.#options.say(`trespasser: ${this.#trespasser.moves.length} moves`);
  }

  /** Faults off: every healthy object Ready, one cloud resource each, the changes in the cloud. */
  async #converge(): Promise<void> {
    const { custom, cloud, sim } = this.#rig;
    const stopped = performance.now();
    this.#options.say("faults stopped; waiting for every healthy object to be Ready");
    const wanted = this.#wanted();
    let live: LiveObject[] = [];
    try {
      live = await eventually(
        "every healthy object Ready",
        async () => {
          const objects = await listObjects(custom, HEALTHY_NAMESPACES);
          return objects.length === wanted && objects.every(readyNow) ? objects : undefined;
        },
        this.#profile.convergeTimeoutMs,
        POLL_MS,
      );
      this.#convergeMs = Math.round(performance.now() - stopped);
      this.#check(
        "every healthy object Ready",
        true,
        `${wanted} Ready ${this.#convergeMs} ms after the faults stopped`,
      );
    } catch {
      live = await listObjects(custom, HEALTHY_NAMESPACES);
      const notReady = live.filter((object) => !readyNow(object)).map(describeObject);
      const absent = wanted - live.length;
      const detail = `${notReady.length + absent} not Ready after ${this.#profile.convergeTimeoutMs} ms`;
      this.#check("every healthy object Ready", false, `${detail}${detailOf(notReady)}`);
    }
    // A pool is no cloud resource; its replicas are (they are GpuVms and GpuDisks like the others). The trespasser's
    // objects that hold a resource count too (the others wait on a name or a claim they cannot have).
    await this.#trespasser.restore();
    const trespassing = (await listObjects(custom, Object.values(TRESPASS_NAMESPACES))).filter(
      (object) => object.status?.id !== undefined,
    );
    const resourceObjects = [...live, ...trespassing].filter((object) => object.kind !== "GpuVmPool");
    const ownership = checkOwnership(resourceObjects, await cloudInventory(cloud, sim.projectId), this.#before);
    this.#ownership = { duplicates: ownership.duplicates.length, leaks: ownership.leaks.length };
    const problems = [...ownership.duplicates, ...ownership.leaks, ...ownership.missing];
    this.#check(
      "exactly one cloud resource per object",
      problems.length === 0,
      `${ownership.duplicates.length} duplicates, ${ownership.leaks.length} leaks, ${ownership.missing.length} objects without their resource${detailOf(problems)}`,
    );
    for (const check of await this.#trespasser.check()) this.#check(check.name, check.ok, check.detail);
    const changed = live.filter((object) =>
      this.#disruptions.inFlight.some((kill) =>
        kill.change.endsWith(`${object.metadata.namespace}/${object.metadata.name}`),
      ),
    );
    const applied = await Promise.all(
      changed.map(async (object) => {
        const id = object.status?.id ?? "";
        if (object.kind === "GpuDisk") return (await cloud.disks.get(sim.projectId, id)).size === "200GiB";
        return (await cloud.vms.get(sim.projectId, id)).type === "a40.2x";
      }),
    );
    this.#check(
      "changes made across a SIGKILL reached the cloud",
      applied.length === this.#disruptions.inFlight.length && applied.every(Boolean),
      `${applied.filter(Boolean).length} of ${this.#disruptions.inFlight.length}`,
    );
    await this.#resets.check(this.#invariants);
  }

  /** From both servers' write logs: nothing written by a replica while another held the Lease, or after it ran out. */
  async #checkLeaseWrites(): Promise<void> {
    const writes = await this.#rig.replicaWrites();
    const found = writesWithoutLease(writes, LEASE_DURATION_MS, this.#rig.replicas.thaws);
    this.#check(
      "no write from a replica without its lease",
      found.length === 0,
      `${writes.length} writes of the replicas checked, ${found.length} without the Lease${detailOf(found)}`,
    );
  }

  /** Delete every object of every tenant; nothing may be left: objects, cloud resources, owned Secrets. */
  async #deleteEverything(): Promise<void> {
    const { custom, core, cloud, sim } = this.#rig;
    this.#options.say("deleting every object");
    const namespaces = [
      ...HEALTHY_NAMESPACES,
      ...Object.values(HOSTILE_NAMESPACES),
      ...Object.values(TRESPASS_NAMESPACES),
    ];
    for (const namespace of namespaces) {
      for (const kind of KIND_ORDER) {
        await custom.deleteCollectionNamespacedCustomObject({ ...GROUP_VERSION, plural: PLURALS[kind], namespace });
      }
    }
    const gone = async () => ((await listObjects(custom, namespaces)).length === 0 ? true : undefined);
    await eventually("every object gone", gone, this.#profile.deleteTimeoutMs, POLL_MS).catch(() => undefined);
    const stuck = await listObjects(custom, namespaces);
    this.#check(
      "no finalizer left",
      stuck.length === 0,
      `${stuck.length} objects left${detailOf(stuck.map(describeObject))}`,
    );
    const leftover = (await cloudInventory(cloud, sim.projectId)).filter((resource) => !this.#before.has(resource.id));
    const leftoverNames = leftover.map((resource) => `${resource.kind}/${resource.name}`);
    this.#check(
      "the cloud holds nothing the run created",
      leftover.length === 0,
      `${leftover.length} left${detailOf(leftoverNames)}`,
    );
    const owned: string[] = [];
    for (const namespace of HEALTHY_NAMESPACES) {
      for (const secret of (await core.listNamespacedSecret({ namespace })).items) {
        if ((secret.metadata?.ownerReferences ?? []).length > 0) owned.push(`${namespace}/${secret.metadata?.name}`);
      }
    }
    this.#check("no owned Secret left", owned.length === 0, `${owned.length} left${detailOf(owned)}`);
    this.#left = { stuck: stuck.length, ownedSecrets: owned.length, cloud: leftover.length };
  }

  /** After the replicas stopped: their exits and logs, memory and descriptors; then the figures. */
  async #report(): Promise<ChaosReport> {
    const { replicas } = this.#rig;
    const logs = await scanLogs(replicas.logFiles, this.#rig.secrets);
    const unexpected = replicas.unexpectedExits().map((exit) => `${exit.replica} exited ${exit.code ?? exit.signal}`);
    this.#check(
      "no crash and no unhandled rejection",
      logs.crashes.length === 0 && unexpected.length === 0,
      `${logs.crashes.length} crash lines, ${unexpected.length} unexpected exits${detailOf([...logs.crashes, ...unexpected])}`,
    );
    this.#check(
      "no secret value in any log line",
      logs.secretLeaks.length === 0,
      `${logs.lines} lines scanned${detailOf(logs.secretLeaks)}`,
    );
    const { kills, freezes, inFlight } = this.#disruptions;
    this.#check("SIGKILLs as planned", kills === this.#profile.kills, `${kills} of ${this.#profile.kills}`);
    this.#check("freezes as planned", freezes === this.#profile.freezes, `${freezes} of ${this.#profile.freezes}`);
    const { from, to } = this.#steadyWindow;
    const steady = flatness(replicas.samples.filter((sample) => sample.atMs >= from && sample.atMs <= to));
    const steadyText = steady.map(
      (r) => `${r.replica}: RSS ${mib(r.firstRssBytes)} → ${mib(r.lastRssBytes)}, fds ${r.firstFds} → ${r.lastFds}`,
    );
    this.#check(
      "memory and open file descriptors flat",
      steady.length > 0 && steady.every((replica) => replica.flat),
      steadyText.join("; ") || "no samples",
    );
    const byKind: Record<string, number> = {};
    for (const object of this.#healthy) byKind[object.kind] = (byKind[object.kind] ?? 0) + 1;
    const { aloneMs, besideMs } = this.#hostileTimes;
    const injected = Object.entries(this.#rig.double.faults.injected()).map(([status, n]) => [`http_${status}`, n]);
    injected.push(["watches_410_gone", this.#rig.double.faults.watchesGone()]);
    return {
      profile: this.#profile.name,
      seed: this.#options.seed,
      durationMs: Date.now() - this.#started,
      loadAverage: { start: this.#loadStart, end: loadavg().map(round2) },
      objects: {
        healthy: this.#healthy.length + this.#probes.length,
        poolReplicas: poolMembers(this.#profile),
        hostile: this.#hostile.length,
        byKind,
      },
      faults: {
        simulator: this.#simulatorFaults,
        kubernetes: { ...this.#kubeFaults.counts, ...Object.fromEntries(injected) },
      },
      kills: { total: kills, inFlight },
      freezes,
      resets: this.#resets.figures,
      duplicates: this.#ownership.duplicates,
      leaks: this.#ownership.leaks,
      stuckFinalizers: this.#left.stuck,
      ownedSecretsLeft: this.#left.ownedSecrets,
      cloudLeftAfterDelete: this.#left.cloud,
      convergeAfterFaultsMs: this.#convergeMs,
      peakRssBytes: Math.max(0, ...replicas.samples.map((sample) => sample.rssBytes)),
      peakRssByPhase: this.#peakRssByPhase(),
      allReadyUnderFaultsMs: this.#allReadyUnderFaultsMs,
      steady,
      hostile: {
        aloneMs,
        besideMs,
        ratio: aloneMs > 0 ? round2(besideMs / aloneMs) : 0,
        hits: Object.fromEntries(this.#rig.hostile.map((endpoint) => [endpoint.kind, endpoint.hits()])),
      },
      logs: {
        lines: logs.lines,
        errorLines: logs.errorLines,
        crashes: logs.crashes.length,
        secretLeaks: logs.secretLeaks.length,
      },
      invariants: this.#invariants.checked,
      stateDir: this.#options.stateDir,
    };
  }
}
