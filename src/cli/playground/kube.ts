// The Kubernetes API of a playground: the test double (needs nothing), or a real control plane built by
// `npm run kube:build`, on which the operator runs as deploy/ installs it (its own ServiceAccount token and RBAC,
// leader election in its namespace); and the namespace and credentials Secret the examples rely on.
import path from "node:path";
import { SECRET_WATCH_LABEL } from "../../api/common.ts";
import { type KubeTarget, kubeRequest as sendKubeRequest } from "../../control-plane/http.ts";
import { CREDENTIALS_NAMESPACE, CREDENTIALS_SECRET, OPERATOR_NAMESPACE, REPO_ROOT } from "./conventions.ts";

/** A step of the setup failed: the message says which, and what the API server answered. */
class PlaygroundSetupError extends Error {
  override name = "PlaygroundSetupError";
}

export interface PlaygroundKube {
  target: KubeTarget;
  label: string;
  kubeconfigYaml: string;
  /** A kubeconfig with the operator's own credentials (the real control plane); the user's kubeconfig otherwise. */
  operatorKubeconfigYaml?: string;
  leaderElectionNamespace?: string;
  kubectl?: string;
  close: () => Promise<void>;
}

export async function startDoubleKube(options: { port: number; stateDir: string }): Promise<PlaygroundKube> {
  const { startKubeDouble } = await import("../../kube-double/index.ts");
  const kube = await startKubeDouble({
    port: options.port,
    crdDir: path.join(REPO_ROOT, "crds"),
    stateFile: path.join(options.stateDir, "cluster-state.json"),
  });
  return {
    target: { url: kube.url, token: "playground" },
    label: "Kubernetes API test double",
    kubeconfigYaml: kube.kubeconfigYaml(),
    close: () => kube.close(),
  };
}

/** Thirty days: the playground may run for long; a restart asks for a new token. */
const OPERATOR_TOKEN_SECONDS = 30 * 24 * 3600;

export async function startRealKube(options: { port: number; stateDir: string }): Promise<PlaygroundKube> {
  const { builtKubeBinaries } = await import("../../control-plane/binaries.ts");
  const { startControlPlane } = await import("../../control-plane/control-plane.ts");
  const { installOperatorIdentity } = await import("../../control-plane/operator-identity.ts");
  const built = await builtKubeBinaries();
  if (built === undefined) {
    throw new PlaygroundSetupError(
      "--kube real needs the control plane binaries: run `npm run kube:build` first (needs Go 1.26+ on PATH)",
    );
  }
  const plane = await startControlPlane({
    bin: built.bin,
    dataDir: path.join(options.stateDir, "kube"),
    keepData: true,
    port: options.port,
    crdDirs: [path.join(REPO_ROOT, "crds")],
    log: (line) => process.stdout.write(`[playground] ${line}\n`),
  });
  try {
    const account = await installOperatorIdentity(plane.admin);
    const token = await plane.serviceAccountToken(account.namespace, account.name, OPERATOR_TOKEN_SECONDS);
    return {
      target: plane.admin,
      label: `Kubernetes ${built.versions.kubernetes} (kube-apiserver, real)`,
      kubeconfigYaml: plane.kubeconfigYaml(),
      operatorKubeconfigYaml: plane.kubeconfigYaml({ token, user: `${account.namespace}:${account.name}` }),
      leaderElectionNamespace: account.namespace,
      kubectl: built.bin("kubectl"),
      close: () => plane.close(),
    };
  } catch (error) {
    await plane.close();
    throw error;
  }
}

async function kubeRequest(target: KubeTarget, method: string, route: string, body?: unknown) {
  return sendKubeRequest(target, {
    method,
    path: route,
    body,
    contentType: method === "PATCH" ? "application/merge-patch+json" : "application/json",
  });
}

async function expectStatus(
  response: { status: number; text: string },
  allowed: number[],
  what: string,
): Promise<void> {
  if (allowed.includes(response.status)) return;
  throw new PlaygroundSetupError(`${what}: HTTP ${response.status} ${response.text.slice(0, 300)}`);
}

/**
 * Namespace `default` and the credentials Secret the examples rely on (created or brought up to date), and the
 * operator's own namespace (its claims).
 */
export async function ensureCredentials(
  target: KubeTarget,
  cloud: { url: string; apiKey: string; projectId: string },
): Promise<void> {
  for (const name of [CREDENTIALS_NAMESPACE, OPERATOR_NAMESPACE]) {
    const namespace = await kubeRequest(target, "POST", "/api/v1/namespaces", {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name },
    });
    await expectStatus(namespace, [200, 201, 409], `creating namespace ${name}`);
  }
  const stringData = { apiKey: cloud.apiKey, projectId: cloud.projectId, apiUrl: cloud.url };
  const data = Object.fromEntries(
    Object.entries(stringData).map(([key, value]) => [key, Buffer.from(value).toString("base64")]),
  );
  const secretPath = `/api/v1/namespaces/${CREDENTIALS_NAMESPACE}/secrets`;
  const created = await kubeRequest(target, "POST", secretPath, {
    apiVersion: "v1",
    kind: "Secret",
    type: "Opaque",
    metadata: { name: CREDENTIALS_SECRET, namespace: CREDENTIALS_NAMESPACE, labels: { [SECRET_WATCH_LABEL]: "true" } },
    data,
  });
  if (created.status === 409) {
    // Kept from an earlier run (state dir): the simulator may have new keys, so bring the data up to date.
    const patched = await kubeRequest(target, "PATCH", `${secretPath}/${CREDENTIALS_SECRET}`, {
      metadata: { labels: { [SECRET_WATCH_LABEL]: "true" } },
      data,
    });
    await expectStatus(patched, [200], `updating Secret ${CREDENTIALS_NAMESPACE}/${CREDENTIALS_SECRET}`);
    return;
  }
  await expectStatus(created, [200, 201], `creating Secret ${CREDENTIALS_NAMESPACE}/${CREDENTIALS_SECRET}`);
}
