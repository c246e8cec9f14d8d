// Fenced leadership (issue #34) as a failure tester tries it: two operator replicas as real processes with
// --leader-elect, the leader frozen with SIGSTOP while it works (resets, creates, a pool's roll), resumed with
// SIGCONT after the standby took over (or, shorter than the Lease, before anyone could). The servers' write logs
// (the cloud simulator's, and the Kubernetes API's: the test double's own, or kube-apiserver's audit log) say which
// replica sent what when: no write may leave a replica that does not hold the Lease, no RESET is sent twice for
// one annotation, and a short freeze leaves no status write and no Event from the passes it interrupted.
// The same scenarios run on the test double (test/e2e/fencing.test.ts) and on the real kube-apiserver
// (test/kubernetes/fencing.test.ts); a backend provides the Kubernetes side.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  EventsV1Api,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  type LoggedWrite,
  type ReplicaWrite,
  replicaOf,
  replicaWritesOf,
  THAW_GRACE_MS,
  type Thaw,
  writesWithoutLease,
} from "../../src/cli/chaos/checks.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/index.ts";
import type { WriteLogEntry } from "../../src/simulator/request-log.ts";
import { eventually, RunningProcess, sleep } from "./harness.ts";

/** A write the Kubernetes API received, as the backend logged it. */
export interface KubeWriteRecord {
  at: number;
  method: string;
  path: string;
  userAgent: string;
  status?: number;
  /** The Lease a Lease write names (for a create, the path does not). */
  leaseName?: string;
}

/** The Kubernetes side of a scenario. */
export interface FencingKube {
  /** The test's own client (admin). */
  kubeConfig: KubeConfig;
  /** A kubeconfig file for the operator processes. */
  operatorKubeconfigPath: string;
  /** Where the objects live (watched by the operators). */
  namespace: string;
  /** Where the operators' Lease lives. */
  leaseNamespace: string;
  /** Every write the API server received so far. */
  writes(): Promise<KubeWriteRecord[]>;
  close(): Promise<void>;
}

export interface FencingBackend {
  name: string;
  start(stateDir: string): Promise<FencingKube>;
}

const GROUP = "gpucloud.dev";
const VERSION = "v1alpha1";
const LOCATION = "us-east1-a";
const SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ0ZXN0a2V5Zm9ydGhlb3BlcmF0b3J0ZXN0cw test@example";
const RESET = "gpucloud.dev/reset-requested-at";
const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
/** Short Lease timings, so a takeover is quick: the fence is the renew deadline, the standby waits the duration. */
const LEASE = { durationMs: 6000, renewDeadlineMs: 4000, retryPeriodMs: 1000 };
const VMS = 6;

interface Condition {
  type: string;
  status: string;
  reason?: string;
}
interface Live {
  metadata: { name: string; generation?: number; annotations?: Record<string, string> };
  spec: Record<string, unknown>;
  status?: {
    id?: string;
    observedGeneration?: number;
    conditions?: Condition[];
    actionPending?: { name: string };
    createPending?: unknown;
    lastResetRequestedAt?: string;
    [field: string]: unknown;
  };
}

const ready = (object: Live): boolean =>
  object.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true &&
  object.status.observedGeneration === object.metadata.generation;

/** One scenario's world: the simulator, the Kubernetes side, two replicas. */
class World {
  readonly sim: RunningSimulator;
  readonly kube: FencingKube;
  readonly custom: CustomObjectsApi;
  readonly #coordination: CoordinationV1Api;
  readonly #replicas = new Map<string, RunningProcess>();
  readonly #electionId: string;
  /** Reasons of Ready seen on any object while it ran (a watcher polls). */
  readonly reasonsSeen = new Set<string>();

  constructor(sim: RunningSimulator, kube: FencingKube, electionId: string) {
    this.sim = sim;
    this.kube = kube;
    this.#electionId = electionId;
    this.custom = kube.kubeConfig.makeApiClient(CustomObjectsApi);
    this.#coordination = kube.kubeConfig.makeApiClient(CoordinationV1Api);
  }

