// What a chaos run checks: the cloud against the objects (one resource per object, nothing left after delete),
// and the operator's logs (no crash, no unhandled rejection, no secret value in any line, plain or base64).
import { readFile } from "node:fs/promises";
import type { CloudClient } from "../../cloud/client.ts";
import type { KindName, LiveObject } from "./workload.ts";

export interface CloudResource {
  kind: KindName;
  id: string;
  name: string;
}

/** Everything the project holds, of the four kinds (VM lists paged). */
export async function cloudInventory(client: CloudClient, projectId: string): Promise<CloudResource[]> {
  const resources: CloudResource[] = [];
  for await (const vm of client.vms.listAll(projectId, { limit: 500 })) {
    if (vm.state !== "STATE_TERMINATED") resources.push({ kind: "GpuVm", id: vm.id, name: vm.name });
  }
  for (const disk of await client.disks.list(projectId))
    resources.push({ kind: "GpuDisk", id: disk.id, name: disk.name });
  for (const network of await client.networks.list(projectId)) {
    resources.push({ kind: "GpuNetwork", id: network.id, name: network.name });
  }
  for (const rule of await client.firewallRules.list(projectId)) {
    resources.push({ kind: "GpuFirewallRule", id: rule.id, name: rule.name });
  }
  return resources;
}

export interface OwnershipReport {
  /** Cloud names held by more than one resource of a kind (a second create). */
  duplicates: string[];
  /** Resources the run made that no object holds. */
  leaks: string[];
  /** Objects whose status names no resource that exists. */
  missing: string[];
}

/** One resource per object: compared by id, and by cloud name for duplicates. `before` existed before the run. */
export function checkOwnership(
  objects: readonly LiveObject[],
  resources: readonly CloudResource[],
  before: ReadonlySet<string>,
): OwnershipReport {
  const made = resources.filter((resource) => !before.has(resource.id));
  const byName = new Map<string, CloudResource[]>();
  for (const resource of made) {
    const key = `${resource.kind}/${resource.name}`;
    byName.set(key, [...(byName.get(key) ?? []), resource]);
  }
  const duplicates = [...byName.entries()].filter(([, list]) => list.length > 1).map(([key]) => key);
  const held = new Set(objects.flatMap((object) => (object.status?.id ? [object.status.id] : [])));
  const leaks = made.filter((resource) => !held.has(resource.id)).map((r) => `${r.kind}/${r.name} (${r.id})`);
  const ids = new Set(resources.map((resource) => resource.id));
  const missing = objects
    .filter((object) => object.status?.id === undefined || !ids.has(object.status.id))
    .map((object) => `${object.kind} ${object.metadata.namespace}/${object.metadata.name}`);
  return { duplicates, leaks, missing };
}

export interface LogReport {
  lines: number;
  errorLines: number;
  /** Lines that tell of a crash: unhandled rejections, uncaught exceptions, fatal errors, out of memory. */
  crashes: string[];
  /** Lines that carry a secret value (the value itself is never reported, only where and which kind). */
  secretLeaks: string[];
}

const CRASH =
  /unhandledRejection|UnhandledPromiseRejection|uncaughtException|FATAL ERROR|heap out of memory|"level":60/;

