// One row per endpoint: the request the client sends (method, path, query, body) and the parsed answer,
// against a stub that answers well-formed wire objects. test/cloud/simulator.test.ts runs the same
// methods against the real simulator.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type CloudClient, createCloudClient } from "../../src/cloud/client.ts";
import {
  diskFixture,
  firewallRuleFixture,
  networkFixture,
  operationFixture,
  PROJECT_ID,
  tokenFixture,
  VM_ID,
  vmFixture,
} from "./fixtures.ts";
import { type RecordedRequest, type StubServer, sendJson, startStub } from "./stub-server.ts";

const P = PROJECT_ID;
const ORG = { id: "org-1", name: "Acme", payment_customer_id: "cus_1" };
const OP = { operation: operationFixture() };
const IMAGE = {
  id: "img-1",
  name: "ubuntu22.04",
  description: "",
  tags: ["2026-11-01"],
  created_at: "",
  locations: ["l"],
};
const SPEC = {
  product_name: "a40.1x",
  description: "A40",
  cpu_cores: 6,
  cpu_type: "x",
  memory_gb: 60,
  memory_type: "ddr",
  disk_gb: 960,
  disk_type: "nvme",
  num_gpu: 1,
  gpu_type: "A40",
};
const USAGE = {
  billable_metric: "gpu-hours",
  date: "2026-11-20",
  project_id: P,
  quantity: 1.5,
  region: "us-east1",
  reservation_id: "",
  resource_type: "a40.1x",
};

interface Row {
  name: string;
  invoke: (c: CloudClient) => Promise<unknown>;
  method: string;
  path: string;
  query?: Record<string, string>;
  body?: unknown;
  answer: unknown;
  expected?: unknown;
}

