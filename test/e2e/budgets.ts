// Issue #32's "Done when", on the playground: on the Kubernetes API test double (budgets.test.ts) and on a real
// kube-apiserver (test/kubernetes/budget-journeys.test.ts), where the ledger's conflicts and retries are the API
// server's own.
// - 200 GpuVms in 4 namespaces, `--shards 2` (and a standby per shard), one namespace under a budget worth twenty
//   a40.1x: sampled every 100 ms, that namespace never has more than 20 VMs in the cloud, while 5 operator replicas
//   are SIGKILLed during the run; deleting 5 of its VMs lets exactly 5 waiting ones proceed, highest priority first.
// - A pool scaled beyond its budget runs what fits and keeps the rest pending with the budget's message.
// - 30 GpuVms of one type waiting on capacity 0, then capacity 10: exactly the 10 oldest proceed, in order, and the
//   pair is probed at most once per interval while they wait.
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { type CustomObject, eventually, type Playground, RunningProcess, sleep, startPlayground } from "./harness.ts";

const run = promisify(execFile);
const SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ0ZXN0a2V5Zm9ydGhlb3BlcmF0b3J0ZXN0cw test@example";
const PROBE_INTERVAL_MS = 2000;

export interface JourneyOptions {
  kube: "double" | "real";
  kubectl?: string;
}

/** The simulator's admin API (no auth, no rate limit: sampling it takes nothing from the operator's requests). */
async function admin(pg: Playground, method: string, route: string, body?: unknown): Promise<unknown> {
  const response = await fetch(`${new URL(pg.cloud.url).origin}/_sim${route}`, {
    method,
    ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
  });
  if (!response.ok) throw new Error(`${method} /_sim${route}: HTTP ${response.status} ${await response.text()}`);
  const text = await response.text();
  return text === "" ? undefined : (JSON.parse(text) as unknown);
}

/** The simulator's VMs in the order it created them. */
async function cloudVmNames(pg: Playground): Promise<string[]> {
  const state = (await admin(pg, "GET", "/state")) as { vms: { name: string }[] };
  return state.vms.map((vm) => vm.name);
}