/** Scan the replicas' log files. `secrets` maps a label ("API key of chaosa") to its value. */
export async function scanLogs(files: readonly string[], secrets: ReadonlyMap<string, string>): Promise<LogReport> {
  const needles: { label: string; text: string }[] = [];
  for (const [label, value] of secrets) {
    if (value.length < 6) continue;
    const base64 = Buffer.from(value).toString("base64").replace(/=+$/, "");
    const base64url = Buffer.from(value).toString("base64url");
    needles.push({ label, text: value }, { label: `${label} (base64)`, text: base64 });
    if (base64url !== base64) needles.push({ label: `${label} (base64url)`, text: base64url });
  }
  // Tokens the simulator issues (sim-at-…, sim-rt-…), and any bearer header that pino did not redact.
  const patterns: { label: string; pattern: RegExp }[] = [
    { label: "an access or refresh token", pattern: /sim-(at|rt)-[A-Za-z0-9_-]{8}/ },
    { label: "an Authorization header", pattern: /Bearer (?!\[Redacted\])[A-Za-z0-9._~+/-]{8}/ },
  ];
  const report: LogReport = { lines: 0, errorLines: 0, crashes: [], secretLeaks: [] };
  for (const file of files) {
    const text = await readFile(file, "utf8").catch(() => "");
    const lines = text.split("\n");
    lines.forEach((line, index) => {
      if (line === "") return;
      report.lines++;
      if (/"level":50/.test(line)) report.errorLines++;
      const where = `${file.split("/").at(-1)}:${index + 1}`;
      if (CRASH.test(line)) report.crashes.push(`${where}: ${line.slice(0, 300)}`);
      for (const needle of needles)
        if (line.includes(needle.text)) report.secretLeaks.push(`${where}: ${needle.label}`);
      for (const { label, pattern } of patterns) if (pattern.test(line)) report.secretLeaks.push(`${where}: ${label}`);
    });
  }
  return report;
}

export interface Flatness {
  replica: string;
  firstRssBytes: number;
  lastRssBytes: number;
  firstFds: number;
  lastFds: number;
  flat: boolean;
}

/**
 * Memory and descriptors of one long-lived replica over the steady phase: flat when the last third's median RSS
 * is within 25 % (and 40 MiB) of the first third's, and descriptors grew by at most 10.
 */
export function flatness(samples: readonly { replica: string; rssBytes: number; fds: number }[]): Flatness[] {
  const byReplica = new Map<string, { rssBytes: number; fds: number }[]>();
  for (const sample of samples) byReplica.set(sample.replica, [...(byReplica.get(sample.replica) ?? []), sample]);
  const median = (values: number[]): number => {
    const sorted = [...values].sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)] ?? 0;
  };
  return [...byReplica.entries()]
    .filter(([, list]) => list.length >= 6)
    .map(([replica, list]) => {
      const third = Math.floor(list.length / 3);
      const first = list.slice(0, third);
      const last = list.slice(-third);
      const firstRss = median(first.map((s) => s.rssBytes));
      const lastRss = median(last.map((s) => s.rssBytes));
      const firstFds = median(first.map((s) => s.fds));
      const lastFds = median(last.map((s) => s.fds));
      const rssGrowth = lastRss - firstRss;
      const flat = (rssGrowth <= firstRss * 0.25 || rssGrowth <= 40 * 1024 * 1024) && lastFds - firstFds <= 10;
      return { replica, firstRssBytes: firstRss, lastRssBytes: lastRss, firstFds, lastFds, flat };
    });
}

/** One write that left an operator replica, as the server that received it logged it. */
export interface ReplicaWrite {
  /** When it arrived (ms since the epoch). */
  at: number;
  /** The replica's POD_NAME (from its User-Agent, `gpuvm-operator (<POD_NAME>_<suffix>)`). */
  replica: string;
  /** `PATCH /apis/…/status`, for messages. */
  what: string;
  /** A write of the election's Lease (acquire, renew, release): whether the server took it. */
  lease?: { accepted: boolean };
}

/** The replica (POD_NAME) an operator's User-Agent names, or undefined for anybody else's request. */
export function replicaOf(userAgent: string): string | undefined {
  return /^gpuvm-operator \((.+)_[^_)]+\)$/.exec(userAgent)?.[1];
}

/** A write as a server's write log holds it (the double's, kube-apiserver's audit log, the simulator's). */
export interface LoggedWrite {
  at: number;
  method: string;
  path: string;
  userAgent: string;
  /** The answer's status (`lost`: the simulator made the change and dropped the answer). */
  status?: number | "lost";
  /** A VM action's name (the simulator's log). */
  action?: string;
}