  startReplicas(prefix: string): void {
    for (const suffix of ["a", "b"]) {
      const name = `${prefix}-${suffix}`;
      this.#replicas.set(
        name,
        new RunningProcess(
          [
            "run",
            ...["--kubeconfig", this.kube.operatorKubeconfigPath, "--api-url", this.sim.url],
            ...["--watch-namespace", this.kube.namespace, "--leader-elect"],
            ...["--leader-election-namespace", this.kube.leaseNamespace, "--leader-election-id", this.#electionId],
            ...["--leader-election-lease-duration", `${LEASE.durationMs}ms`],
            ...["--leader-election-renew-deadline", `${LEASE.renewDeadlineMs}ms`],
            ...["--leader-election-retry-period", `${LEASE.retryPeriodMs}ms`],
            ...["--metrics-bind-address", "0", "--health-probe-bind-address", "0"],
            // Three cloud requests a second: sends queue behind the account's token bucket, so a freeze always
            // catches some decided and not yet sent.
            ...["--api-rate-limit", "3", "--api-burst", "2", "--operation-poll-interval", "500ms"],
            // A call's deadline includes its wait for a token: long enough for the queue of six (it also bounds how
            // long the next leader holds a recorded action: the Lease duration plus this).
            ...["--api-timeout", "12s", "--sync-period", "10m", "--log-level", "debug"],
          ],
          { POD_NAME: name },
        ),
      );
    }
  }

