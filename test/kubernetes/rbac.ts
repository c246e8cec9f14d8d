// The RBAC check: what deploy/ grants the operator against what the operator asked for on a real API server,
// read from kube-apiserver's audit log (every request of a ServiceAccount, with RBAC's decision).
import { readFile } from "node:fs/promises";
import path from "node:path";
import { DEPLOY_DIR, type ManifestObject, readManifests } from "../../src/control-plane/operator-identity.ts";
import { isRecord } from "../../src/util/is-record.ts";

/** One permission: a verb on a resource (`group/resource` or `group/resource/subresource`), cluster-wide or in a namespace. */
export interface Permission {
  group: string;
  resource: string;
  verb: string;
  /** Undefined for a ClusterRole bound cluster-wide. */
  namespace?: string;
}

export interface AuditedRequest extends Permission {
  user: string;
  uri: string;
  code: number | undefined;
  /** RBAC's decision: "allow" or "forbid". */
  decision: string | undefined;
}

/**
 * What only the Cluster API provider's controllers use: the journeys run without Cluster API (the controllers are
 * off), so they cannot show these; test/kubernetes/cluster-api-controllers.test.ts shows each one used.
 */
export const ONLY_THE_CLUSTER_API_CONTROLLERS_USE: ReadonlySet<string> = new Set([
  ...["gpuclusters", "gpumachines", "gpumachinetemplates"].flatMap((plural) => [
    ...["list", "watch"].map((verb) => `${verb} infrastructure.cluster.x-k8s.io/${plural} (cluster-wide)`),
    `patch infrastructure.cluster.x-k8s.io/${plural}/status (cluster-wide)`,
  ]),
  // Finalizers, block-move, providerID: a template has none of them.
  ...["gpuclusters", "gpumachines"].map((plural) => `patch infrastructure.cluster.x-k8s.io/${plural} (cluster-wide)`),
  ...["clusters", "machines"].flatMap((plural) =>
    ["list", "watch"].map((verb) => `${verb} cluster.x-k8s.io/${plural} (cluster-wide)`),
  ),
  ...["gpunetworks", "gpufirewallrules"].flatMap((plural) =>
    ["create", "delete"].map((verb) => `${verb} gpucloud.dev/${plural} (cluster-wide)`),
  ),
]);

export function permissionKey(permission: Permission): string {
  const where = permission.namespace === undefined ? "cluster-wide" : `in ${permission.namespace}`;
  return `${permission.verb} ${permission.group === "" ? "core" : permission.group}/${permission.resource} (${where})`;
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : [];
}

/** Every (group, resource, verb) deploy/rbac.yaml grants, expanded from its rules. */
export async function grantedPermissions(): Promise<Permission[]> {
  const objects: ManifestObject[] = await readManifests(path.join(DEPLOY_DIR, "rbac.yaml"));
  const granted: Permission[] = [];
  for (const role of objects.filter((object) => object.kind === "ClusterRole" || object.kind === "Role")) {
    const namespace = role.kind === "Role" ? role.metadata.namespace : undefined;
    for (const rule of Array.isArray(role.rules) ? role.rules.filter(isRecord) : []) {
      for (const group of strings(rule.apiGroups))
        for (const resource of strings(rule.resources))
          for (const verb of strings(rule.verbs)) granted.push({ group, resource, verb, namespace });
    }
  }
  return granted;
}

function stringAt(record: unknown, key: string): string | undefined {
  const value = isRecord(record) ? record[key] : undefined;
  return typeof value === "string" ? value : undefined;
}

/** One audit.k8s.io/v1 Event as the request it records; undefined for other stages and other users. */
function auditedRequest(event: unknown, user: string): AuditedRequest | undefined {
  if (!isRecord(event) || stringAt(event.user, "username") !== user) return undefined;
  // A watch still open when the log is read has only its ResponseStarted event; RBAC decided before either.
  if (event.stage !== "ResponseStarted" && event.stage !== "ResponseComplete") return undefined;
  const resource = stringAt(event.objectRef, "resource") ?? "";
  const subresource = stringAt(event.objectRef, "subresource");
  const code = isRecord(event.responseStatus) ? event.responseStatus.code : undefined;
  return {
    user,
    uri: stringAt(event, "requestURI") ?? "",
    verb: stringAt(event, "verb") ?? "",
    group: stringAt(event.objectRef, "apiGroup") ?? "",
    resource: subresource === undefined ? resource : `${resource}/${subresource}`,
    namespace: stringAt(event.objectRef, "namespace"),
    code: typeof code === "number" ? code : undefined,
    decision: stringAt(event.annotations, "authorization.k8s.io/decision"),
  };
}

/** The requests `user` made, from a JSON-lines audit log (audit.k8s.io/v1 Events; a request may appear twice). */
export async function auditedRequests(auditLogPath: string, user: string): Promise<AuditedRequest[]> {
  const text = await readFile(auditLogPath, "utf8");
  return text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .flatMap((line) => auditedRequest(JSON.parse(line), user) ?? []);
}

function covers(granted: Permission, request: AuditedRequest): boolean {
  return (
    (granted.group === "*" || granted.group === request.group) &&
    (granted.resource === "*" || granted.resource === request.resource) &&
    (granted.verb === "*" || granted.verb === request.verb) &&
    (granted.namespace === undefined || granted.namespace === request.namespace)
  );
}

export interface RbacVerdict {
  /** Requests RBAC refused (each one a permission deploy/ lacks). */
  missing: string[];
  /** Granted permissions no request used. */
  unused: string[];
  /** How many requests were read. */
  requests: number;
}

export function rbacVerdict(granted: Permission[], requests: AuditedRequest[]): RbacVerdict {
  const resourceRequests = requests.filter((request) => request.resource !== "");
  const missing = new Set<string>();
  for (const request of requests) {
    if (request.decision === "forbid" || request.code === 403) {
      missing.add(request.resource === "" ? `${request.verb} ${request.uri}` : permissionKey(request));
    }
  }
  const allowed = resourceRequests.filter((request) => request.decision === "allow");
  const unused = granted
    .filter((permission) => !allowed.some((request) => covers(permission, request)))
    .map(permissionKey);
  return { missing: [...missing].sort(), unused: [...new Set(unused)].sort(), requests: requests.length };
}
