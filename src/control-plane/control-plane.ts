// A real Kubernetes control plane on loopback for tests and the playground: etcd, kube-apiserver (TLS, client
// certificates, ServiceAccount tokens, RBAC, an audit log of ServiceAccount requests) and
// kube-controller-manager (garbage collection, namespace deletion), from the binaries of binaries.ts.
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseAllDocuments } from "yaml";
import { isRecord } from "../util/is-record.ts";
import { isProcessAlive } from "../util/process-alive.ts";
import type { KubeBinary } from "./binaries.ts";
import { type KubeRequest, type KubeResponse, type KubeTarget, kubeExpect, kubeRequest } from "./http.ts";

export interface ControlPlaneOptions {
  bin: (name: KubeBinary) => string;
  /** Where etcd's data, certificates, logs and the audit log live. A fresh temporary folder when absent. */
  dataDir?: string;
  /** Keep dataDir on close (the playground's state); removed otherwise. */
  keepData?: boolean;
  /** kube-apiserver's port; 0 (default) picks a free one. */
  port?: number;
  /** Install every CustomResourceDefinition of these folders' YAML files and wait until they are Established. */
  crdDirs?: string[];
  /** Start kube-controller-manager (garbage collector, namespace controller). Default true. */
  controllerManager?: boolean;
  /**
   * kube-controller-manager's controllers (`--controllers`); default the garbage collector and the namespace
   * controller. A workload cluster adds the bootstrap token signer and cleaner, a Cluster API management
   * cluster the ClusterRole aggregation.
   */
  controllers?: string[];
  /** More kube-apiserver flags (e.g. `--enable-bootstrap-token-auth` for a cluster nodes join). */
  apiServerArgs?: string[];
  /** etcd without fsync: much faster, loses data on a machine crash. Default true unless keepData. */
  unsafeNoFsync?: boolean;
  /** Progress lines ("etcd ready in 0.8 s"); silent by default. */
  log?: (line: string) => void;
}

export interface RunningControlPlane {
  /** https://127.0.0.1:<port> */
  url: string;
  dataDir: string;
  /** The test admin (client certificate, group system:masters). */
  admin: KubeTarget;
  etcdUrl: string;
  /** JSON lines of every request a ServiceAccount made (audit.k8s.io/v1 Events at Metadata level). */
  auditLogPath: string;
  /** Seconds from the first process spawned to kube-apiserver ready (CRDs not included). */
  startupSeconds: number;
  /** A kubeconfig for the admin, or for a bearer token (a ServiceAccount's, from serviceAccountToken). */
  kubeconfigYaml(credentials?: { token: string; user?: string }): string;
  /** A token for the ServiceAccount through the TokenRequest API. */
  serviceAccountToken(namespace: string, name: string, expirationSeconds?: number): Promise<string>;
  /** A request as the admin. */
  request(request: KubeRequest): Promise<KubeResponse>;
  /** Compacts etcd up to its current revision: resourceVersions before it are gone for lists from etcd. */
  compactEtcd(): Promise<number>;
  close(): Promise<void>;
}

export class ControlPlaneError extends Error {
  override name = "ControlPlaneError";
}

const CHILD_STOP_TIMEOUT_MS = 10_000;
const DEFAULT_CONTROLLERS = ["garbage-collector-controller", "namespace-controller"];
const TEMP_PREFIX = "gpuvm-kube-";
const OWNER_FILE = "owner.json";

