// The node-join emulation against a fake workload API server (TLS, the fixture's certificate for 127.0.0.1):
// cluster-info signed as the bootstrap signer signs it, a SelfSubjectReview for the token, /version and Nodes
// kept in memory. A VM created with a cloud-config's kubeadm join boots, its join is checked, and its Node is
// registered with providerID gpucloud://<vm id>; a stop makes it NotReady, a start Ready, a delete removes it; a
// join kubeadm would refuse leaves no Node and its reason in the admin API. The same against the real Cluster API
// and kube-apiserver: test/kubernetes/cluster-api-provider.test.ts.
import { createHmac } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Vm } from "../../src/cloud/wire.ts";
import { caCertHash } from "../../src/control-plane/kubeadm-join.ts";
import type { NodeJoinRecord } from "../../src/simulator/index.ts";
import { eventually } from "../../src/util/eventually.ts";
import { type Api, ok, opOf, startTestSimulator, vmBody } from "./helpers.ts";

const FIXTURES = path.resolve(import.meta.dirname, "../fixtures/kubeadm-join");
const TOKEN = { id: "abcdef", secret: "0123456789abcdef" };
const ADMIN_TOKEN = "workload-admin-token";

interface FakeNode {
  metadata: { name: string; labels: Record<string, string> };
  spec: { providerID?: string };
  status?: {
    capacity?: Record<string, string>;
    addresses?: { type: string; address: string }[];
    conditions?: { type: string; status: string }[];
    nodeInfo?: { kubeletVersion?: string };
  };
}

/** A workload cluster's API server, as much of it as a joining node and the emulation use. */
class FakeWorkload {
  readonly nodes = new Map<string, FakeNode>();
  /** Whether cluster-info carries the token's signature (the bootstrap signer signs a new token moments later). */
  signed = true;
  server: Server | undefined;
  endpoint = "";
  caPem = "";
  #clusterInfo: Record<string, string> = {};

  async start(): Promise<void> {
    this.caPem = await readFile(path.join(FIXTURES, "server.crt"), "utf8");
    const key = await readFile(path.join(FIXTURES, "server.key"), "utf8");
    const server = createServer({ cert: this.caPem, key }, (request, response) => {
      let body = "";
      request.on("data", (chunk: Buffer) => {
        body += chunk.toString("utf8");
      });
      request.on("end", () => {
        const [status, answer] = this.#answer(request.method ?? "GET", request.url ?? "", request.headers, body);
        response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(answer));
      });
    });
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    this.endpoint = `127.0.0.1:${(server.address() as AddressInfo).port}`;
    const kubeconfig = `apiVersion: v1\nkind: Config\nclusters:\n- name: ""\n  cluster:\n    server: https://${this.endpoint}\n    certificate-authority-data: ${Buffer.from(this.caPem).toString("base64")}\n`;
    const header = Buffer.from(JSON.stringify({ alg: "HS256", kid: TOKEN.id })).toString("base64url");
    const signature = createHmac("sha256", TOKEN.secret)
      .update(`${header}.${Buffer.from(kubeconfig).toString("base64url")}`)
      .digest("base64url");
    this.#clusterInfo = { kubeconfig, [`jws-kubeconfig-${TOKEN.id}`]: `${header}..${signature}` };
  }

  /** An admin kubeconfig for the emulation (a bearer token). */
  kubeconfig(): string {
    return [
      "apiVersion: v1",
      "kind: Config",
      "current-context: admin",
      "clusters:",
      "- name: fake",
      "  cluster:",
      `    server: https://${this.endpoint}`,
      `    certificate-authority-data: ${Buffer.from(this.caPem).toString("base64")}`,
      "users:",
      "- name: admin",
      "  user:",
      `    token: ${ADMIN_TOKEN}`,
      "contexts:",
      "- name: admin",
      "  context: {cluster: fake, user: admin}",
      "",
    ].join("\n");
  }

  #answer(method: string, url: string, headers: Record<string, unknown>, body: string): [number, unknown] {
    const auth = headers.authorization;
    if (url.startsWith("/api/v1/namespaces/kube-public/configmaps/cluster-info")) {
      const data = { ...this.#clusterInfo };
      if (!this.signed) delete data[`jws-kubeconfig-${TOKEN.id}`];
      return [200, { data }];
    }
    if (url === "/apis/authentication.k8s.io/v1/selfsubjectreviews") {
      if (auth !== `Bearer ${TOKEN.id}.${TOKEN.secret}`) return [401, { kind: "Status", code: 401 }];
      const userInfo = { username: `system:bootstrap:${TOKEN.id}`, groups: ["system:bootstrappers"] };
      return [201, { status: { userInfo } }];
    }
    if (auth !== `Bearer ${ADMIN_TOKEN}`) return [401, { kind: "Status", code: 401 }];
    if (url === "/version") return [200, { gitVersion: "v1.37.2" }];
    const match = /^\/api\/v1\/nodes(?:\/([^/]+))?(\/status)?$/.exec(url);
    if (match === null) return [404, {}];
    const name = match[1] === undefined ? undefined : decodeURIComponent(match[1]);
    if (method === "POST" && name === undefined) {
      const node = JSON.parse(body) as FakeNode;
      if (this.nodes.has(node.metadata.name)) return [409, { kind: "Status", code: 409 }];
      this.nodes.set(node.metadata.name, node);
      return [201, node];
    }
    const node = name === undefined ? undefined : this.nodes.get(name);
    if (node === undefined || name === undefined) return [404, { kind: "Status", code: 404 }];
    if (method === "GET") return [200, node];
    if (method === "DELETE") {
      this.nodes.delete(name);
      return [200, node];
    }
    if (method === "PATCH" && match[2] === "/status") {
      const patch = JSON.parse(body) as { status: NonNullable<FakeNode["status"]> };
      node.status = { ...node.status, ...patch.status };
      return [200, node];
    }
    return [405, {}];
  }

  readyOf(name: string): string | undefined {
    return this.nodes.get(name)?.status?.conditions?.find((condition) => condition.type === "Ready")?.status;
  }

  async close(): Promise<void> {
    await new Promise((resolve) => this.server?.close(resolve) ?? resolve(undefined));
  }
}