const rows: Row[] = [
  {
    name: "auth.token",
    invoke: (c) => c.auth.token({ email: "a@b", password: "pw" }),
    method: "POST",
    path: "/auth/token",
    body: { grant_type: "password", email: "a@b", password: "pw" },
    answer: tokenFixture(1),
    expected: { access_token: "access-1", expires_in: 3600 },
  },
  {
    name: "auth.refresh",
    invoke: (c) => c.auth.refresh("refresh-1"),
    method: "POST",
    path: "/auth/token",
    body: { grant_type: "refresh_token", refresh_token: "refresh-1" },
    answer: tokenFixture(2),
    expected: { refresh_token: "refresh-2" },
  },
  {
    name: "auth.changePassword",
    invoke: (c) => c.auth.changePassword({ current_password: "old-password", new_password: "new-password-1" }),
    method: "POST",
    path: "/auth/change-password",
    body: { current_password: "old-password", new_password: "new-password-1" },
    answer: { message: "password changed" },
    expected: { message: "password changed" },
  },
  {
    name: "organizations.list (bare array)",
    invoke: (c) => c.organizations.list(),
    method: "GET",
    path: "/organizations",
    answer: [ORG],
    expected: [ORG],
  },
  {
    name: "organizations.list ({ items })",
    invoke: (c) => c.organizations.list(),
    method: "GET",
    path: "/organizations",
    answer: { items: [ORG] },
    expected: [ORG],
  },
  {
    name: "organizations.billingLink",
    invoke: (c) => c.organizations.billingLink("org-1"),
    method: "GET",
    path: "/organizations/org-1/billing",
    answer: { url: "https://billing.example/x" },
    expected: { url: "https://billing.example/x" },
  },
  {
    name: "projects.list",
    invoke: (c) => c.projects.list(),
    method: "GET",
    path: "/projects",
    answer: [{ id: P, name: "default", version: "v0.1", organization_id: "org-1" }],
    expected: [{ id: P, organization_id: "org-1" }],
  },
  {
    name: "projects.get",
    invoke: (c) => c.projects.get(P),
    method: "GET",
    path: `/projects/${P}`,
    answer: { id: P, name: "default", version: "v0.1", organization: { ...ORG, hasValidPaymentMethod: true } },
    expected: { organization: { hasValidPaymentMethod: true } },
  },
  {
    name: "catalogue.locations",
    invoke: (c) => c.catalogue.locations(P),
    method: "GET",
    path: `/projects/${P}/locations`,
    answer: { items: ["us-east1-a", "eu-north1-a"] },
    expected: ["us-east1-a", "eu-north1-a"],
  },
  {
    name: "catalogue.images",
    invoke: (c) => c.catalogue.images(P),
    method: "GET",
    path: `/projects/${P}/images`,
    answer: { items: [IMAGE] },
    expected: [IMAGE],
  },
  {
    name: "catalogue.specs",
    invoke: (c) => c.catalogue.specs(P),
    method: "GET",
    path: `/projects/${P}/specs`,
    answer: { items: [SPEC] },
    expected: [SPEC],
  },
  {
    name: "catalogue.availabilities",
    invoke: (c) => c.catalogue.availabilities(P, { product_name: "a40.1x", location: "l" }),
    method: "GET",
    path: `/projects/${P}/availabilities`,
    query: { product_name: "a40.1x", location: "l" },
    answer: { items: [{ type: "a40.1x", location: "l", available: true }] },
    expected: [{ available: true }],
  },
  {
    name: "vms.create",
    invoke: (c) =>
      c.vms.create(P, {
        name: "v",
        type: "a40.1x",
        location: "l",
        ssh_public_key: "ssh-ed25519 A",
        disks: [{ id: "d1" }],
      }),
    method: "POST",
    path: `/projects/${P}/vms`,
    body: {
      name: "v",
      type: "a40.1x",
      location: "l",
      ssh_public_key: "ssh-ed25519 A",
      disks: [{ id: "d1", mode: "read-write" }],
    },
    answer: OP,
    expected: { operation_id: "op-1" },
  },
  {
    name: "vms.list with every filter",
    invoke: (c) =>
      c.vms.list(P, {
        ids: ["i1", "i2"],
        names: ["a", "b"],
        types: ["a40.1x"],
        locations: ["l1", "l2"],
        states: ["STATE_RUNNING", "STATE_STOPPED"],
        limit: 500,
        sort: "-created_at",
        next_token: "t1",
      }),
    method: "GET",
    path: `/projects/${P}/vms`,
    query: {
      ids: "i1,i2",
      names: "a,b",
      types: "a40.1x",
      locations: "l1,l2",
      states: "STATE_RUNNING,STATE_STOPPED",
      limit: "500",
      sort: "-created_at",
      next_token: "t1",
    },
    answer: { items: [vmFixture()], next_page_token: "", prev_page_token: "t0" },
    expected: { items: [{ id: VM_ID }], prev_page_token: "t0" },
  },
  {
    name: "vms.get",
    invoke: (c) => c.vms.get(P, VM_ID),
    method: "GET",
    path: `/projects/${P}/vms/${VM_ID}`,
    answer: vmFixture(),
    expected: { id: VM_ID, state: "STATE_RUNNING" },
  },
  ...(["start", "stop", "reset"] as const).map(
    (action): Row => ({
      name: `vms.${action}`,
      invoke: (c) => c.vms[action](P, VM_ID),
      method: "PATCH",
      path: `/projects/${P}/vms/${VM_ID}`,
      body: { action: action.toUpperCase() },
      answer: OP,
      expected: { operation_id: "op-1" },
    }),
  ),
  {
    name: "vms.update",
    invoke: (c) => c.vms.update(P, VM_ID, { type: "a40.2x", disks: [{ id: "d1", mode: "read-only" }] }),
    method: "PATCH",
    path: `/projects/${P}/vms/${VM_ID}`,
    body: { action: "UPDATE", type: "a40.2x", disks: [{ id: "d1", mode: "read-only" }] },
    answer: OP,
    expected: { operation_id: "op-1" },
  },
  {
    name: "vms.terminate",
    invoke: (c) => c.vms.terminate(P, VM_ID),
    method: "DELETE",
    path: `/projects/${P}/vms/${VM_ID}`,
    answer: OP,
    expected: { operation_id: "op-1" },
  },
  ...(
    [
      ["vm", "vms"],
      ["disk", "disks"],
      ["network", "vpc/networks"],
      ["firewall-rule", "vpc/firewall-rules"],
    ] as const
  ).flatMap(([family, base]): Row[] => [
    {
      name: `operations.list ${family}`,
      invoke: (c) =>
        c.operations.list(P, family, {
          resource_id: "r1",
          state: "IN_PROGRESS",
          lower_time_bound: "2026-11-21T00:00:00Z",
        }),
      method: "GET",
      path: `/projects/${P}/${base}/operations`,
      query: { resource_id: "r1", state: "IN_PROGRESS", lower_time_bound: "2026-11-21T00:00:00Z" },
      answer: { items: [operationFixture()] },
      expected: [{ operation_id: "op-1" }],
    },
    {
      name: `operations.get ${family}`,
      invoke: (c) => c.operations.get(P, family, "op-1"),
      method: "GET",
      path: `/projects/${P}/${base}/operations/op-1`,
      answer: operationFixture({ state: "SUCCEEDED" }),
      expected: { state: "SUCCEEDED" },
    },
  ]),
  {
    name: "disks.create",
    invoke: (c) =>
      c.disks.create(P, { name: "d", size: "2TiB", location: "l", block_size: 4096, type: "persistent-ssd" }),
    method: "POST",
    path: `/projects/${P}/disks`,
    body: { name: "d", size: "2TiB", location: "l", block_size: 4096, type: "persistent-ssd" },
    answer: OP,
    expected: { operation_id: "op-1" },
  },
  {
    name: "disks.list",
    invoke: (c) => c.disks.list(P),
    method: "GET",
    path: `/projects/${P}/disks`,
    answer: { items: [diskFixture()] },
    expected: [{ size: "1024GiB" }],
  },
  {
    name: "disks.get",
    invoke: (c) => c.disks.get(P, "disk-1"),
    method: "GET",
    path: `/projects/${P}/disks/disk-1`,
    answer: diskFixture(),
    expected: { block_size: 4096 },
  },
  {
    name: "disks.resize",
    invoke: (c) => c.disks.resize(P, "disk-1", "3TiB"),
    method: "PATCH",
    path: `/projects/${P}/disks/disk-1`,
    body: { size: "3TiB" },
    answer: OP,
    expected: { operation_id: "op-1" },
  },
  {
    name: "disks.delete",
    invoke: (c) => c.disks.delete(P, "disk-1"),
    method: "DELETE",
    path: `/projects/${P}/disks/disk-1`,
    answer: OP,
    expected: { operation_id: "op-1" },
  },
  {
    name: "networks.create",
    invoke: (c) => c.networks.create(P, { name: "n", cidr: "10.1.0.0/16" }),
    method: "POST",
    path: `/projects/${P}/vpc/networks`,
    body: { name: "n", cidr: "10.1.0.0/16" },
    answer: OP,
    expected: { operation_id: "op-1" },
  },
  {
    name: "networks.list",
    invoke: (c) => c.networks.list(P),
    method: "GET",
    path: `/projects/${P}/vpc/networks`,
    answer: { items: [networkFixture()] },
    expected: [{ cidr: "10.0.0.0/16" }],
  },
  {
    name: "networks.get",
    invoke: (c) => c.networks.get(P, "net-1"),
    method: "GET",
    path: `/projects/${P}/vpc/networks/net-1`,
    answer: networkFixture(),
    expected: { id: "net-1" },
  },
  {
    name: "networks.delete",
    invoke: (c) => c.networks.delete(P, "net-1"),
    method: "DELETE",
    path: `/projects/${P}/vpc/networks/net-1`,
    answer: OP,
    expected: { operation_id: "op-1" },
  },
  {
    name: "firewallRules.create",
    invoke: (c) =>
      c.firewallRules.create(P, {
        name: "ssh",
        vpc_network_id: "net-1",
        direction: "ingress",
        action: "allow",
        protocols: ["tcp"],
        sources: [{ cidr: "0.0.0.0/0" }],
        destination_ports: ["22"],
      }),
    method: "POST",
    path: `/projects/${P}/vpc/firewall-rules`,
    body: {
      name: "ssh",
      vpc_network_id: "net-1",
      direction: "ingress",
      action: "allow",
      protocols: ["tcp"],
      sources: [{ cidr: "0.0.0.0/0", resource_id: "" }],
      destinations: [],
      source_ports: [],
      destination_ports: ["22"],
    },
    answer: OP,
    expected: { operation_id: "op-1" },
  },
  {
    name: "firewallRules.list (numeric ports become strings)",
    invoke: (c) => c.firewallRules.list(P),
    method: "GET",
    path: `/projects/${P}/vpc/firewall-rules`,
    answer: { items: [firewallRuleFixture()] },
    expected: [{ destination_ports: ["22"] }],
  },
  {
    name: "firewallRules.get",
    invoke: (c) => c.firewallRules.get(P, "fw-1"),
    method: "GET",
    path: `/projects/${P}/vpc/firewall-rules/fw-1`,
    answer: firewallRuleFixture(),
    expected: { id: "fw-1" },
  },
  {
    name: "firewallRules.patch",
    invoke: (c) => c.firewallRules.patch(P, "fw-1", { protocols: ["tcp", "udp"], destination_ports: ["8000-9000"] }),
    method: "PATCH",
    path: `/projects/${P}/vpc/firewall-rules/fw-1`,
    body: { protocols: ["tcp", "udp"], destination_ports: ["8000-9000"] },
    answer: OP,
    expected: { operation_id: "op-1" },
  },
  {
    name: "firewallRules.delete",
    invoke: (c) => c.firewallRules.delete(P, "fw-1"),
    method: "DELETE",
    path: `/projects/${P}/vpc/firewall-rules/fw-1`,
    answer: OP,
    expected: { operation_id: "op-1" },
  },
  {
    name: "usage.list",
    invoke: (c) =>
      c.usage.list(P, {
        resource_types: ["a40.1x", "a100.1x"],
        regions: ["us"],
        start_date: "2026-11-01",
        end_date: "2026-11-20",
      }),
    method: "GET",
    path: `/projects/${P}/usage`,
    query: { resource_types: "a40.1x,a100.1x", regions: "us", start_date: "2026-11-01", end_date: "2026-11-20" },
    answer: { items: [USAGE] },
    expected: [{ quantity: 1.5 }],
  },
];