/** Every request of every ServiceAccount, without bodies; nothing else. */
const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
`;

/** A free TCP port on 127.0.0.1 (free when asked: the caller binds it soon after). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject()));
    });
  });
}

/**
 * A test runner killed with SIGKILL cannot stop its children. The next start finds their folders (the owner
 * process is gone), stops the processes that still run from them and removes the folders.
 */
async function sweepAbandoned(log: (line: string) => void): Promise<void> {
  const root = tmpdir();
  for (const entry of await readdir(root).catch(() => [] as string[])) {
    if (!entry.startsWith(TEMP_PREFIX)) continue;
    const dir = path.join(root, entry);
    let owner: { ownerPid?: unknown; pids?: unknown };
    try {
      owner = JSON.parse(await readFile(path.join(dir, OWNER_FILE), "utf8")) as typeof owner;
    } catch {
      continue; // being created, or not ours
    }
    if (typeof owner.ownerPid !== "number" || isProcessAlive(owner.ownerPid)) continue;
    for (const pid of Array.isArray(owner.pids) ? owner.pids : []) {
      if (typeof pid !== "number") continue;
      // Only a process that still runs from this folder: the pid may have been reused since.
      const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
      if (cmdline.includes(dir)) {
        try {
          process.kill(-pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
    }
    await rm(dir, { recursive: true, force: true });
    log(`control plane: removed ${dir}, left by a stopped test run`);
  }
}

/** Child processes, each in its own process group with its log in logDir, stopped together. */
export class ChildSet {
  readonly #children: { name: string; child: ChildProcess; exited: Promise<number | null> }[] = [];
  readonly #logDir: string;
  readonly #onSpawn: () => Promise<void>;

  constructor(logDir: string, onSpawn: () => Promise<void>) {
    this.#logDir = logDir;
    this.#onSpawn = onSpawn;
  }

  pids(): number[] {
    return this.#children.flatMap(({ child }) => (child.pid === undefined ? [] : [child.pid]));
  }

  /** Starts a child; resolves with it and a promise of its exit code (listened to from the start). */
  async spawn(
    name: string,
    command: string,
    args: string[],
    env?: NodeJS.ProcessEnv,
  ): Promise<{ child: ChildProcess; exited: Promise<number | null> }> {
    const logFile = openSync(path.join(this.#logDir, `${name}.log`), "a");
    // Its own process group, killed as a group; stopped by close() or, at worst, when this process exits.
    const child = spawn(command, args, { detached: true, stdio: ["ignore", logFile, logFile], env });
    closeSync(logFile);
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    child.once("error", () => {}); // a missing binary shows as an exit; the log tells why
    const killOnExit = (): void => killGroup(child, "SIGKILL");
    process.once("exit", killOnExit);
    void exited.then(() => process.off("exit", killOnExit));
    this.#children.push({ name, child, exited });
    await this.#onSpawn();
    return { child, exited };
  }

  async tail(name: string): Promise<string> {
    const text = await readFile(path.join(this.#logDir, `${name}.log`), "utf8").catch(() => "");
    return text.slice(-3000);
  }

  exited(name: string): boolean {
    const entry = this.#children.find((candidate) => candidate.name === name);
    return entry !== undefined && (entry.child.exitCode !== null || entry.child.signalCode !== null);
  }

  /** Stops the children in reverse start order: SIGTERM, then SIGKILL after a timeout. */
  async stopAll(): Promise<void> {
    for (const { child, exited } of this.#children.reverse()) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      killGroup(child, "SIGTERM");
      const timer = setTimeout(() => killGroup(child, "SIGKILL"), CHILD_STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    }
    this.#children.length = 0;
  }
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    child.kill(signal);
  }
}

/** Polls `check` every 100 ms until true; throws ControlPlaneError on `failed` (a child exited) or the timeout. */
export async function waitUntil(
  what: string,
  check: () => Promise<boolean>,
  options: { timeoutMs: number; failed: () => Promise<string | undefined>; timeoutMessage?: string },
): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    const failure = await options.failed();
    if (failure !== undefined) throw new ControlPlaneError(`${what}: ${failure}`);
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) {
      const timedOut = options.timeoutMessage ?? `not ready within ${options.timeoutMs} ms`;
      throw new ControlPlaneError(`${what}: ${timedOut}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function kubeconfig(server: string, ca: string, user: string, credentials: Record<string, string>): string {
  const b64 = (text: string): string => Buffer.from(text).toString("base64");
  const userFields = Object.entries(credentials)
    .map(([key, value]) => `      ${key}: ${key === "token" ? value : b64(value)}`)
    .join("\n");
  return `apiVersion: v1
kind: Config
clusters:
  - name: gpuvm-test
    cluster:
      server: ${server}
      certificate-authority-data: ${b64(ca)}
users:
  - name: ${user}
    user:
${userFields}
contexts:
  - name: ${user}@gpuvm-test
    context:
      cluster: gpuvm-test
      user: ${user}
      namespace: default
current-context: ${user}@gpuvm-test
`;
}

