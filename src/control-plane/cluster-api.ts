// Cluster API's core manager and kubeadm bootstrap manager run as processes against a management cluster's real
// kube-apiserver, installed from each provider's rendered components (binaries.ts) as clusterctl would install
// them, with what a cluster would give their Deployments replaced by loopback: the webhooks are served on
// 127.0.0.1 with a certificate of our own CA, and the webhook configurations and CRD conversion webhooks point
// at those URLs with that CA (as Cluster API's own envtest does); each manager runs under its ServiceAccount's
// token and the ClusterRoles the components define (the core manager's aggregated role included); health is
// awaited on /readyz.
import { readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { isRecord } from "../util/is-record.ts";
import { CAPI_COMPONENTS, type CapiBinary, type CapiComponent, type KubeBinary } from "./binaries.ts";
import type { RunningControlPlane } from "./control-plane.ts";
import { installCrds } from "./crds.ts";
import { type KubeTarget, kubeRequest } from "./http.ts";
import { applyManifests, type ManifestObject, parseManifests } from "./operator-identity.ts";
import { type ChildSet, ControlPlaneError, freePort, processFolder, waitUntil } from "./processes.ts";

export interface ClusterApiOptions {
  /** The management cluster: its admin applies the components; ServiceAccount tokens come from it. */
  managementCluster: Pick<RunningControlPlane, "admin" | "kubeconfigYaml" | "serviceAccountToken">;
  /** Cluster API's build (ensureCapiBinaries). */
  capi: { bin(name: CapiBinary): string; components(name: CapiComponent): string };
  /** The control plane's build, for kube-certs (the webhooks' certificates). */
  bin(name: KubeBinary): string;
  /** Where the certificates, kubeconfigs and logs go. A fresh temporary folder when absent. */
  dataDir?: string;
  keepData?: boolean;
  /** clusterctl's variables (`${NAME:=default}` in the components): feature gates, the bootstrap token TTL … */
  variables?: Record<string, string>;
  /** More flags for a manager (e.g. `--sync-period=1m`). */
  extraArgs?: Partial<Record<CapiComponent, string[]>>;
  log?: (line: string) => void;
}

export interface RunningManager {
  /** https://127.0.0.1:<port>, where the API server calls its webhooks. */
  webhookUrl: string;
  /** http://127.0.0.1:<port>/readyz and /healthz. */
  healthUrl: string;
  /** http://127.0.0.1:<port>/metrics (controller-runtime's metrics, served without authentication). */
  metricsUrl: string;
  /** Its ServiceAccount (namespace/name). */
  serviceAccount: string;
  logPath: string;
}

export interface RunningClusterApi {
  managers: Record<CapiComponent, RunningManager>;
  /** The CA the webhooks' serving certificate is signed by (the caBundle of every webhook). */
  webhookCaPem: string;
  dataDir: string;
  /** Seconds from the first manifest applied to both managers ready. */
  startupSeconds: number;
  close(): Promise<void>;
}

/** The label clusterctl puts on every object it installs (`clusterctl move` discovers the CRDs to move by it). */
export const CLUSTERCTL_LABELS: Readonly<Record<string, string>> = { "clusterctl.cluster.x-k8s.io": "" };

/** The process name (and log file) of each component's manager. */
const MANAGER_BINARY: Record<CapiComponent, CapiBinary> = {
  core: "capi-manager",
  "bootstrap-kubeadm": "capi-kubeadm-bootstrap-manager",
};

/** Long enough for a playground session; a new start asks for new tokens. */
const MANAGER_TOKEN_SECONDS = 30 * 24 * 3600;

/** clusterctl's variable syntax: `${NAME}`, `${NAME:=default}`, `${NAME:-default}`, `${NAME=default}`. */
export function substituteVariables(text: string, variables: Record<string, string>): string {
  return text.replace(
    /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?[=-]([^}]*))?\}/g,
    (_match, name: string, fallback?: string) => {
      const value = variables[name] ?? fallback;
      if (value === undefined) throw new ControlPlaneError(`Cluster API components: variable ${name} has no value`);
      return value;
    },
  );
}