let stub: StubServer;
let client: CloudClient;
let answer: unknown;
beforeAll(async () => {
  stub = await startStub((_, res) => sendJson(res, 200, answer));
  client = createCloudClient({ baseUrl: stub.url, credentials: { apiKey: "k" }, rateLimiter: false });
});
afterAll(async () => {
  await stub.close();
});
beforeEach(() => {
  stub.requests.length = 0;
});

function queryOf(request: RecordedRequest): Record<string, string> {
  return Object.fromEntries(request.query.entries());
}

describe("every endpoint", () => {
  it.each(rows.map((row) => [row.name, row] as const))("%s", async (_, row) => {
    answer = row.answer;
    const result = await row.invoke(client);
    expect(stub.requests).toHaveLength(1);
    const [request] = stub.requests;
    expect(request?.method).toBe(row.method);
    expect(request?.path).toBe(row.path);
    expect(request ? queryOf(request) : undefined).toEqual(row.query ?? {});
    expect(request?.body).toEqual(row.body);
    if (row.path !== "/auth/token") expect(request?.headers.authorization).toBe("Bearer k");
    if (row.body !== undefined) expect(request?.headers["content-type"]).toContain("application/json");
    expect(result).toMatchObject(row.expected as object);
  });

  it("covers every method of every group", () => {
    const covered = new Set(rows.map((row) => row.name.split(" ")[0]));
    const groups = client as unknown as Record<string, Record<string, unknown>>;
    const missing: string[] = [];
    for (const [group, methods] of Object.entries(groups)) {
      if (group === "bulkhead") continue; // the account's limits, not endpoints
      for (const method of Object.keys(methods)) {
        const name = `${group}.${method}`;
        if (!covered.has(name) && !["vms.listAll", "vms.action"].includes(name)) missing.push(name);
      }
    }
    expect(missing).toEqual([]);
  });
});

