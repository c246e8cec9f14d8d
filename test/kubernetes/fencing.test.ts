// Fenced leadership on the real kube-apiserver: the replicas run as deploy/'s ServiceAccount (its token, its RBAC,
// their Lease in gpuvm-system), and kube-apiserver's audit log (every ServiceAccount request, with its User-Agent
// and the time it arrived) is the Kubernetes side's write log. The scenarios are test/e2e/fencing.ts's.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { kubeExpect } from "../../src/control-plane/http.ts";
import { installOperatorIdentity } from "../../src/control-plane/operator-identity.ts";
import { isRecord } from "../../src/util/is-record.ts";
import { describeFencing, type KubeWriteRecord, tokenKubeconfig } from "../e2e/fencing.ts";
import { adminTarget, createNamespace, deleteNamespace, sharedKube } from "./shared.ts";

const METHODS: Record<string, string> = {
  create: "POST",
  update: "PUT",
  patch: "PATCH",
  delete: "DELETE",
  deletecollection: "DELETE",
};

const text = (record: unknown, key: string): string | undefined => {
  const value = isRecord(record) ? record[key] : undefined;
  return typeof value === "string" ? value : undefined;
};

/** The writes of ServiceAccount `user` that the audit log records as answered (stage ResponseComplete). */
async function auditedWrites(user: string): Promise<KubeWriteRecord[]> {
  const lines = (await readFile(path.join(sharedKube().dataDir, "audit.log"), "utf8")).split("\n");
  const writes: KubeWriteRecord[] = [];
  for (const line of lines) {
    if (line === "") continue;
    const event: unknown = JSON.parse(line);
    if (!isRecord(event) || event.stage !== "ResponseComplete" || text(event.user, "username") !== user) continue;
    const method = METHODS[text(event, "verb") ?? ""];
    if (method === undefined) continue;
    const status = isRecord(event.responseStatus) ? event.responseStatus.code : undefined;
    const leaseName = text(event.objectRef, "resource") === "leases" ? text(event.objectRef, "name") : undefined;
    writes.push({
      // RFC 3339 with microseconds: milliseconds are enough here.
      at: Date.parse((text(event, "requestReceivedTimestamp") ?? "").replace(/(\.\d{3})\d*Z$/, "$1Z")),
      method,
      path: (text(event, "requestURI") ?? "").split("?")[0] ?? "",
      userAgent: text(event, "userAgent") ?? "",
      ...(typeof status === "number" ? { status } : {}),
      ...(leaseName !== undefined ? { leaseName } : {}),
    });
  }
  return writes;
}

describeFencing({
  name: "real kube-apiserver",
  async start(stateDir) {
    const kube = sharedKube();
    const admin = adminTarget();
    const account = await installOperatorIdentity(admin);
    const answer = await kubeExpect(
      admin,
      {
        method: "POST",
        path: `/api/v1/namespaces/${account.namespace}/serviceaccounts/${account.name}/token`,
        body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds: 3600 } },
      },
      [200, 201],
    );
    const token = (answer.json as { status: { token: string } }).status.token;
    const namespace = await createNamespace("fencing");
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kube.kubeconfigPath);
    const user = `system:serviceaccount:${account.namespace}:${account.name}`;
    return {
      kubeConfig,
      operatorKubeconfigPath: await tokenKubeconfig(stateDir, kube.url, kube.ca, token),
      namespace,
      leaseNamespace: account.namespace,
      writes: () => auditedWrites(user),
      close: async () => {
        // The replicas are gone: nobody would remove the finalizers, and the namespace would never go.
        for (const plural of ["gpuvmpools", "gpuvms", "gpudisks", "gpunetworks", "gpufirewallrules"]) {
          const base = `/apis/gpucloud.dev/v1alpha1/namespaces/${namespace}/${plural}`;
          const list = await kubeExpect(admin, { path: base }, [200]);
          for (const item of (list.json as { items: { metadata: { name: string } }[] }).items) {
            await kubeExpect(
              admin,
              {
                method: "PATCH",
                path: `${base}/${item.metadata.name}`,
                body: { metadata: { finalizers: null } },
                contentType: "application/merge-patch+json",
              },
              [200, 404],
            );
          }
        }
        await deleteNamespace(namespace);
      },
    };
  },
});