async function readComponents(file: string, variables: Record<string, string>): Promise<ManifestObject[]> {
  return parseManifests(substituteVariables(await readFile(file, "utf8"), variables));
}

/** A Service-based webhook client config, pointed at the manager's loopback URL with our CA. */
function loopbackClientConfig(clientConfig: unknown, webhookUrl: string, caBundle: string): Record<string, unknown> {
  const service = isRecord(clientConfig) && isRecord(clientConfig.service) ? clientConfig.service : {};
  const servicePath = typeof service.path === "string" ? service.path : "/";
  return { url: `${webhookUrl}${servicePath}`, caBundle };
}

function withoutCertManagerAnnotation(metadata: ManifestObject["metadata"]): ManifestObject["metadata"] {
  const annotations = isRecord(metadata.annotations) ? { ...metadata.annotations } : {};
  delete annotations["cert-manager.io/inject-ca-from"];
  return { ...metadata, annotations };
}

/** The components' objects as this harness installs them: webhooks on loopback, nothing cert-manager needs. */
export function loopbackComponents(
  objects: ManifestObject[],
  webhookUrl: string,
  caPem: string,
): { identity: ManifestObject[]; crds: ManifestObject[]; webhooks: ManifestObject[]; deployment: ManifestObject } {
  const caBundle = Buffer.from(caPem).toString("base64");
  const identity: ManifestObject[] = [];
  const crds: ManifestObject[] = [];
  const webhooks: ManifestObject[] = [];
  let deployment: ManifestObject | undefined;
  for (const object of objects) {
    switch (object.kind) {
      case "Namespace":
      case "ServiceAccount":
      case "ClusterRole":
      case "ClusterRoleBinding":
      case "Role":
      case "RoleBinding":
        identity.push(object);
        break;
      case "CustomResourceDefinition": {
        const spec = isRecord(object.spec) ? object.spec : {};
        // As clusterctl init labels what it installs: `clusterctl move` finds the kinds to move by this label.
        const labels = { ...(isRecord(object.metadata.labels) ? object.metadata.labels : {}), ...CLUSTERCTL_LABELS };
        const conversion = isRecord(spec.conversion) ? spec.conversion : undefined;
        const webhook = conversion !== undefined && isRecord(conversion.webhook) ? conversion.webhook : undefined;
        crds.push({
          ...object,
          metadata: { ...withoutCertManagerAnnotation(object.metadata), labels },
          spec:
            conversion === undefined || webhook === undefined
              ? spec
              : {
                  ...spec,
                  conversion: {
                    ...conversion,
                    webhook: {
                      ...webhook,
                      clientConfig: loopbackClientConfig(webhook.clientConfig, webhookUrl, caBundle),
                    },
                  },
                },
        });
        break;
      }
      case "MutatingWebhookConfiguration":
      case "ValidatingWebhookConfiguration":
        webhooks.push({
          ...object,
          metadata: withoutCertManagerAnnotation(object.metadata),
          webhooks: (Array.isArray(object.webhooks) ? object.webhooks : []).filter(isRecord).map((webhook) => ({
            ...webhook,
            clientConfig: loopbackClientConfig(webhook.clientConfig, webhookUrl, caBundle),
          })),
        });
        break;
      case "Deployment":
        deployment = object;
        break;
      // Service (the webhooks' in-cluster address), Certificate and Issuer (cert-manager): replaced by loopback.
    }
  }
  if (deployment === undefined) throw new ControlPlaneError("Cluster API components without a Deployment");
  return { identity, crds, webhooks, deployment };
}

interface ManagerContainer {
  args: string[];
  serviceAccount: { namespace: string; name: string };
}