describe("catalogue.availabilities", () => {
  it("reads the count of free VMs where a server gives one (an extension), and ignores a malformed one", async () => {
    answer = {
      items: [
        { type: "a40.1x", location: "a", available: true, available_count: 3 },
        { type: "a40.1x", location: "b", available: true, available_count: "many" },
        { type: "a40.1x", location: "c", available: false, available_count: -1 },
        { type: "a40.1x", location: "d", available: true },
      ],
    };
    const items = await client.catalogue.availabilities(P);
    expect(items.map((item) => [item.location, item.available, item.available_count])).toEqual([
      ["a", true, 3],
      ["b", true, undefined],
      ["c", false, undefined],
      ["d", true, undefined],
    ]);
  });
});

describe("vms.listAll", () => {
  it("follows next_page_token to the end, keeping the filters", async () => {
    const pages: Record<string, unknown> = {
      "": { items: [vmFixture({ id: "v1" }), vmFixture({ id: "v2" })], next_page_token: "p2", prev_page_token: "" },
      p2: { items: [vmFixture({ id: "v3" })], next_page_token: "p3", prev_page_token: "" },
      p3: { items: [], next_page_token: "", prev_page_token: "p2" },
    };
    stub.handle((req, res) => sendJson(res, 200, pages[req.query.get("next_token") ?? ""]));
    const ids: string[] = [];
    for await (const vm of client.vms.listAll(P, { states: ["STATE_RUNNING"], limit: 2 })) ids.push(vm.id);
    expect(ids).toEqual(["v1", "v2", "v3"]);
    expect(stub.requests.map((r) => r.query.get("next_token"))).toEqual([null, "p2", "p3"]);
    expect(stub.requests.every((r) => r.query.get("states") === "STATE_RUNNING" && r.query.get("limit") === "2")).toBe(
      true,
    );
  });

  it("stops with a clear error when the server repeats a page token", async () => {
    stub.handle((_, res) => sendJson(res, 200, { items: [vmFixture()], next_page_token: "same", prev_page_token: "" }));
    const collect = async () => {
      for await (const _vm of client.vms.listAll(P)) {
        // drain
      }
    };
    await expect(collect()).rejects.toThrow(/already followed/);
    expect(stub.requests.length).toBe(2);
  });
});
