// The operator's identity exactly as deploy/ defines it (Namespace, ServiceAccount and RBAC), installed on a real
// control plane so that the operator runs there with its own ServiceAccount token and nothing more.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { parseAllDocuments } from "yaml";
import { isRecord } from "../util/is-record.ts";
import { REPO_ROOT } from "./binaries.ts";
import { type KubeTarget, kubeExpect } from "./http.ts";

export const DEPLOY_DIR = path.join(REPO_ROOT, "deploy");
/** The files of deploy/ that make up the operator's identity, in the order they are applied. */
export const IDENTITY_FILES = ["namespace.yaml", "service-account.yaml", "rbac.yaml"] as const;

export interface ManifestObject extends Record<string, unknown> {
  kind: string;
  metadata: { name: string; namespace?: string; [field: string]: unknown };
}

export class OperatorIdentityError extends Error {
  override name = "OperatorIdentityError";
}

export function isManifest(value: unknown): value is ManifestObject {
  return (
    isRecord(value) &&
    typeof value.kind === "string" &&
    isRecord(value.metadata) &&
    typeof value.metadata.name === "string"
  );
}

/** The objects of a multi-document YAML text (documents that are not objects with a kind and a name are left out). */
export function parseManifests(text: string): ManifestObject[] {
  return parseAllDocuments(text)
    .map((document) => document.toJSON() as unknown)
    .filter(isManifest);
}

export async function readManifests(file: string): Promise<ManifestObject[]> {
  return parseManifests(await readFile(file, "utf8"));
}

/** Every object of deploy/'s identity files. */
export async function operatorIdentityManifests(): Promise<ManifestObject[]> {
  const all: ManifestObject[] = [];
  for (const file of IDENTITY_FILES) all.push(...(await readManifests(path.join(DEPLOY_DIR, file))));
  return all;
}

const ROUTES: Record<string, (metadata: ManifestObject["metadata"]) => string> = {
  Namespace: (m) => `/api/v1/namespaces/${m.name}`,
  ServiceAccount: (m) => `/api/v1/namespaces/${m.namespace}/serviceaccounts/${m.name}`,
  ClusterRole: (m) => `/apis/rbac.authorization.k8s.io/v1/clusterroles/${m.name}`,
  ClusterRoleBinding: (m) => `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${m.name}`,
  Role: (m) => `/apis/rbac.authorization.k8s.io/v1/namespaces/${m.namespace}/roles/${m.name}`,
  RoleBinding: (m) => `/apis/rbac.authorization.k8s.io/v1/namespaces/${m.namespace}/rolebindings/${m.name}`,
  Secret: (m) => `/api/v1/namespaces/${m.namespace}/secrets/${m.name}`,
  ConfigMap: (m) => `/api/v1/namespaces/${m.namespace}/configmaps/${m.name}`,
  MutatingWebhookConfiguration: (m) => `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${m.name}`,
  ValidatingWebhookConfiguration: (m) =>
    `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${m.name}`,
};

/** Server-side applies the objects (created or brought up to date). */
export async function applyManifests(target: KubeTarget, objects: ManifestObject[]): Promise<void> {
  for (const object of objects) {
    const route = ROUTES[object.kind];
    if (route === undefined) throw new OperatorIdentityError(`cannot apply a ${object.kind} (${object.metadata.name})`);
    await kubeExpect(
      target,
      {
        method: "PATCH",
        path: `${route(object.metadata)}?fieldManager=gpuvm-test&force=true`,
        body: JSON.stringify(object),
        contentType: "application/apply-patch+yaml",
      },
      [200, 201],
    );
  }
}

/** Applies deploy/'s Namespace, ServiceAccount and RBAC; returns the ServiceAccount. */
export async function installOperatorIdentity(target: KubeTarget): Promise<{ namespace: string; name: string }> {
  const objects = await operatorIdentityManifests();
  await applyManifests(target, objects);
  const account = objects.find((object) => object.kind === "ServiceAccount");
  if (account?.metadata.namespace === undefined)
    throw new OperatorIdentityError("deploy/ has no namespaced ServiceAccount");
  return { namespace: account.metadata.namespace, name: account.metadata.name };
}