/** The manager's flags and ServiceAccount, from its Deployment. */
function managerContainer(deployment: ManifestObject): ManagerContainer {
  const spec = isRecord(deployment.spec) ? deployment.spec : {};
  const template = isRecord(spec.template) && isRecord(spec.template.spec) ? spec.template.spec : {};
  const containers = Array.isArray(template.containers) ? template.containers.filter(isRecord) : [];
  const manager = containers.find((container) => container.name === "manager") ?? containers[0];
  const args = Array.isArray(manager?.args) ? manager.args.filter((arg) => typeof arg === "string") : [];
  const namespace = deployment.metadata.namespace;
  const name = template.serviceAccountName;
  if (namespace === undefined || typeof name !== "string") {
    throw new ControlPlaneError(`Deployment ${deployment.metadata.name}: no namespace or serviceAccountName`);
  }
  return { args, serviceAccount: { namespace, name } };
}

/** The Deployment's flags with ours in place of those a pod would need: loopback addresses, files, one replica. */
export function managerArgs(deploymentArgs: string[], ours: Record<string, string>, extra: string[]): string[] {
  // One replica: no leader election (its lease would make a restart wait for the previous one to expire).
  const replaced = new Set([...Object.keys(ours), "leader-elect"]);
  const kept = deploymentArgs.filter((arg) => !replaced.has(arg.replace(/^--/, "").split("=")[0] ?? ""));
  return [...kept, ...Object.entries(ours).map(([name, value]) => `--${name}=${value}`), ...extra];
}

interface PreparedManager {
  component: CapiComponent;
  binary: CapiBinary;
  args: string[];
  serviceAccount: ManagerContainer["serviceAccount"];
  manager: RunningManager;
}

/**
 * Waits until every aggregated ClusterRole among `objects` has rules: kube-controller-manager's
 * clusterrole-aggregation-controller fills them. Without it the core manager's role stays empty and the manager
 * waits forever for caches it may not list, so this says what is missing instead.
 */
async function waitForAggregatedRoles(admin: KubeTarget, objects: ManifestObject[]): Promise<void> {
  const aggregated = objects.filter((object) => object.kind === "ClusterRole" && isRecord(object.aggregationRule));
  for (const role of aggregated) {
    const rolePath = `/apis/rbac.authorization.k8s.io/v1/clusterroles/${role.metadata.name}`;
    await waitUntil(
      `ClusterRole ${role.metadata.name} aggregated`,
      async () => {
        const current = await kubeRequest(admin, { path: rolePath });
        return isRecord(current.json) && Array.isArray(current.json.rules) && current.json.rules.length > 0;
      },
      {
        timeoutMs: 30_000,
        failed: async () => undefined,
        timeoutMessage:
          "no rules after 30 s: the management cluster's kube-controller-manager must run clusterrole-aggregation-controller",
      },
    );
  }
}