async function apply(pg: Playground, objects: readonly object[]): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), "budgets-e2e-"));
  try {
    const file = path.join(dir, "objects.yaml");
    await writeFile(file, objects.map((object) => stringify(object)).join("---\n"));
    await pg.kubectl("apply", "-f", file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Create GpuVms through the API, ten at a time (kubectl apply of 50 objects takes seconds of its own). */
async function createAll(pg: Playground, objects: readonly ReturnType<typeof vm>[]): Promise<void> {
  const pending = [...objects];
  const worker = async () => {
    for (let object = pending.shift(); object !== undefined; object = pending.shift()) {
      await pg.customObjects.createNamespacedCustomObject({
        group: "gpucloud.dev",
        version: "v1alpha1",
        namespace: object.metadata.namespace,
        plural: "gpuvms",
        body: object,
      });
    }
  };
  await Promise.all(Array.from({ length: 10 }, worker));
}

async function list(pg: Playground, plural: string, namespace: string): Promise<CustomObject[]> {
  const answer = (await pg.customObjects.listNamespacedCustomObject({
    group: "gpucloud.dev",
    version: "v1alpha1",
    namespace,
    plural,
  })) as { items: CustomObject[] };
  return answer.items;
}

const ready = (object: CustomObject | undefined) => {
  const condition = object?.status?.conditions?.find((c) => c.type === "Ready");
  return condition?.status === "True" && object?.status?.observedGeneration === object?.metadata.generation;
};
const reasonOf = (object: CustomObject | undefined) =>
  object?.status?.conditions?.find((c) => c.type === "Ready")?.reason;

const vm = (namespace: string, name: string, spec: Record<string, unknown>) => ({
  apiVersion: "gpucloud.dev/v1alpha1",
  kind: "GpuVm",
  metadata: { name, namespace },
  spec: { location: "us-east1-a", image: "ubuntu22.04", sshPublicKey: SSH_KEY, ...spec },
});

/** One operator replica of a shard, as a process this test can SIGKILL. */
interface Replica {
  name: string;
  shard: number;
  kill(): void;
}

/** The replicas of `--shards 2`: the playground's two, and the standbys this test starts. */
class Replicas {
  readonly #pg: Playground;
  readonly #replicas: Replica[] = [];
  readonly #started: RunningProcess[] = [];
  #next = 0;
  killed = 0;

  constructor(pg: Playground) {
    this.#pg = pg;
  }

  async adoptPlaygroundShards(): Promise<void> {
    for (const shard of [0, 1]) {
      const pattern = `--shard-index ${shard}`;
      const { stdout } = await run("pgrep", ["-P", String(this.#pg.process.child.pid), "-f", "--", pattern]);
      const pids = stdout.split("\n").filter((line) => line.trim() !== "");
      this.#replicas.push({
        name: `playground-shard-${shard}`,
        shard,
        kill: () => {
          for (const pid of pids) process.kill(Number(pid), "SIGKILL");
        },
      });
    }
  }

  standby(shard: number): void {
    const name = `standby-${this.#next++}`;
    const process = new RunningProcess(this.#pg.operatorArgs({ index: shard, count: 2 }), { POD_NAME: name });
    this.#started.push(process);
    this.#replicas.push({ name, shard, kill: () => process.child.kill("SIGKILL") });
  }

  /** SIGKILL the replica that leads `shard` (or one of its replicas when none leads), and start a new standby. */
  async killLeaderOf(shard: number): Promise<void> {
    const holder = (await leaseHolders(this.#pg)).get(shard) ?? "";
    const candidates = this.#replicas.filter((replica) => replica.shard === shard);
    const victim = candidates.find((replica) => holder.startsWith(`${replica.name}_`)) ?? candidates[0];
    if (victim === undefined) return;
    victim.kill();
    this.killed++;
    this.#replicas.splice(this.#replicas.indexOf(victim), 1);
    this.standby(shard);
  }

  async stop(): Promise<void> {
    await Promise.all(this.#started.map((process) => process.stop("SIGKILL")));
  }
}

/** shard → the identity holding its Lease. */
async function leaseHolders(pg: Playground): Promise<Map<number, string>> {
  const leases = JSON.parse(await pg.kubectl("get", "leases", "-A", "-o", "json")) as {
    items: { metadata: { name: string }; spec: { holderIdentity?: string } }[];
  };
  const holders = new Map<number, string>();
  for (const lease of leases.items) {
    const shard = /-shard-(\d+)-of-2$/.exec(lease.metadata.name)?.[1];
    if (shard !== undefined) holders.set(Number(shard), lease.spec.holderIdentity ?? "");
  }
  return holders;
}

/** Samples the cloud every 100 ms: the most VMs of a namespace seen at once (any state: a VM bills until gone). */
function sampleVms(pg: Playground, prefix: string): { stop(): Promise<{ most: number; samples: number }> } {
  let running = true;
  let most = 0;
  let samples = 0;
  const loop = (async () => {
    while (running) {
      const names = await cloudVmNames(pg).catch(() => undefined);
      if (names !== undefined) {
        most = Math.max(most, names.filter((name) => name.startsWith(prefix)).length);
        samples++;
      }
      await sleep(100);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { most, samples };
    },
  };
}

const NAMESPACES = ["team0", "team1", "team2", "team3"];
const PER_NAMESPACE = 50;
/** Distinct priorities 0…49 in a scrambled order (37 and 50 share no factor). */
const priorityOf = (index: number) => (index * 37) % PER_NAMESPACE;

export function describeBudgetJourneys(options: JourneyOptions): void {
  const where = options.kube === "real" ? "real kube-apiserver" : "Kubernetes API test double";
  describe(`budgets on the playground (${where})`, () => {
    let playground: Playground | undefined;
    let replicas: Replicas | undefined;
    afterEach(async () => {
      await replicas?.stop();
      replicas = undefined;
      await playground?.close();
      playground = undefined;
    });

    it("200 GpuVms, --shards 2, 5 SIGKILLs: the budgeted namespace never has more than 20; 5 deleted let the 5 highest priorities go", async () => {
      const began = Date.now();
      const phase = (what: string) => console.log(`budgets (${where}): ${what} at ${(Date.now() - began) / 1000} s`);
      const pg = await startPlayground({ latencyMs: 300, shards: 2, ...options });
      phase("playground up");
      playground = pg;
      await admin(pg, "PUT", "/capacity", { "us-east1-a": { "a40.1x": { capacity: 400 } } });
      for (const namespace of NAMESPACES) await pg.kubectl("create", "namespace", namespace);
      replicas = new Replicas(pg);
      await replicas.adoptPlaygroundShards();
      replicas.standby(0);
      replicas.standby(1);
      await apply(pg, [
        {
          apiVersion: "gpucloud.dev/v1alpha1",
          kind: "GpuBudget",
          metadata: { name: "gpus", namespace: "team0" },
          spec: { maxHourlyUSD: 22 },
        },
      ]);
      const sampler = sampleVms(pg, "team0-");
      let sampled: { most: number; samples: number } | undefined;
      try {
        // Five SIGKILLs while the 200 are created and converge: the leader of one shard, then of the other.
        const kills = (async () => {
          for (let kill = 0; kill < 5; kill++) {
            await sleep(3000);
            await replicas?.killLeaderOf(kill % 2);
          }
        })();
        for (const namespace of NAMESPACES) {
          await createAll(
            pg,
            Array.from({ length: PER_NAMESPACE }, (_, i) =>
              vm(namespace, `vm${String(i).padStart(2, "0")}`, { type: "a40.1x", priority: priorityOf(i) }),
            ),
          );
        }
        phase("200 created");
        await kills;
        expect(replicas.killed).toBe(5);
        phase("5 killed");
        await eventually(
          "150 Ready elsewhere; 20 Ready and 30 waiting for the budget in team0",
          async () => {
            const others = (await Promise.all(NAMESPACES.slice(1).map((ns) => list(pg, "gpuvms", ns)))).flat();
            const team = await list(pg, "gpuvms", "team0");
            const waiting = team.filter((object) => reasonOf(object) === "BudgetExceeded").length;
            return others.filter(ready).length === 150 && team.filter(ready).length === 20 && waiting === 30
              ? true
              : undefined;
          },
          360_000,
        );

        phase("converged");
        // Five go: exactly the five waiters of highest priority take their room.
        const team = await list(pg, "gpuvms", "team0");
        const waiters = team.filter((object) => reasonOf(object) === "BudgetExceeded");
        const expected = waiters
          .sort((a, b) => Number(b.spec.priority) - Number(a.spec.priority))
          .slice(0, 5)
          .map((object) => object.metadata.name)
          .sort();
        const gone = team
          .filter(ready)
          .slice(0, 5)
          .map((object) => object.metadata.name);
        const inCloudBefore = new Set(await cloudVmNames(pg));
        await pg.kubectl("delete", "gpuvm", "-n", "team0", "--wait=false", ...gone);
        phase("five deleting");
        let deletedSeen = false;
        await eventually(
          "the five deleted, five others Ready",
          async () => {
            const now = await list(pg, "gpuvms", "team0");
            if (now.length === 45 && !deletedSeen) {
              deletedSeen = true;
              phase("five deleted");
            }
            return now.length === 45 && now.filter(ready).length === 20 ? now : undefined;
          },
          180_000,
        );
        phase("five others Ready");
        await sleep(3000);
        const after = await list(pg, "gpuvms", "team0");
        const proceeded = after
          .filter((object) => ready(object) && waiters.some((w) => w.metadata.name === object.metadata.name))
          .map((object) => object.metadata.name)
          .sort();
        expect(proceeded).toEqual(expected);
        const priorities = new Map(waiters.map((object) => [`team0-${object.metadata.name}`, object.spec.priority]));
        const released = (await cloudVmNames(pg))
          .filter((name) => name.startsWith("team0-") && !inCloudBefore.has(name))
          .map((name) => `${name} (priority ${String(priorities.get(name))})`);
        console.log(`budgets (${where}): released in this order: ${released.join(", ")}`);
        expect(after.filter((object) => reasonOf(object) === "BudgetExceeded")).toHaveLength(25);
      } finally {
        sampled = await sampler.stop();
      }
      expect(sampled.samples).toBeGreaterThan(100);
      expect(sampled.most).toBeLessThanOrEqual(20);
      console.log(`budgets (${where}): ${sampled.samples} samples, at most ${sampled.most} team0 VMs at once`);
    }, 600_000);

    it("a pool beyond its budget runs what fits; 30 waiting on capacity 0 then 10: the 10 oldest go, in order", async () => {
      const pg = await startPlayground({
        latencyMs: 200,
        ...options,
        env: { GPUVM_CAPACITY_PROBE_INTERVAL: `${PROBE_INTERVAL_MS}ms` },
      });
      playground = pg;
      await poolBeyondItsBudget(pg);
      await capacityQueue(pg);
    }, 600_000);
  });
}

async function poolBeyondItsBudget(pg: Playground): Promise<void> {
  await pg.kubectl("create", "namespace", "pools");
  await apply(pg, [
    {
      apiVersion: "gpucloud.dev/v1alpha1",
      kind: "GpuBudget",
      metadata: { name: "team", namespace: "pools" },
      spec: { maxHourlyUSD: 8 },
    },
    {
      apiVersion: "gpucloud.dev/v1alpha1",
      kind: "GpuVmPool",
      metadata: { name: "workers", namespace: "pools" },
      spec: {
        replicas: 3,
        template: { spec: { type: "a100.1x", image: "ubuntu22.04", sshPublicKey: SSH_KEY } },
        placement: { locations: ["us-east1-a"] },
      },
    },
  ]);
  await pg.kubectl("scale", "gpuvmpool", "workers", "-n", "pools", "--replicas", "8");
  // Five a100.1x ($1.60/h each) fit in $8/h; three wait.
  const pool = await eventually(
    "the pool: 5 ready, 3 pending for its budget",
    async () => {
      const [found] = await list(pg, "gpuvmpools", "pools");
      return found?.status?.readyReplicas === 5 && found.status.pendingReplicas === 3 ? found : undefined;
    },
    120_000,
  );
  const condition = pool.status?.conditions?.find((c) => c.type === "Ready");
  expect(condition?.reason).toBe("BudgetExceeded");
  expect(condition?.message).toMatch(/^5\/8 ready; 3 replicas pending: GpuBudget team: needs \$1\.60\/h/);
  const table = await pg.kubectl("get", "gpuvmpool", "workers", "-n", "pools");
  expect(table).toMatch(/BudgetExceeded/);
  expect((await cloudVmNames(pg)).filter((name) => name.startsWith("pools-workers-"))).toHaveLength(5);
}

async function availabilityReads(pg: Playground): Promise<number> {
  const { counts } = (await admin(pg, "GET", "/requests")) as { counts: Record<string, number> };
  return counts["GET /v0.1/projects/:projectId/availabilities"] ?? 0;
}

async function capacityQueue(pg: Playground): Promise<void> {
  await pg.kubectl("create", "namespace", "queue");
  await admin(pg, "PUT", "/capacity", { "us-east1-a": { "a40.1x": { capacity: 0 } } });
  const names = Array.from({ length: 30 }, (_, i) => `q${String(i).padStart(2, "0")}`);
  // The ten oldest one per second (creationTimestamp has whole seconds, and the queue goes by age, then by uid),
  // then the twenty younger ones at once: each of the ten is strictly older than the next and than all twenty.
  // Each next one waits for the second after the one its predecessor was stamped with: a fixed pause between
  // applies let two land in one second on a busy machine (kubectl's own time varies), and the uid then decided.
  for (const name of names.slice(0, 10)) {
    await apply(pg, [vm("queue", name, { type: "a40.1x" })]);
    const made = (await list(pg, "gpuvms", "queue")).find((object) => object.metadata.name === name);
    const stamped = Date.parse(
      String((made?.metadata as { creationTimestamp?: string } | undefined)?.creationTimestamp),
    );
    expect(Number.isNaN(stamped)).toBe(false);
    await sleep(Math.max(0, stamped + 1_050 - Date.now()));
  }
  await apply(
    pg,
    names.slice(10).map((name) => vm("queue", name, { type: "a40.1x" })),
  );
  const waiting = (object: CustomObject | undefined) =>
    reasonOf(object) === "CapacityUnavailable" &&
    object?.status?.conditions?.find((c) => c.type === "Stalled")?.status === "True";
  await eventually(
    "30 waiting for capacity",
    async () => ((await list(pg, "gpuvms", "queue")).filter(waiting).length === 30 ? true : undefined),
    120_000,
  );
  const before = await availabilityReads(pg);
  const intervals = 4;
  await sleep(intervals * PROBE_INTERVAL_MS);
  const probes = (await availabilityReads(pg)) - before;
  console.log(`capacity queue: ${probes} availability reads in ${intervals} intervals of ${PROBE_INTERVAL_MS} ms`);
  // Probed while they wait (the count is read right), but once per interval for the pair, not per object.
  expect(probes).toBeGreaterThanOrEqual(1);
  expect(probes).toBeLessThanOrEqual(intervals + 1);
  expect((await cloudVmNames(pg)).filter((name) => name.startsWith("queue-"))).toEqual([]);

  await admin(pg, "PUT", "/capacity", { "us-east1-a": { "a40.1x": { capacity: 10 } } });
  await eventually(
    "10 created",
    async () => ((await cloudVmNames(pg)).filter((name) => name.startsWith("queue-")).length >= 10 ? true : undefined),
    120_000,
  );
  // Two more intervals: nobody else gets in.
  await sleep(2 * PROBE_INTERVAL_MS);
  const created = (await cloudVmNames(pg)).filter((name) => name.startsWith("queue-"));
  console.log(`capacity queue: created in this order: ${created.join(", ")}`);
  expect(created).toEqual(names.slice(0, 10).map((name) => `queue-${name}`));
  const rest = (await list(pg, "gpuvms", "queue")).filter(
    (object) => !names.slice(0, 10).includes(object.metadata.name),
  );
  expect(rest.filter(waiting)).toHaveLength(20);
}