/** A cloud-config as Cluster API's kubeadm bootstrap writes it for a worker (the join as a config file). */
function joinCloudConfig(endpoint: string, caHash: string, nodeName = "{{ ds.meta_data.local_hostname }}"): string {
  const join = [
    "apiVersion: kubeadm.k8s.io/v1beta4",
    "kind: JoinConfiguration",
    "discovery:",
    "  bootstrapToken:",
    `    apiServerEndpoint: ${endpoint}`,
    `    token: ${TOKEN.id}.${TOKEN.secret}`,
    "    caCertHashes:",
    `    - ${caHash}`,
    "nodeRegistration:",
    `  name: '${nodeName}'`,
  ].join("\n");
  return [
    "## template: jinja",
    "#cloud-config",
    "write_files:",
    "- path: /run/kubeadm/kubeadm-join-config.yaml",
    "  owner: root:root",
    "  permissions: '0640'",
    `  content: ${JSON.stringify(join)}`,
    "runcmd:",
    "  - kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml && echo success > /run/cluster-api/bootstrap-success.complete",
    "",
  ].join("\n");
}

let workload: FakeWorkload | undefined;
let api: Api | undefined;

afterEach(async () => {
  await api?.sim.close();
  await workload?.close();
  api = undefined;
  workload = undefined;
});

async function start(options: { discoveryTimeoutMs?: number; clusters?: boolean } = {}) {
  workload = new FakeWorkload();
  await workload.start();
  const clusters = options.clusters === false ? [] : [{ name: "fake", kubeconfig: workload.kubeconfig() }];
  api = await startTestSimulator({
    nodeJoin: { clusters, discoveryTimeoutMs: options.discoveryTimeoutMs ?? 10_000, retryIntervalMs: 50 },
  });
  return { workload, api };
}

async function createVm(client: Api, name: string, startupScript: string, type = "a100-80gb.8x"): Promise<string> {
  const op = opOf(
    await client.call("POST", client.project("/vms"), vmBody(name, { type, startup_script: startupScript })),
  );
  expect((await client.settle("vm", op.operation_id)).state).toBe("SUCCEEDED");
  return op.metadata.id;
}

async function action(client: Api, vmId: string, name: "STOP" | "START"): Promise<void> {
  const op = opOf(await client.call("PATCH", client.project(`/vms/${vmId}`), { action: name }));
  expect((await client.settle("vm", op.operation_id)).state).toBe("SUCCEEDED");
}