  /** The replica holding the Lease, by POD_NAME. */
  async leader(): Promise<string | undefined> {
    try {
      const lease = await this.#coordination.readNamespacedLease({
        namespace: this.kube.leaseNamespace,
        name: this.#electionId,
      });
      return /^(.+)_[^_]+$/.exec(lease.spec?.holderIdentity ?? "")?.[1];
    } catch {
      return undefined;
    }
  }

  replica(name: string): RunningProcess {
    const running = this.#replicas.get(name);
    if (running === undefined) throw new Error(`no replica ${name}`);
    return running;
  }

  /** SIGSTOP the replica: it is frozen mid-work, as a paused container or a long GC would freeze it. */
  freeze(name: string): number {
    process.kill(this.replica(name).child.pid ?? 0, "SIGSTOP");
    return Date.now();
  }

  /** When each frozen replica was thawed: a write it had passed through its fence before the freeze leaves then. */
  readonly thaws: Thaw[] = [];

  thaw(name: string): number {
    process.kill(this.replica(name).child.pid ?? 0, "SIGCONT");
    const at = Date.now();
    this.thaws.push({ replica: name, at });
    return at;
  }

  async list(plural: string): Promise<Live[]> {
    const answer = (await this.custom.listNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: this.kube.namespace,
      plural,
    })) as { items: Live[] };
    for (const item of answer.items) {
      const reason = item.status?.conditions?.find((c) => c.type === "Ready")?.reason;
      if (reason !== undefined) this.reasonsSeen.add(reason);
    }
    return answer.items;
  }

  async create(plural: string, kind: string, name: string, spec: Record<string, unknown>): Promise<void> {
    await this.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: this.kube.namespace,
      plural,
      body: { apiVersion: `${GROUP}/${VERSION}`, kind, metadata: { name }, spec },
    });
  }

  async patch(plural: string, name: string, body: Record<string, unknown>): Promise<void> {
    await this.custom.patchNamespacedCustomObject(
      { group: GROUP, version: VERSION, namespace: this.kube.namespace, plural, name, body },
      MERGE,
    );
  }

  async cloudWrites(): Promise<WriteLogEntry[]> {
    const response = await fetch(`${this.sim.adminUrl}/requests/log`);
    return ((await response.json()) as { writes: WriteLogEntry[] }).writes;
  }

  /** Every write of this scenario's replicas (a shared API server's log holds earlier ones' too), both servers. */
  async replicaWrites(): Promise<ReplicaWrite[]> {
    // A create names its Lease in the body only: every Lease this test's replicas write is the election's.
    const isLease = (write: LoggedWrite): boolean =>
      write.path.includes("/leases") &&
      (write.method === "POST" || ((write as KubeWriteRecord).leaseName ?? write.path).endsWith(this.#electionId));
    const replicas = new Set(this.#replicas.keys());
    return replicaWritesOf(await this.kube.writes(), await this.cloudWrites(), isLease, replicas);
  }

  async stop(): Promise<void> {
    for (const running of this.#replicas.values()) {
      // A frozen process ignores SIGTERM until it runs again.
      if (running.child.pid !== undefined) process.kill(running.child.pid, "SIGCONT");
    }
    await Promise.all([...this.#replicas.values()].map((running) => running.stop("SIGKILL")));
    await this.kube.close();
    await this.sim.close();
  }

  /** Last lines of every replica's log, for failure messages. */
  output(): string {
    return [...this.#replicas.entries()].map(([name, run]) => `--- ${name}\n${run.output.slice(-3000)}`).join("\n");
  }
}

const vmSpec = (image = "ubuntu22.04"): Record<string, unknown> => ({
  type: "a40.1x",
  location: LOCATION,
  image,
  sshPublicKey: SSH_KEY,
});

let counter = 0;

export function describeFencing(backend: FencingBackend): void {
  describe(`fenced leadership: the leader frozen with SIGSTOP (${backend.name})`, () => {
    let world: World | undefined;
    let stateDir: string | undefined;

    beforeEach(async () => {
      stateDir = await mkdtemp(path.join(tmpdir(), "gpuvm-fencing-"));
      const sim = await startSimulator({
        port: 0,
        latencyMs: 300,
        rateLimit: false,
        capacity: { [LOCATION]: { "a40.1x": 500 } },
      });
      const kube = await backend.start(stateDir);
      counter++;
      world = new World(sim, kube, `fencing-${process.pid}-${counter}`);
      const core = kube.kubeConfig.makeApiClient(CoreV1Api);
      await core.createNamespacedSecret({
        namespace: kube.namespace,
        body: {
          metadata: { name: "gpucloud-credentials", labels: { "gpucloud.dev/watch": "true" } },
          stringData: { apiKey: sim.apiKey, projectId: sim.projectId },
        },
      });
    });
    afterEach(async () => {
      await world?.stop();
      world = undefined;
      if (stateDir !== undefined) await rm(stateDir, { recursive: true, force: true });
    });

    async function leaderElected(w: World): Promise<string> {
      return eventually("a leader", async () => w.leader(), 60_000);
    }

    async function vmsReady(w: World, count: number, timeoutMs = 180_000): Promise<Live[]> {
      return eventually(
        `${count} GpuVms Ready`,
        async () => {
          const vms = await w.list("gpuvms");
          return vms.length === count && vms.every(ready) ? vms : undefined;
        },
        timeoutMs,
        250,
      );
    }

    /** Freeze the leader once `caught` holds, until the other replica has taken over (plus a second). */
    async function freezeThroughTakeover(
      w: World,
      caught: () => Promise<boolean>,
    ): Promise<{ frozen: string; thawedAt: number }> {
      const frozen = await leaderElected(w);
      await eventually("the moment to freeze", async () => ((await caught()) ? true : undefined), 120_000, 20);
      w.freeze(frozen);
      await eventually(
        "the standby to take over",
        async () => {
          const now = await w.leader();
          return now !== undefined && now !== frozen ? now : undefined;
        },
        60_000,
        100,
      );
      await sleep(1000);
      return { frozen, thawedAt: w.thaw(frozen) };
    }

    async function expectNoWriteWithoutLease(w: World): Promise<void> {
      const found = writesWithoutLease(await w.replicaWrites(), LEASE.durationMs, w.thaws);
      expect(found, w.output()).toEqual([]);
    }

    it("during RESETs: the frozen leader sends none after its loss, and no RESET is sent twice for one annotation", async () => {
      const w = world as World;
      w.startReplicas(`fence-reset-${counter}`);
      for (let i = 0; i < VMS; i++) await w.create("gpuvms", "GpuVm", `vm-${i}`, vmSpec());
      await vmsReady(w, VMS);
      const asked = "2026-11-27T12:00:00Z";
      for (let i = 0; i < VMS; i++)
        await w.patch("gpuvms", `vm-${i}`, { metadata: { annotations: { [RESET]: asked } } });
      const { frozen } = await freezeThroughTakeover(w, async () =>
        (await w.list("gpuvms")).some((vm) => vm.status?.actionPending?.name === "RESET"),
      );
      const done = await eventually(
        "every reset done",
        async () => {
          const vms = await w.list("gpuvms");
          return vms.every((vm) => vm.status?.lastResetRequestedAt === asked && vm.status.actionPending === undefined)
            ? vms
            : undefined;
        },
        180_000,
        250,
      );
      const resets = (await w.cloudWrites()).filter((write) => write.action === "RESET");
      const accepted = resets.filter(
        (write) => write.status === "lost" || (typeof write.status === "number" && write.status < 300),
      );
      for (const vm of done) {
        const sent = accepted.filter((write) => write.path.endsWith(`/vms/${vm.status?.id}`));
        expect(
          sent.map((write) => replicaOf(write.userAgent)),
          `RESETs of ${vm.metadata.name}\n${w.output()}`,
        ).toHaveLength(1);
      }
      // The freeze caught work in the middle: the replica that took over sent some of the RESETs.
      expect(accepted.some((write) => replicaOf(write.userAgent) !== frozen)).toBe(true);
      await expectNoWriteWithoutLease(w);
    });

    it("during creates: one cloud VM per object, and nothing sent by the frozen leader after its loss", async () => {
      const w = world as World;
      w.startReplicas(`fence-create-${counter}`);
      await leaderElected(w);
      for (let i = 0; i < VMS; i++) await w.create("gpuvms", "GpuVm", `vm-${i}`, vmSpec());
      await freezeThroughTakeover(w, async () =>
        (await w.list("gpuvms")).some((vm) => vm.status?.createPending !== undefined),
      );
      const vms = await vmsReady(w, VMS);
      const cloud = (await w.cloudWrites()).filter((write) => write.method === "POST" && write.path.endsWith("/vms"));
      expect(cloud.length).toBeGreaterThanOrEqual(VMS);
      const listed = (await (
        await fetch(`${w.sim.url}/projects/${w.sim.projectId}/vms?limit=500`, {
          headers: { authorization: `Bearer ${w.sim.apiKey}` },
        })
      ).json()) as { items: { id: string; name: string }[] };
      const names = listed.items.map((vm) => vm.name).sort();
      expect(new Set(names).size, `duplicate VMs: ${names.join(", ")}`).toBe(names.length);
      expect(listed.items.map((vm) => vm.id).sort()).toEqual(vms.map((vm) => vm.status?.id).sort());
      await expectNoWriteWithoutLease(w);
    });

    it("during a GpuVmPool's roll: the roll completes with its replicas Ready, nothing written by the frozen leader after its loss", async () => {
      const w = world as World;
      w.startReplicas(`fence-pool-${counter}`);
      const { location: _location, ...template } = vmSpec();
      await w.create("gpuvmpools", "GpuVmPool", "workers", {
        replicas: 3,
        template: { spec: template },
        placement: { locations: [LOCATION] },
      });
      await vmsReady(w, 3);
      const before = new Set((await w.list("gpuvms")).map((vm) => vm.metadata.name));
      await w.patch("gpuvmpools", "workers", { spec: { template: { spec: { image: "ubuntu22.04-nvidia-550" } } } });
      await freezeThroughTakeover(w, async () => (await w.list("gpuvms")).some((vm) => !before.has(vm.metadata.name)));
      await eventually(
        "the roll done",
        async () => {
          const [pool] = await w.list("gpuvmpools");
          const vms = await w.list("gpuvms");
          const rolled = vms.length === 3 && vms.every((vm) => ready(vm) && vm.spec.image === "ubuntu22.04-nvidia-550");
          return pool !== undefined && ready(pool) && rolled ? true : undefined;
        },
        240_000,
        250,
      );
      for (const reason of ["ReferenceNotFound", "ApiUnavailable"])
        expect(w.reasonsSeen.has(reason), w.output()).toBe(false);
      await expectNoWriteWithoutLease(w);
    });

    it("a freeze shorter than the Lease (no failover) leaves no status write and no Event from the passes it caught", async () => {
      const w = world as World;
      w.startReplicas(`fence-short-${counter}`);
      for (let i = 0; i < VMS; i++) await w.create("gpuvms", "GpuVm", `vm-${i}`, vmSpec());
      await vmsReady(w, VMS);
      const asked = "2026-11-27T12:00:00Z";
      for (let i = 0; i < VMS; i++)
        await w.patch("gpuvms", `vm-${i}`, { metadata: { annotations: { [RESET]: asked } } });
      const leader = await leaderElected(w);
      await eventually(
        "a RESET recorded",
        async () =>
          (await w.list("gpuvms")).some((vm) => vm.status?.actionPending?.name === "RESET") ? true : undefined,
        120_000,
        20,
      );
      // Past the renew deadline, within the Lease: nobody takes over, and the frozen replica's passes must say
      // nothing until it has renewed its Lease.
      w.reasonsSeen.clear();
      const frozenAt = w.freeze(leader);
      await sleep(LEASE.renewDeadlineMs + 500);
      const thawedAt = w.thaw(leader);
      await eventually(
        "every reset done",
        async () =>
          (await w.list("gpuvms")).every((vm) => vm.status?.lastResetRequestedAt === asked) ? true : undefined,
        180_000,
        250,
      );
      expect(await w.leader()).toBe(leader);
      const mine = (await w.replicaWrites()).filter((write) => write.replica === leader && write.at >= thawedAt);
      const renewedAt = mine.find((write) => write.lease?.accepted)?.at;
      expect(renewedAt).toBeDefined();
      // A write that passed the fence before the freeze leaves at the thaw (THAW_GRACE_MS): not one of the caught
      // passes' own, which the fence refuses until the Lease is renewed.
      const beforeRenewal = mine.filter(
        (write) => write.lease === undefined && write.at < (renewedAt ?? 0) && write.at > thawedAt + THAW_GRACE_MS,
      );
      expect(
        beforeRenewal.map((write) => write.what),
        w.output(),
      ).toEqual([]);
      const events = (
        await w.kube.kubeConfig.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace: w.kube.namespace })
      ).items;
      const warnings = events.filter(
        (event) =>
          event.type === "Warning" &&
          event.reportingInstance?.startsWith(`${leader}_`) === true &&
          (event.eventTime === undefined || new Date(event.eventTime).getTime() >= frozenAt - 1000),
      );
      expect(warnings.map((event) => `${event.reason}: ${event.note}`)).toEqual([]);
      expect(w.reasonsSeen.has("ApiUnavailable")).toBe(false);
      await expectNoWriteWithoutLease(w);
    });
  });
}

/** Writes a kubeconfig for a token (the real API server) to `dir/operator.kubeconfig`. */
export async function tokenKubeconfig(dir: string, server: string, ca: string, token: string): Promise<string> {
  const file = path.join(dir, "operator.kubeconfig");
  const yaml = [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: c",
    "  cluster:",
    `    server: ${server}`,
    `    certificate-authority-data: ${Buffer.from(ca).toString("base64")}`,
    "users:",
    "- name: u",
    "  user:",
    `    token: ${token}`,
    "contexts:",
    "- name: c",
    "  context: { cluster: c, user: u }",
    "current-context: c",
    "",
  ].join("\n");
  await writeFile(file, yaml, { mode: 0o600 });
  return file;
}
