// A real Kubernetes control plane on loopback for tests and the playground: etcd, kube-apiserver (TLS, client
// certificates, ServiceAccount tokens, RBAC, an audit log of ServiceAccount requests) and
// kube-controller-manager (garbage collection, namespace deletion), from the binaries of binaries.ts; the
// processes are processes.ts's, the CRDs crds.ts's.
import { readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { isRecord } from "../util/is-record.ts";
import type { KubeBinary } from "./binaries.ts";
import { installCrds, readCrds } from "./crds.ts";
import { type KubeRequest, type KubeResponse, type KubeTarget, kubeExpect, kubeRequest } from "./http.ts";
import { type ChildSet, ControlPlaneError, freePort, processFolder, waitUntil } from "./processes.ts";

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

const DEFAULT_CONTROLLERS = ["garbage-collector-controller", "namespace-controller"];

/** Every request of every ServiceAccount, without bodies; nothing else. */
const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
`;

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

/** The certificates kube-certs writes: the CA, and the files of each client and server, read by name. */
interface Certificates {
  dir: string;
  ca: string;
  read(name: string): Promise<string>;
}

async function makeCertificates(children: ChildSet, options: ControlPlaneOptions, dir: string): Promise<Certificates> {
  const certs = await children.spawn("kube-certs", options.bin("kube-certs"), [dir]);
  if ((await certs.exited) !== 0)
    throw new ControlPlaneError(`kube-certs failed: ${await children.tail("kube-certs")}`);
  const read = (name: string): Promise<string> => readFile(path.join(dir, name), "utf8");
  return { dir, ca: await read("ca.crt"), read };
}

/** A child's exit, as the failure `waitUntil` stops on. */
function failedIf(children: ChildSet, name: string): () => Promise<string | undefined> {
  return async () => (children.exited(name) ? `${name} exited:\n${await children.tail(name)}` : undefined);
}

/** Starts etcd on two free ports and waits until it is healthy; answers its client URL. */
async function startEtcd(children: ChildSet, options: ControlPlaneOptions, dataDir: string): Promise<string> {
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
  await waitUntil(
    "etcd",
    async () => {
      const health = await fetch(`${etcdUrl}/health`);
      return health.ok && ((await health.json()) as { health?: string }).health === "true";
    },
    { timeoutMs: 60_000, failed: failedIf(children, "etcd") },
  );
  return etcdUrl;
}

/** Starts kube-apiserver on etcd and waits until /readyz answers; answers the admin and the audit log's path. */
async function startApiServer(
  children: ChildSet,
  options: ControlPlaneOptions,
  dataDir: string,
  etcdUrl: string,
  certs: Certificates,
): Promise<{ admin: KubeTarget; auditLogPath: string }> {
  const port = options.port === undefined || options.port === 0 ? await freePort() : options.port;
  const url = `https://127.0.0.1:${port}`;
  const admin: KubeTarget = {
    url,
    ca: certs.ca,
    cert: await certs.read("admin.crt"),
    key: await certs.read("admin.key"),
  };
  const auditLogPath = path.join(dataDir, "audit.log");
  const auditPolicyPath = path.join(dataDir, "audit-policy.yaml");
  await writeFile(auditPolicyPath, AUDIT_POLICY);
  const cert = (name: string): string => path.join(certs.dir, name);
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
    { timeoutMs: 120_000, failed: failedIf(children, "kube-apiserver") },
  );
  return { admin, auditLogPath };
}

/** Starts kube-controller-manager with its own client certificate and the chosen controllers. */
async function startControllerManager(
  children: ChildSet,
  options: ControlPlaneOptions,
  dataDir: string,
  url: string,
  certs: Certificates,
): Promise<void> {
  const managerKubeconfig = path.join(dataDir, "controller-manager.kubeconfig");
  await writeFile(
    managerKubeconfig,
    kubeconfig(url, certs.ca, "controller-manager", {
      "client-certificate-data": await certs.read("controller-manager.crt"),
      "client-key-data": await certs.read("controller-manager.key"),
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

/** What a started control plane offers: its admin, kubeconfigs, ServiceAccount tokens, etcd compaction. */
function runningControlPlane(parts: {
  dataDir: string;
  admin: KubeTarget;
  etcdUrl: string;
  auditLogPath: string;
  startupSeconds: number;
  close: () => Promise<void>;
}): RunningControlPlane {
  const { dataDir, admin, etcdUrl, auditLogPath, startupSeconds } = parts;
  const url = admin.url;
  const ca = admin.ca ?? "";
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
    close: parts.close,
  };
}

/** Starts etcd, kube-apiserver and (unless told otherwise) kube-controller-manager; installs the CRDs. */
export async function startControlPlane(options: ControlPlaneOptions): Promise<RunningControlPlane> {
  const log = options.log ?? (() => {});
  const { dataDir, children } = await processFolder(options.dataDir, log);
  const cleanUp = async (): Promise<void> => {
    await children.stopAll();
    if (options.keepData !== true) await rm(dataDir, { recursive: true, force: true });
  };
  try {
    const started = Date.now();
    const seconds = (): string => ((Date.now() - started) / 1000).toFixed(1);
    const certs = await makeCertificates(children, options, path.join(dataDir, "certs"));
    const etcdUrl = await startEtcd(children, options, dataDir);
    log(`control plane: etcd ready in ${seconds()} s`);
    const { admin, auditLogPath } = await startApiServer(children, options, dataDir, etcdUrl, certs);
    const startupSeconds = Number(seconds());
    log(`control plane: kube-apiserver ready in ${startupSeconds} s (${admin.url})`);
    // CRDs before kube-controller-manager: its garbage collector then knows their kinds from the start instead
    // of after its next discovery pass (30 s).
    if (options.crdDirs !== undefined && options.crdDirs.length > 0) {
      await installCrds(admin, await readCrds(options.crdDirs));
      log(`control plane: CRDs installed and Established at ${seconds()} s`);
    }
    if (options.controllerManager !== false) {
      await startControllerManager(children, options, dataDir, admin.url, certs);
    }
    return runningControlPlane({ dataDir, admin, etcdUrl, auditLogPath, startupSeconds, close: cleanUp });
  } catch (error) {
    await cleanUp();
    throw error;
  }
}