/** Applies one provider's components with its webhooks on fresh loopback ports; says how to run its manager. */
async function installComponent(
  options: ClusterApiOptions,
  component: CapiComponent,
  webhookCerts: { dir: string; caPem: string },
  logDir: string,
): Promise<PreparedManager> {
  const admin = options.managementCluster.admin;
  const [webhookPort, healthPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
  const webhookUrl = `https://127.0.0.1:${webhookPort}`;
  const objects = await readComponents(options.capi.components(component), options.variables ?? {});
  const { identity, crds, webhooks, deployment } = loopbackComponents(objects, webhookUrl, webhookCerts.caPem);
  await applyManifests(admin, identity);
  await waitForAggregatedRoles(admin, identity);
  // Their other versions convert through the manager, which is not up yet: only the storage version is listed.
  await installCrds(admin, crds, 60_000, "storage");
  await applyManifests(admin, webhooks);
  const container = managerContainer(deployment);
  const ours = {
    // kube-certs' serving certificate is for 127.0.0.1 and localhost: both managers serve their webhooks with it.
    "webhook-port": String(webhookPort),
    "webhook-cert-dir": webhookCerts.dir,
    "webhook-cert-name": "apiserver.crt",
    "webhook-key-name": "apiserver.key",
    "health-addr": `127.0.0.1:${healthPort}`,
    "diagnostics-address": `127.0.0.1:${metricsPort}`,
    "insecure-diagnostics": "true",
  };
  const binary = MANAGER_BINARY[component];
  return {
    component,
    binary,
    args: managerArgs(container.args, ours, options.extraArgs?.[component] ?? []),
    serviceAccount: container.serviceAccount,
    manager: {
      webhookUrl,
      healthUrl: `http://127.0.0.1:${healthPort}`,
      metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
      serviceAccount: `${container.serviceAccount.namespace}/${container.serviceAccount.name}`,
      logPath: path.join(logDir, `${binary}.log`),
    },
  };
}

/** Starts a manager as its ServiceAccount (a token through TokenRequest, in a kubeconfig of its own). */
async function launchManager(
  options: ClusterApiOptions,
  children: ChildSet,
  prepared: PreparedManager,
  dataDir: string,
): Promise<void> {
  const { namespace, name } = prepared.serviceAccount;
  const token = await options.managementCluster.serviceAccountToken(namespace, name, MANAGER_TOKEN_SECONDS);
  const kubeconfigPath = path.join(dataDir, `${prepared.binary}.kubeconfig`);
  await writeFile(kubeconfigPath, options.managementCluster.kubeconfigYaml({ token, user: `${namespace}:${name}` }), {
    mode: 0o600,
  });
  await children.spawn(
    prepared.binary,
    options.capi.bin(prepared.binary),
    [`--kubeconfig=${kubeconfigPath}`, ...prepared.args],
    // What the Deployment's downward API gives the pod.
    { ...process.env, POD_NAMESPACE: namespace, POD_NAME: prepared.binary },
  );
}

/**
 * Installs Cluster API's core and kubeadm bootstrap providers in the management cluster and starts their
 * managers; resolves once both answer /readyz (their check: the webhook server is up).
 */
export async function startClusterApi(options: ClusterApiOptions): Promise<RunningClusterApi> {
  const log = options.log ?? (() => {});
  const { dataDir, children } = await processFolder(options.dataDir, log);
  const close = async (): Promise<void> => {
    await children.stopAll();
    if (options.keepData !== true) await rm(dataDir, { recursive: true, force: true });
  };
  try {
    const started = Date.now();
    const seconds = (): number => Math.round((Date.now() - started) / 100) / 10;
    const certDir = path.join(dataDir, "webhook-certs");
    const certs = await children.spawn("kube-certs", options.bin("kube-certs"), [certDir]);
    if ((await certs.exited) !== 0)
      throw new ControlPlaneError(`kube-certs failed: ${await children.tail("kube-certs")}`);
    const webhookCaPem = await readFile(path.join(certDir, "ca.crt"), "utf8");
    const prepared: PreparedManager[] = [];
    for (const component of CAPI_COMPONENTS) {
      const webhookCerts = { dir: certDir, caPem: webhookCaPem };
      prepared.push(await installComponent(options, component, webhookCerts, path.join(dataDir, "logs")));
    }
    log(`cluster-api: components installed in ${seconds()} s`);
    for (const manager of prepared) await launchManager(options, children, manager, dataDir);
    // Either manager exiting ends the wait, with its log.
    const anyExited = async (): Promise<string | undefined> => {
      const gone = prepared.find(({ binary }) => children.exited(binary));
      return gone === undefined ? undefined : `${gone.binary} exited:\n${await children.tail(gone.binary)}`;
    };
    for (const { binary, manager } of prepared) {
      await waitUntil(
        binary,
        async () => (await fetch(`${manager.healthUrl}/readyz`, { signal: AbortSignal.timeout(5000) })).ok,
        { timeoutMs: 180_000, failed: anyExited },
      );
    }
    const startupSeconds = seconds();
    log(`cluster-api: core and kubeadm bootstrap managers ready in ${startupSeconds} s`);
    const managerOf = (component: CapiComponent): RunningManager => {
      const found = prepared.find((candidate) => candidate.component === component);
      if (found === undefined) throw new ControlPlaneError(`Cluster API: no ${component} manager`);
      return found.manager;
    };
    const managers = { core: managerOf("core"), "bootstrap-kubeadm": managerOf("bootstrap-kubeadm") };
    return { managers, webhookCaPem, dataDir, startupSeconds, close };
  } catch (error) {
    await close();
    throw error;
  }
}