async function readCrds(directories: string[]): Promise<Record<string, unknown>[]> {
  const crds: Record<string, unknown>[] = [];
  for (const directory of directories) {
    for (const file of (await readdir(directory)).filter((name) => /\.ya?ml$/.test(name)).sort()) {
      for (const document of parseAllDocuments(await readFile(path.join(directory, file), "utf8"))) {
        const value: unknown = document.toJSON();
        if (isRecord(value) && value.kind === "CustomResourceDefinition") crds.push(value);
      }
    }
  }
  return crds;
}

function crdName(crd: Record<string, unknown>): string {
  const metadata = crd.metadata;
  return isRecord(metadata) && typeof metadata.name === "string" ? metadata.name : "";
}

function isEstablished(crd: unknown): boolean {
  if (!isRecord(crd) || !isRecord(crd.status) || !Array.isArray(crd.status.conditions)) return false;
  return crd.status.conditions.some(
    (condition) => isRecord(condition) && condition.type === "Established" && condition.status === "True",
  );
}

/**
 * Creates (or updates) the CRDs and waits until the API server serves each of them: a list of every served
 * version answers, or (`readyVersions: "storage"`) of the storage version only, for CRDs whose other versions
 * need a conversion webhook that is not up yet.
 */
export async function installCrds(
  target: KubeTarget,
  crds: Record<string, unknown>[],
  timeoutMs = 60_000,
  readyVersions: "served" | "storage" = "served",
): Promise<void> {
  const base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  for (const crd of crds) {
    const created = await kubeRequest(target, { method: "POST", path: base, body: crd });
    if (created.status === 409) {
      // Kept from an earlier run (the playground's state): bring it up to the current definition.
      await kubeExpect(
        target,
        {
          method: "PATCH",
          path: `${base}/${crdName(crd)}?fieldManager=gpuvm-test&force=true`,
          body: JSON.stringify(crd),
          contentType: "application/apply-patch+yaml",
        },
        [200],
      );
    } else if (created.status !== 201) {
      throw new ControlPlaneError(
        `installing CRD ${crdName(crd)}: HTTP ${created.status} ${created.text.slice(0, 800)}`,
      );
    }
  }
  const deadline = Date.now() + timeoutMs;
  const waitFor = async (what: string, ready: () => Promise<boolean>): Promise<void> => {
    while (!(await ready())) {
      if (Date.now() > deadline) throw new ControlPlaneError(`${what}: not ready within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  for (const crd of crds) {
    await waitFor(`CRD ${crdName(crd)} Established`, async () => {
      const current = await kubeRequest(target, { path: `${base}/${crdName(crd)}` });
      return current.status === 200 && isEstablished(current.json);
    });
    // Established is not serving: after a restart the resource's storage answers 429 "storage is (re)initializing"
    // for a moment. Ready means a list of every served version answers.
    for (const path of servedListPaths(crd, readyVersions)) {
      await waitFor(`GET ${path}`, async () => (await kubeRequest(target, { path })).status === 200);
    }
  }
}

function servedListPaths(crd: Record<string, unknown>, readyVersions: "served" | "storage"): string[] {
  const spec = isRecord(crd.spec) ? crd.spec : {};
  const plural = isRecord(spec.names) ? spec.names.plural : undefined;
  const versions = Array.isArray(spec.versions) ? spec.versions.filter(isRecord) : [];
  return versions
    .filter((version) => version.served === true && typeof version.name === "string")
    .filter((version) => readyVersions === "served" || version.storage === true)
    .map((version) => `/apis/${String(spec.group)}/${String(version.name)}/${String(plural)}?limit=1`);
}

/** Compacts etcd up to its current revision (through its HTTP gateway); answers that revision. */
export async function compactEtcd(etcdUrl: string): Promise<number> {
  const range = await fetch(`${etcdUrl}/v3/kv/range`, {
    method: "POST",
    body: JSON.stringify({ key: Buffer.from("/").toString("base64"), limit: 1 }),
  });
  const header = ((await range.json()) as { header?: { revision?: string } }).header;
  const revision = Number(header?.revision);
  if (!Number.isInteger(revision)) throw new ControlPlaneError("etcd did not report its revision");
  const compacted = await fetch(`${etcdUrl}/v3/kv/compaction`, {
    method: "POST",
    body: JSON.stringify({ revision: String(revision), physical: true }),
  });
  if (!compacted.ok) throw new ControlPlaneError(`etcd compaction: HTTP ${compacted.status} ${await compacted.text()}`);
  return revision;
}

/**
 * The folder and the child set of a group of processes: `dataDir`, or a fresh temporary folder whose owner file
 * lets the next start stop its processes and remove it if this process is killed with SIGKILL. Logs go to
 * `<dataDir>/logs`.
 */
export async function processFolder(
  dataDir: string | undefined,
  log: (line: string) => void,
): Promise<{ dataDir: string; children: ChildSet }> {
  await sweepAbandoned(log);
  const folder = dataDir ?? (await mkdtemp(path.join(tmpdir(), TEMP_PREFIX)));
  const logDir = path.join(folder, "logs");
  await mkdir(logDir, { recursive: true });
  const writeOwner = async (): Promise<void> => {
    if (dataDir !== undefined) return; // a chosen folder (the playground's) is never swept
    await writeFile(path.join(folder, OWNER_FILE), JSON.stringify({ ownerPid: process.pid, pids: children.pids() }));
  };
  const children = new ChildSet(logDir, writeOwner);
  await writeOwner();
  return { dataDir: folder, children };
}

/** Starts etcd, kube-apiserver and (unless told otherwise) kube-controller-manager; installs the CRDs. */
export async function startControlPlane(options: ControlPlaneOptions): Promise<RunningControlPlane> {
  const log = options.log ?? (() => {});
  const { dataDir, children } = await processFolder(options.dataDir, log);
  const certDir = path.join(dataDir, "certs");
  const cleanUp = async (): Promise<void> => {
    await children.stopAll();
    if (options.keepData !== true) await rm(dataDir, { recursive: true, force: true });
  };
  try {
    const started = Date.now();
    const seconds = (): string => ((Date.now() - started) / 1000).toFixed(1);
    const certs = await children.spawn("kube-certs", options.bin("kube-certs"), [certDir]);
    if ((await certs.exited) !== 0)
      throw new ControlPlaneError(`kube-certs failed: ${await children.tail("kube-certs")}`);
    const read = (name: string): Promise<string> => readFile(path.join(certDir, name), "utf8");
    const ca = await read("ca.crt");
    const admin: KubeTarget = { url: "", ca, cert: await read("admin.crt"), key: await read("admin.key") };

    const [etcdClientPort, etcdPeerPort] = [await freePort(), await freePort()];
    const etcdUrl = `http://127.0.0.1:${etcdClientPort}`;
    const peerUrl = `http://127.0.0.1:${etcdPeerPort}`;
    const unsafeNoFsync = options.unsafeNoFsync ?? options.keepData !== true;
    await children.spawn("etcd", options.bin("etcd"), [
      "--name=gpuvm-test",
      `--data-dir=${path.join(dataDir, "etcd")}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=gpuvm-test=${peerUrl}`,
      "--log-level=warn",
      ...(unsafeNoFsync ? ["--unsafe-no-fsync"] : []),
    ]);
    const failedIf = (name: string) => async (): Promise<string | undefined> =>
      children.exited(name) ? `${name} exited:\n${await children.tail(name)}` : undefined;
    await waitUntil(
      "etcd",
      async () => {
        const health = await fetch(`${etcdUrl}/health`);
        return health.ok && ((await health.json()) as { health?: string }).health === "true";
      },
      { timeoutMs: 60_000, failed: failedIf("etcd") },
    );
    log(`control plane: etcd ready in ${seconds()} s`);

    const port = options.port === undefined || options.port === 0 ? await freePort() : options.port;
    const url = `https://127.0.0.1:${port}`;
    admin.url = url;
    const auditLogPath = path.join(dataDir, "audit.log");
    const auditPolicyPath = path.join(dataDir, "audit-policy.yaml");
    await writeFile(auditPolicyPath, AUDIT_POLICY);
    const cert = (name: string): string => path.join(certDir, name);
    await children.spawn("kube-apiserver", options.bin("kube-apiserver"), [
      `--etcd-servers=${etcdUrl}`,
      "--bind-address=127.0.0.1",
      "--advertise-address=127.0.0.1",
      // No kubernetes Service endpoints: a loopback address may not be published there, and no pod needs it.
      "--endpoint-reconciler-type=none",
      `--secure-port=${port}`,
      `--tls-cert-file=${cert("apiserver.crt")}`,
      `--tls-private-key-file=${cert("apiserver.key")}`,
      `--client-ca-file=${cert("ca.crt")}`,
      "--authorization-mode=RBAC",
      "--anonymous-auth=true", // /readyz, /livez and /version for probes, as on clusters built by kubeadm
      `--service-account-issuer=https://kubernetes.default.svc.cluster.local`,
      `--service-account-key-file=${cert("service-account.pub")}`,
      `--service-account-signing-key-file=${cert("service-account.key")}`,
      "--service-cluster-ip-range=10.0.0.0/24",
      "--allow-privileged=false",
      "--profiling=false",
      `--audit-policy-file=${auditPolicyPath}`,
      `--audit-log-path=${auditLogPath}`,
      "--audit-log-format=json",
      "--audit-log-maxsize=100",
      "--audit-log-maxbackup=1",
      `--cert-dir=${path.join(dataDir, "apiserver-generated")}`,
      "--v=0",
      ...(options.apiServerArgs ?? []),
    ]);
    await waitUntil(
      "kube-apiserver",
      async () => (await kubeRequest(admin, { path: "/readyz", timeoutMs: 5000 })).status === 200,
      { timeoutMs: 120_000, failed: failedIf("kube-apiserver") },
    );
    const startupSeconds = Number(seconds());
    log(`control plane: kube-apiserver ready in ${startupSeconds} s (${url})`);

    // CRDs before kube-controller-manager: its garbage collector then knows their kinds from the start instead
    // of after its next discovery pass (30 s).
    if (options.crdDirs !== undefined && options.crdDirs.length > 0) {
      await installCrds(admin, await readCrds(options.crdDirs));
      log(`control plane: CRDs installed and Established at ${seconds()} s`);
    }

    if (options.controllerManager !== false) {
      const managerKubeconfig = path.join(dataDir, "controller-manager.kubeconfig");
      await writeFile(
        managerKubeconfig,
        kubeconfig(url, ca, "controller-manager", {
          "client-certificate-data": await read("controller-manager.crt"),
          "client-key-data": await read("controller-manager.key"),
        }),
        { mode: 0o600 },
      );
      await children.spawn("kube-controller-manager", options.bin("kube-controller-manager"), [
        `--kubeconfig=${managerKubeconfig}`,
        `--authentication-kubeconfig=${managerKubeconfig}`,
        `--authorization-kubeconfig=${managerKubeconfig}`,
        "--bind-address=127.0.0.1",
        "--secure-port=0",
        "--leader-elect=false",
        // Each controller under its own ServiceAccount and bootstrap RBAC role, as kubeadm runs them (the
        // garbage collector needs its role's `get *` to look owners up).
        "--use-service-account-credentials=true",
        `--controllers=${(options.controllers ?? DEFAULT_CONTROLLERS).join(",")}`,
        "--concurrent-gc-syncs=5",
        "--v=0",
      ]);
    }
    return {
      url,
      dataDir,
      admin,
      etcdUrl,
      auditLogPath,
      startupSeconds,
      kubeconfigYaml(credentials) {
        if (credentials === undefined) {
          return kubeconfig(url, ca, "gpuvm-test-admin", {
            "client-certificate-data": admin.cert ?? "",
            "client-key-data": admin.key ?? "",
          });
        }
        return kubeconfig(url, ca, credentials.user ?? "service-account", { token: credentials.token });
      },
      async serviceAccountToken(namespace, name, expirationSeconds = 24 * 3600) {
        const response = await kubeExpect(
          admin,
          {
            method: "POST",
            path: `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`,
            body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds } },
          },
          [200, 201],
        );
        const status = isRecord(response.json) ? response.json.status : undefined;
        const token = isRecord(status) ? status.token : undefined;
        if (typeof token !== "string") throw new ControlPlaneError(`TokenRequest for ${namespace}/${name}: no token`);
        return token;
      },
      request: (request) => kubeRequest(admin, request),
      compactEtcd: () => compactEtcd(etcdUrl),
      close: cleanUp,
    };
  } catch (error) {
    await cleanUp();
    throw error;
  }
}
