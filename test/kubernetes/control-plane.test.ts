// The control plane the other suites rely on: real authentication and RBAC (a ServiceAccount token gets what
// its RoleBinding grants and no more), kube-controller-manager's garbage collector and namespace controller.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kubeExpect, kubeRequest } from "../../src/control-plane/http.ts";
import { adminTarget, createNamespace, deleteNamespace, sharedKube } from "./shared.ts";

let namespace: string;

beforeAll(async () => {
  namespace = await createNamespace("control-plane");
});

afterAll(async () => {
  if (namespace !== undefined) await deleteNamespace(namespace);
});

async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe("the real control plane", () => {
  it("is the release go.mod names, behind TLS, and refuses anonymous requests to resources", async () => {
    const kube = sharedKube();
    const version = await kubeExpect(adminTarget(), { path: "/version" }, [200]);
    expect(version.json).toMatchObject({ gitVersion: kube.versions.kubernetes });
    const anonymous = await kubeRequest(
      { url: kube.url, ca: kube.ca },
      { path: `/api/v1/namespaces/${namespace}/secrets` },
    );
    expect(anonymous.status).toBe(403);
    expect(anonymous.text).toContain("system:anonymous");
  });

  it("gives a ServiceAccount token exactly what RBAC grants it", async () => {
    const admin = adminTarget();
    const base = `/api/v1/namespaces/${namespace}`;
    await kubeExpect(
      admin,
      { method: "POST", path: `${base}/serviceaccounts`, body: { metadata: { name: "reader" } } },
      [201],
    );
    await kubeExpect(
      admin,
      {
        method: "POST",
        path: `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/roles`,
        body: {
          metadata: { name: "read-cm" },
          rules: [{ apiGroups: [""], resources: ["configmaps"], verbs: ["list"] }],
        },
      },
      [201],
    );
    await kubeExpect(
      admin,
      {
        method: "POST",
        path: `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/rolebindings`,
        body: {
          metadata: { name: "reader" },
          roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "read-cm" },
          subjects: [{ kind: "ServiceAccount", name: "reader", namespace }],
        },
      },
      [201],
    );
    const token = await kubeExpect(
      admin,
      { method: "POST", path: `${base}/serviceaccounts/reader/token`, body: { spec: { expirationSeconds: 600 } } },
      [201],
    );
    const reader = {
      url: admin.url,
      ca: admin.ca,
      token: String((token.json as { status: { token: string } }).status.token),
    };
    expect((await kubeRequest(reader, { path: `${base}/configmaps` })).status).toBe(200);
    expect((await kubeRequest(reader, { path: `${base}/secrets` })).status).toBe(403);
    const write = await kubeRequest(reader, {
      method: "POST",
      path: `${base}/configmaps`,
      body: { metadata: { name: "x" } },
    });
    expect(write.status).toBe(403);
  });

  it("garbage-collects the dependents of a deleted owner", async () => {
    const admin = adminTarget();
    const disks = `/apis/gpucloud.dev/v1alpha1/namespaces/${namespace}/gpudisks`;
    const owner = await kubeExpect(
      admin,
      {
        method: "POST",
        path: disks,
        body: {
          apiVersion: "gpucloud.dev/v1alpha1",
          kind: "GpuDisk",
          metadata: { name: "owner" },
          spec: { size: "1TiB", location: "us-east1-a" },
        },
      },
      [201],
    );
    const uid = String((owner.json as { metadata: { uid: string } }).metadata.uid);
    const ownerReferences = [
      { apiVersion: "gpucloud.dev/v1alpha1", kind: "GpuDisk", name: "owner", uid, controller: true },
    ];
    const configMaps = `/api/v1/namespaces/${namespace}/configmaps`;
    await kubeExpect(
      admin,
      { method: "POST", path: configMaps, body: { metadata: { name: "dependent", ownerReferences } } },
      [201],
    );
    await kubeExpect(admin, { method: "DELETE", path: `${disks}/owner` }, [200]);
    await eventually("the dependent ConfigMap to be deleted", async () => {
      return (await kubeRequest(admin, { path: `${configMaps}/dependent` })).status === 404;
    });
  });

  it("empties and deletes a namespace", async () => {
    const admin = adminTarget();
    const doomed = await createNamespace("doomed");
    const configMaps = `/api/v1/namespaces/${doomed}/configmaps`;
    await kubeExpect(admin, { method: "POST", path: configMaps, body: { metadata: { name: "content" } } }, [201]);
    await deleteNamespace(doomed);
    await eventually("the namespace to be gone", async () => {
      return (await kubeRequest(admin, { path: `/api/v1/namespaces/${doomed}` })).status === 404;
    });
  });
});