async function joinOf(client: Api, vmId: string): Promise<NodeJoinRecord | undefined> {
  const answer = await client.admin("GET", `/node-joins/vms/${vmId}`);
  return answer.status === 200 ? (answer.body as NodeJoinRecord) : undefined;
}

async function settledJoin(client: Api, vmId: string): Promise<NodeJoinRecord> {
  return eventually(
    `the join of ${vmId} settled`,
    async () => {
      const join = await joinOf(client, vmId);
      return join !== undefined && join.state !== "joining" ? join : undefined;
    },
    15_000,
    20,
  );
}

describe("node-join emulation", () => {
  it("registers a Ready Node with the VM's providerID, addresses, GPUs and labels once its join passes", async () => {
    const { workload, api } = await start();
    const vmId = await createVm(
      api,
      "default-workers-x7k2p",
      joinCloudConfig(workload.endpoint, caCertHash(workload.caPem)),
    );
    const join = await settledJoin(api, vmId);
    expect(join).toMatchObject({
      state: "joined",
      cluster: "fake",
      endpoint: workload.endpoint,
      node: "default-workers-x7k2p",
      providerID: `gpucloud://${vmId}`,
      nodeReady: true,
    });
    const vm = ok(await api.call("GET", api.project(`/vms/${vmId}`)), Vm);
    const ips = vm.network_interfaces[0]?.ips[0];
    const node = workload.nodes.get("default-workers-x7k2p");
    expect(node?.spec.providerID).toBe(`gpucloud://${vmId}`);
    expect(node?.status?.capacity).toMatchObject({ "nvidia.com/gpu": "8", pods: "110" });
    expect(node?.status?.addresses).toEqual([
      { type: "InternalIP", address: ips?.private_ipv4.address },
      { type: "ExternalIP", address: ips?.public_ipv4.address },
      { type: "Hostname", address: "default-workers-x7k2p" },
    ]);
    expect(node?.metadata.labels).toMatchObject({
      "node.kubernetes.io/instance-type": "a100-80gb.8x",
      "topology.kubernetes.io/zone": "us-east1-a",
      "topology.kubernetes.io/region": "us-east1",
    });
    expect(node?.status?.nodeInfo?.kubeletVersion).toBe("v1.37.2");
    expect(workload.readyOf("default-workers-x7k2p")).toBe("True");
  });

  it("makes the Node NotReady when the VM stops, Ready when it starts, and deletes it when the VM goes", async () => {
    const { workload, api } = await start();
    const vmId = await createVm(
      api,
      "gpu-1",
      joinCloudConfig(workload.endpoint, caCertHash(workload.caPem), "gpu-node-1"),
    );
    expect(await settledJoin(api, vmId)).toMatchObject({ state: "joined", node: "gpu-node-1" });
    await action(api, vmId, "STOP");
    await eventually("the Node NotReady", async () =>
      workload.readyOf("gpu-node-1") === "Unknown" ? true : undefined,
    );
    expect(await joinOf(api, vmId)).toMatchObject({ state: "joined", nodeReady: false });
    await action(api, vmId, "START");
    await eventually("the Node Ready again", async () =>
      workload.readyOf("gpu-node-1") === "True" ? true : undefined,
    );
    // Cloud-init ran the join once: a reboot is the same kubelet, not a second registration.
    expect(await joinOf(api, vmId)).toMatchObject({ state: "joined", nodeReady: true, attempts: 1 });
    const op = opOf(await api.call("DELETE", api.project(`/vms/${vmId}`)));
    await api.settle("vm", op.operation_id);
    await eventually("the Node deleted", async () => (workload.nodes.has("gpu-node-1") ? undefined : true));
    expect(await joinOf(api, vmId)).toBeUndefined();
  });

  it("refuses a join whose CA hash is not the cluster's: no Node, the reason in the admin API", async () => {
    const { workload, api } = await start();
    const vmId = await createVm(api, "wrong-ca", joinCloudConfig(workload.endpoint, `sha256:${"ab".repeat(32)}`));
    const join = await settledJoin(api, vmId);
    expect(join).toMatchObject({ state: "refused", reason: "CAHashMismatch", attempts: 1 });
    expect(join.message).toContain("matches none of the pinned hashes");
    expect(workload.nodes.size).toBe(0);
  });

  it("waits for the token's signature as kubeadm's discovery does, and gives up after the discovery timeout", async () => {
    const { workload, api } = await start({ discoveryTimeoutMs: 600 });
    workload.signed = false;
    const late = await createVm(api, "late-token", joinCloudConfig(workload.endpoint, caCertHash(workload.caPem)));
    await eventually(
      "a second discovery attempt",
      async () => ((await joinOf(api, late))?.attempts ?? 0) >= 2 || undefined,
    );
    expect(await joinOf(api, late)).toMatchObject({ state: "joining", reason: "TokenInvalidOrExpired" });
    workload.signed = true;
    expect(await settledJoin(api, late)).toMatchObject({ state: "joined", node: "late-token" });

    workload.signed = false;
    const expired = await createVm(
      api,
      "expired-token",
      joinCloudConfig(workload.endpoint, caCertHash(workload.caPem)),
    );
    const refused = await settledJoin(api, expired);
    expect(refused).toMatchObject({ state: "refused", reason: "TokenInvalidOrExpired" });
    expect(refused.attempts).toBeGreaterThan(1);
    expect(workload.nodes.has("expired-token")).toBe(false);
  });

  it("registers no Node in a cluster removed while the join waited for its token", async () => {
    const { workload, api } = await start();
    workload.signed = false;
    const vmId = await createVm(api, "orphan", joinCloudConfig(workload.endpoint, caCertHash(workload.caPem)));
    await eventually("the join retrying", async () => ((await joinOf(api, vmId))?.attempts ?? 0) >= 2 || undefined);
    expect((await api.admin("DELETE", "/node-joins/clusters/fake")).status).toBe(200);
    workload.signed = true;
    expect(await settledJoin(api, vmId)).toMatchObject({ state: "refused", reason: "UnknownEndpoint" });
    expect(workload.nodes.size).toBe(0);
  });

  it("refuses a Node name another VM's Node holds, and an endpoint no cluster has", async () => {
    const { workload, api } = await start();
    const hash = caCertHash(workload.caPem);
    const first = await createVm(api, "first", joinCloudConfig(workload.endpoint, hash, "shared-name"));
    expect(await settledJoin(api, first)).toMatchObject({ state: "joined" });
    const second = await createVm(api, "second", joinCloudConfig(workload.endpoint, hash, "shared-name"));
    expect(await settledJoin(api, second)).toMatchObject({ state: "refused", reason: "NodeNameTaken" });
    expect(workload.nodes.get("shared-name")?.spec.providerID).toBe(`gpucloud://${first}`);
    const elsewhere = await createVm(api, "elsewhere", joinCloudConfig("127.0.0.1:1", hash));
    expect(await settledJoin(api, elsewhere)).toMatchObject({ state: "refused", reason: "UnknownEndpoint" });
  });

  it("leaves VMs alone without a kubeadm join or without clusters; the admin API adds a cluster and never shows its credentials", async () => {
    const { workload, api } = await start({ clusters: false });
    const plain = await createVm(api, "plain", "#!/bin/bash\necho hello\n");
    const before = await createVm(api, "no-cluster", joinCloudConfig(workload.endpoint, caCertHash(workload.caPem)));
    expect(await joinOf(api, plain)).toBeUndefined();
    expect(await joinOf(api, before)).toBeUndefined();
    const refused = await api.admin("PUT", "/node-joins/clusters/fake", {
      kubeconfig: "apiVersion: v1\nclusters: 3\n",
    });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toContain("cluster fake: the kubeconfig");
    const added = await api.admin("PUT", "/node-joins/clusters/fake", { kubeconfig: workload.kubeconfig() });
    expect(added).toMatchObject({ status: 200, body: { name: "fake", endpoint: workload.endpoint } });
    const listed = await api.admin("GET", "/node-joins");
    expect(listed.body).toEqual({ clusters: [{ name: "fake", endpoint: workload.endpoint }], joins: [] });
    expect(JSON.stringify(listed.body)).not.toContain(ADMIN_TOKEN);
    const after = await createVm(api, "with-cluster", joinCloudConfig(workload.endpoint, caCertHash(workload.caPem)));
    expect(await settledJoin(api, after)).toMatchObject({ state: "joined" });
    expect((await api.admin("DELETE", "/node-joins/clusters/fake")).status).toBe(200);
    expect((await api.admin("DELETE", "/node-joins/clusters/fake")).status).toBe(404);
  });
});