/**
 * The writes of operator replicas (those in `replicas`, when given) in both servers' logs, for writesWithoutLease:
 * a Kubernetes write `isLease` says is the election's Lease counts as a Lease write; cloud sign-ins change nothing
 * and are left out.
 */
export function replicaWritesOf(
  kube: readonly LoggedWrite[],
  cloud: readonly LoggedWrite[],
  isLease: (write: LoggedWrite) => boolean,
  replicas?: ReadonlySet<string>,
): ReplicaWrite[] {
  const sender = (userAgent: string): string | undefined => {
    const replica = replicaOf(userAgent);
    return replica !== undefined && (replicas === undefined || replicas.has(replica)) ? replica : undefined;
  };
  const writes: ReplicaWrite[] = [];
  for (const write of kube) {
    const replica = sender(write.userAgent);
    if (replica === undefined) continue;
    const accepted = typeof write.status === "number" && write.status >= 200 && write.status < 300;
    const lease = isLease(write) ? { lease: { accepted } } : {};
    writes.push({ at: write.at, replica, what: `${write.method} ${write.path}`, ...lease });
  }
  for (const write of cloud) {
    const replica = sender(write.userAgent);
    if (replica === undefined || write.path.startsWith("/auth")) continue;
    writes.push({ at: write.at, replica, what: `cloud ${write.method} ${write.path} ${write.action ?? ""}`.trim() });
  }
  return writes;
}

/**
 * Writes a replica sent while it did not hold the Lease: the last Lease write the server took was not its own,
 * or is older than the lease duration (another replica may have taken over since). Each as `replica: what at
 * <time>`. The Lease's own writes are the election's, never counted.
 */
/** A frozen replica thawed (SIGCONT) at `at` (ms since the epoch, this machine's clock). */
export interface Thaw {
  replica: string;
  at: number;
}

/**
 * How long after a thaw a write of the thawed replica may be one that passed its fence before the freeze. The fence
 * checks a write synchronously as its bytes are handed to the socket; a SIGSTOP that lands between the check and
 * the system call (microseconds, but a freeze aimed at a burst of writes hits them) lets those bytes leave at the
 * thaw. No check inside a process can close that gap; the Kubernetes writes carry the object's resourceVersion, so
 * such a write lands only on an object nobody wrote since, and a cloud action's intent is held by the next leader
 * for the Lease duration plus the API timeout (ADR 0023). A write checked after the thaw is refused: the fence knows
 * the Lease is gone.
 */
export const THAW_GRACE_MS = 250;

/**
 * The writes of a replica while another held the Lease, or after its own ran out (one line each). A write that
 * arrives within THAW_GRACE_MS of its replica's thaw is the one exception: it left the fence before the freeze.
 */
export function writesWithoutLease(
  writes: readonly ReplicaWrite[],
  leaseDurationMs: number,
  thaws: readonly Thaw[] = [],
): string[] {
  const ordered = [...writes].sort((a, b) => a.at - b.at);
  let holder: { replica: string; at: number } | undefined;
  const found: string[] = [];
  for (const write of ordered) {
    if (write.lease !== undefined) {
      if (write.lease.accepted) holder = { replica: write.replica, at: write.at };
      continue;
    }
    const held = holder !== undefined && holder.replica === write.replica && write.at - holder.at < leaseDurationMs;
    const leftBeforeFreeze = thaws.some(
      (thaw) => thaw.replica === write.replica && write.at >= thaw.at - 50 && write.at <= thaw.at + THAW_GRACE_MS,
    );
    if (!held && !leftBeforeFreeze) {
      const last = holder === undefined ? "no Lease write yet" : `last Lease write by ${holder.replica}`;
      found.push(`${write.replica}: ${write.what} at ${new Date(write.at).toISOString()} (${last})`);
    }
  }
  return found;
}
