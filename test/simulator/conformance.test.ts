// Conformance of the simulator to the spec and contract-decisions.md, endpoint by endpoint, over plain HTTP.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  AvailabilityItem,
  Disk,
  FirewallRule,
  Image,
  itemsOf,
  MessageResponse,
  Operation,
  Organization,
  Project,
  ProjectListItem,
  SpecItem,
  StringItems,
  TokenResponse,
  VM_TYPE_INFO,
  VM_TYPES,
  Vm,
  VpcNetwork,
} from "../../src/cloud/wire.ts";
import type { Api } from "./helpers.ts";
import { errorOf, ok, opOf, startTestSimulator, TIMESTAMP, vmBody } from "./helpers.ts";

const VM_KEYS = [
  "commitment_end",
  "commitment_period",
  "created_at",
  "disks",
  "host_channel_adapters",
  "id",
  "instance_group_id",
  "instance_template_id",
  "location",
  "name",
  "network_interfaces",
  "project_id",
  "reservation_id",
  "ssh_destination",
  "state",
  "type",
  "updated_at",
  "virtualization_features",
];

let api: Api;
beforeAll(async () => {
  api = await startTestSimulator();
});
afterAll(async () => {
  await api.sim.close();
});

async function createVm(name: string, extra: Record<string, unknown> = {}): Promise<z.output<typeof Vm>> {
  const op = await api.settle(
    "vm",
    opOf(await api.call("POST", api.project("/vms"), vmBody(name, extra))).operation_id,
  );
  expect(op.state).toBe("SUCCEEDED");
  return ok(await api.call("GET", api.project(`/vms/${op.metadata.id}`)), Vm);
}

async function createDisk(name: string, extra: Record<string, unknown> = {}): Promise<z.output<typeof Disk>> {
  const body = { name, size: "100GiB", location: "us-east1-a", ...extra };
  const op = await api.settle("disk", opOf(await api.call("POST", api.project("/disks"), body)).operation_id);
  expect(op.state).toBe("SUCCEEDED");
  return ok(await api.call("GET", api.project(`/disks/${op.metadata.id}`)), Disk);
}

describe("authentication and tenancy", () => {
  it("answers 401 without, or with an unknown, bearer token", async () => {
    errorOf(await api.call("GET", "/projects", undefined, null), 401, "unauthorized");
    errorOf(await api.call("GET", "/projects", undefined, "not-a-token"), 401, "unauthorized");
  });

  it("signs in with a password and rotates single-use refresh tokens", async () => {
    const { email, password } = api.sim.user;
    const wrong = await api.call("POST", "/auth/token", { grant_type: "password", email, password: "nope" }, null);
    errorOf(wrong, 401, "unauthorized");
    const first = ok(
      await api.call("POST", "/auth/token", { grant_type: "password", email, password }, null),
      TokenResponse,
    );
    expect(first.token_type).toBe("bearer");
    expect(first.expires_in).toBe(3600);
    const projects = ok(await api.call("GET", "/projects", undefined, first.access_token), z.array(ProjectListItem));
    expect(projects.map((p) => p.id)).toEqual([api.sim.projectId]);

    const refresh = { grant_type: "refresh_token", refresh_token: first.refresh_token };
    const second = ok(await api.call("POST", "/auth/token", refresh, null), TokenResponse);
    expect(second.refresh_token).not.toBe(first.refresh_token);
    errorOf(await api.call("POST", "/auth/token", refresh, null), 401, "unauthorized");
    ok(await api.call("GET", "/projects", undefined, second.access_token), z.array(ProjectListItem));
  });

  it("changes a user's password, never with an API key", async () => {
    const body = { current_password: api.sim.user.password, new_password: "a-new-password" };
    errorOf(await api.call("POST", "/auth/change-password", body), 403, "forbidden");
    const { email, password } = api.sim.user;
    const token = ok(
      await api.call("POST", "/auth/token", { grant_type: "password", email, password }, null),
      TokenResponse,
    );
    const mismatch = { current_password: "wrong", new_password: "a-new-password" };
    expect(
      errorOf(await api.call("POST", "/auth/change-password", mismatch, token.access_token), 400, "bad_request"),
    ).toMatch(/current_password/);
    errorOf(
      await api.call(
        "POST",
        "/auth/change-password",
        { current_password: password, new_password: "short" },
        token.access_token,
      ),
      400,
      "bad_request",
    );
    const changed = await api.call("POST", "/auth/change-password", body, token.access_token);
    expect(ok(changed, MessageResponse).message).not.toBe("");
    errorOf(
      await api.call("POST", "/auth/token", { grant_type: "password", email, password }, null),
      401,
      "unauthorized",
    );
    const back = { current_password: "a-new-password", new_password: password };
    ok(await api.call("POST", "/auth/change-password", back, token.access_token), MessageResponse);
  });

  it("shows a credential only its own projects and organizations (403 elsewhere)", async () => {
    const tenant = ok(
      await api.admin("POST", "/projects", { name: "other-team" }),
      z.object({ project_id: z.string(), api_key: z.string(), organization_id: z.string() }),
    );
    const theirs = ok(await api.call("GET", "/projects", undefined, tenant.api_key), z.array(ProjectListItem));
    expect(theirs.map((p) => p.id)).toEqual([tenant.project_id]);
    errorOf(await api.call("GET", api.project(), undefined, tenant.api_key), 403, "forbidden");
    errorOf(await api.call("GET", `/projects/${tenant.project_id}/vms`), 403, "forbidden");
    errorOf(await api.call("GET", `/organizations/${tenant.organization_id}/billing`), 403, "forbidden");
    const orgs = ok(await api.call("GET", "/organizations"), z.array(Organization));
    expect(orgs.map((o) => o.id)).toEqual([api.sim.organizationId]);
    expect(Object.keys(orgs[0] ?? {}).sort()).toEqual(["id", "name", "payment_customer_id"]);
    const billing = ok(
      await api.call("GET", `/organizations/${api.sim.organizationId}/billing`),
      z.object({ url: z.url() }),
    );
    expect(billing.url).toMatch(/^https:\/\//);
    errorOf(await api.call("GET", "/projects/00000000-0000-4000-8000-00000000dead"), 404, "not_found");
  });

  it("reads a project with its organization and payment method flag", async () => {
    const project = ok(await api.call("GET", api.project()), Project);
    expect(project.version).toBe("v0.1");
    expect(project.organization.hasValidPaymentMethod).toBe(true);
  });

  it("refuses creates while the organization has no valid payment method", async () => {
    const tenant = ok(
      await api.admin("POST", "/projects", { name: "unpaid", payment_method_valid: false }),
      z.object({ project_id: z.string(), api_key: z.string(), organization_id: z.string() }),
    );
    const project = ok(await api.call("GET", `/projects/${tenant.project_id}`, undefined, tenant.api_key), Project);
    expect(project.organization.hasValidPaymentMethod).toBe(false);
    const create = await api.call("POST", `/projects/${tenant.project_id}/vms`, vmBody("x"), tenant.api_key);
    expect(errorOf(create, 403, "forbidden")).toMatch(/payment method/);
    ok(
      await api.admin("PUT", `/organizations/${tenant.organization_id}/payment-method`, { valid: true }),
      z.object({}),
    );
    opOf(await api.call("POST", `/projects/${tenant.project_id}/vms`, vmBody("x"), tenant.api_key));
  });
});

describe("catalogue", () => {
  it("lists locations, images, specs and availabilities", async () => {
    const locations = ok(await api.call("GET", api.project("/locations")), StringItems).items;
    expect(locations).toEqual(expect.arrayContaining(["us-east1-a", "us-southcentral1-a", "eu-iceland1-a"]));
    const images = ok(await api.call("GET", api.project("/images")), itemsOf(Image)).items;
    const names = images.map((i) => i.name);
    expect(names).toEqual(expect.arrayContaining(["ubuntu22.04-nvidia-550", "ubuntu24.04-nvidia-565"]));
    for (const image of images) {
      expect(image.tags.length).toBeGreaterThan(0);
      expect(image.created_at).toMatch(TIMESTAMP);
      expect(image.locations.every((l) => locations.includes(l))).toBe(true);
    }
    const specs = ok(await api.call("GET", api.project("/specs")), itemsOf(SpecItem)).items;
    expect(specs.map((s) => s.product_name)).toEqual([...VM_TYPES]);
    const a100 = specs.find((s) => s.product_name === "a100-80gb.8x");
    expect(a100).toMatchObject({ num_gpu: 8, cpu_cores: 96, memory_gb: 960 });
    for (const spec of specs) {
      const info = VM_TYPE_INFO[spec.product_name as keyof typeof VM_TYPE_INFO];
      expect([spec.num_gpu, spec.cpu_cores, spec.memory_gb, spec.disk_gb]).toEqual([
        info.gpus,
        info.vcpu,
        info.memoryGb,
        info.localDiskGb,
      ]);
    }
    const all = ok(await api.call("GET", api.project("/availabilities")), itemsOf(AvailabilityItem)).items;
    expect(all.length).toBe(VM_TYPES.length * locations.length);
    const one = ok(
      await api.call("GET", api.project("/availabilities?product_name=l40s-48gb.10x&location=eu-iceland1-a")),
      itemsOf(AvailabilityItem),
    ).items;
    expect(one).toEqual([
      { type: "l40s-48gb.10x", location: "eu-iceland1-a", available: true, available_count: expect.any(Number) },
    ]);
  });

  it("counts the free VMs of a type in a location (available_count, an extension), unless told not to", async () => {
    ok(await api.admin("PUT", "/capacity", { "eu-iceland1-a": { "a40.2x": { capacity: 2 } } }), z.object({}));
    const path = api.project("/availabilities?product_name=a40.2x&location=eu-iceland1-a");
    const item = async () => ok(await api.call("GET", path), itemsOf(AvailabilityItem)).items[0];
    expect(await item()).toMatchObject({ available: true, available_count: 2 });
    await createVm("count-1", { type: "a40.2x", location: "eu-iceland1-a" });
    expect(await item()).toMatchObject({ available: true, available_count: 1 });
    await createVm("count-2", { type: "a40.2x", location: "eu-iceland1-a" });
    expect(await item()).toMatchObject({ available: false, available_count: 0 });
    await api.admin("PUT", "/settings", { availability_counts: false });
    try {
      expect((await api.call("GET", path)).body).toEqual({
        items: [{ type: "a40.2x", location: "eu-iceland1-a", available: false }],
      });
    } finally {
      await api.admin("PUT", "/settings", { availability_counts: true });
    }
  });

  it("consumes and releases capacity; a create beyond it fails out_of_stock", async () => {
    ok(await api.admin("PUT", "/capacity", { "us-southcentral1-a": { "a100.8x": { capacity: 1 } } }), z.object({}));
    const availability = async () =>
      ok(
        await api.call("GET", api.project("/availabilities?product_name=a100.8x&location=us-southcentral1-a")),
        itemsOf(AvailabilityItem),
      ).items[0]?.available;
    expect(await availability()).toBe(true);
    const spec = { type: "a100.8x", location: "us-southcentral1-a" };
    const first = await createVm("cap-1", spec);
    expect(await availability()).toBe(false);
    const second = await api.settle(
      "vm",
      opOf(await api.call("POST", api.project("/vms"), vmBody("cap-2", spec))).operation_id,
    );
    expect(second.state).toBe("FAILED");
    expect(second.result).toMatchObject({ code: "out_of_stock" });
    errorOf(await api.call("GET", api.project(`/vms/${second.metadata.id}`)), 404, "not_found");
    // Stopping releases the slot; another VM takes it; START of the first then fails out_of_stock.
    await api.settle(
      "vm",
      opOf(await api.call("PATCH", api.project(`/vms/${first.id}`), { action: "STOP" })).operation_id,
    );
    expect(await availability()).toBe(true);
    await createVm("cap-3", spec);
    const start = await api.settle(
      "vm",
      opOf(await api.call("PATCH", api.project(`/vms/${first.id}`), { action: "START" })).operation_id,
    );
    expect(start).toMatchObject({ state: "FAILED", result: { code: "out_of_stock" } });
    expect(ok(await api.call("GET", api.project(`/vms/${first.id}`)), Vm).state).toBe("STATE_STOPPED");
  });
});

describe("the spec's typical flow to launch a VM", () => {
  it("lists the catalogue, posts the VM, polls the operation, reads the running VM", async () => {
    ok(await api.call("GET", api.project("/locations")), StringItems);
    ok(await api.call("GET", api.project("/images")), itemsOf(Image));
    ok(
      await api.call("GET", api.project("/availabilities?product_name=a40.1x&location=us-east1-a")),
      itemsOf(AvailabilityItem),
    );
    ok(await api.call("GET", api.project("/specs")), itemsOf(SpecItem));
    const created = await api.call("POST", api.project("/vms"), vmBody("flow-1", { image: "ubuntu24.04-nvidia-565" }));
    expect(Object.keys(created.body as object)).toEqual(["operation"]);
    const started = opOf(created);
    expect(started).toMatchObject({ state: "IN_PROGRESS", result: null, completed_at: "" });
    expect(started.metadata).toMatchObject({ operation_name: "CREATE", type: "vm" });
    expect(started.metadata.id).not.toBe("");
    expect(started.started_at).toMatch(TIMESTAMP);
    const done = await api.settle("vm", started.operation_id);
    expect(done.state).toBe("SUCCEEDED");
    expect(done.completed_at).toMatch(TIMESTAMP);
    expect(done.result).toMatchObject({ id: started.metadata.id, state: "STATE_RUNNING" });
    const answer = await api.call("GET", api.project(`/vms/${started.metadata.id}`));
    const vm = ok(answer, Vm);
    expect(Object.keys(answer.body as object).sort()).toEqual(VM_KEYS);
    expect(vm).toMatchObject({
      name: "flow-1",
      state: "STATE_RUNNING",
      project_id: api.sim.projectId,
      commitment_end: "",
    });
    expect(vm.created_at).toMatch(TIMESTAMP);
    const ip = vm.network_interfaces[0]?.ips[0];
    expect(ip?.public_ipv4.address).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(ip?.private_ipv4.address).toMatch(/^10\./);
    expect(ip?.public_ipv4.type).toBe("dynamic");
    expect(vm.ssh_destination).toBe(`ubuntu@${ip?.public_ipv4.address}`);
    expect(vm.disks[0]).toMatchObject({ attachment_type: "os", mode: "read-write" });
    const networks = ok(await api.call("GET", api.project("/vpc/networks")), itemsOf(VpcNetwork)).items;
    expect(networks.map((n) => n.id)).toContain(vm.network_interfaces[0]?.network);
  });
});

describe("VMs", () => {
  it("answers a duplicate name 409 conflict", async () => {
    await createVm("dup-vm");
    errorOf(await api.call("POST", api.project("/vms"), vmBody("dup-vm")), 409, "conflict");
  });

  it("validates create bodies and names the field", async () => {
    const missing = await api.call("POST", api.project("/vms"), { name: "x", type: "a40.1x", location: "us-east1-a" });
    expect(errorOf(missing, 400, "bad_request")).toMatch(/ssh_public_key/);
    expect(
      errorOf(await api.call("POST", api.project("/vms"), vmBody("x", { type: "h100.1x" })), 400, "bad_request"),
    ).toMatch(/^type/);
    expect(
      errorOf(await api.call("POST", api.project("/vms"), vmBody("x", { location: "mars-1a" })), 400, "bad_request"),
    ).toMatch(/^location/);
    expect(
      errorOf(await api.call("POST", api.project("/vms"), vmBody("x", { image: "windows" })), 400, "bad_request"),
    ).toMatch(/^image/);
    expect(errorOf(await api.call("POST", api.project("/vms"), "{not json"), 400, "bad_request")).toMatch(/JSON/);
    const unknownField = vmBody("x", { sshPublicKey: "typo" } as Record<string, unknown>);
    expect(errorOf(await api.call("POST", api.project("/vms"), unknownField), 400, "bad_request")).toMatch(
      /sshPublicKey/,
    );
    const action = await api.call("PATCH", api.project("/vms/whatever"), { action: "EXPLODE" });
    expect(errorOf(action, 400, "bad_request")).toMatch(/action/);
  });

  it("filters the list by every filter, comma-separated or repeated", async () => {
    const a = await createVm("filter-a", { type: "a40.2x" });
    const b = await createVm("filter-b", { type: "l40s-48gb.1x", location: "eu-iceland1-a" });
    const names = (answer: Awaited<ReturnType<Api["call"]>>) =>
      ok(answer, z.object({ items: z.array(Vm), next_page_token: z.string(), prev_page_token: z.string() }))
        .items.map((v) => v.name)
        .sort();
    expect(names(await api.call("GET", api.project("/vms?names=filter-a,filter-b")))).toEqual(["filter-a", "filter-b"]);
    expect(names(await api.call("GET", api.project("/vms?names=filter-a&names=filter-b")))).toEqual([
      "filter-a",
      "filter-b",
    ]);
    expect(names(await api.call("GET", api.project(`/vms?ids=${a.id}`)))).toEqual(["filter-a"]);
    expect(names(await api.call("GET", api.project("/vms?names=filter-a,filter-b&types=l40s-48gb.1x")))).toEqual([
      "filter-b",
    ]);
    expect(names(await api.call("GET", api.project("/vms?names=filter-a,filter-b&locations=us-east1-a")))).toEqual([
      "filter-a",
    ]);
    expect(names(await api.call("GET", api.project(`/vms?ids=${b.id}&states=STATE_RUNNING`)))).toEqual(["filter-b"]);
    expect(names(await api.call("GET", api.project(`/vms?ids=${b.id}&states=STATE_STOPPED`)))).toEqual([]);
    errorOf(await api.call("GET", api.project("/vms?limit=501")), 400, "bad_request");
    errorOf(await api.call("GET", api.project("/vms?sort=size")), 400, "bad_request");
  });

  it("answers 404 for an unknown VM and operation", async () => {
    errorOf(await api.call("GET", api.project("/vms/00000000-0000-4000-8000-000000000000")), 404, "not_found");
    errorOf(
      await api.call("GET", api.project("/vms/operations/00000000-0000-4000-8000-000000000000")),
      404,
      "not_found",
    );
  });

  it("attaches and detaches data disks on create, update and terminate", async () => {
    const data = await createDisk("vm-data-1");
    const shared = await createDisk("vm-data-2");
    const vm = await createVm("with-disks", { disks: [{ id: data.id, mode: "read-write" }] });
    expect(vm.disks.map((d) => [d.attachment_type, d.id])).toEqual([
      ["os", vm.disks[0]?.id],
      ["data", data.id],
    ]);
    // A disk attached read-write elsewhere cannot be attached again; another location is 400.
    errorOf(
      await api.call("POST", api.project("/vms"), vmBody("steal", { disks: [{ id: data.id }] })),
      409,
      "conflict",
    );
    const iceland = await createDisk("vm-data-iceland", { location: "eu-iceland1-a" });
    expect(
      errorOf(
        await api.call("POST", api.project("/vms"), vmBody("far", { disks: [{ id: iceland.id }] })),
        400,
        "bad_request",
      ),
    ).toMatch(/disks\[0\]/);
    errorOf(await api.call("DELETE", api.project(`/disks/${data.id}`)), 409, "conflict");

    const update = { action: "UPDATE", disks: [{ id: shared.id, mode: "read-only" }] };
    const updated = await api.settle(
      "vm",
      opOf(await api.call("PATCH", api.project(`/vms/${vm.id}`), update)).operation_id,
    );
    expect(updated).toMatchObject({ state: "SUCCEEDED", metadata: { operation_name: "UPDATE" } });
    const after = ok(await api.call("GET", api.project(`/vms/${vm.id}`)), Vm);
    expect(after.state).toBe("STATE_RUNNING");
    expect(after.disks.slice(1).map((d) => [d.id, d.mode])).toEqual([[shared.id, "read-only"]]);
    expect(ok(await api.call("GET", api.project(`/disks/${data.id}`)), Disk).attached_to).toEqual([]);

    const terminated = await api.settle(
      "vm",
      opOf(await api.call("DELETE", api.project(`/vms/${vm.id}`))).operation_id,
    );
    expect(terminated).toMatchObject({ state: "SUCCEEDED", metadata: { operation_name: "DELETE", id: vm.id } });
    errorOf(await api.call("GET", api.project(`/vms/${vm.id}`)), 404, "not_found");
    // Data disks stay, detached; the boot disk was never a standalone disk and is gone with the VM.
    const disks = ok(await api.call("GET", api.project("/disks")), itemsOf(Disk)).items;
    expect(disks.find((d) => d.id === shared.id)?.attached_to).toEqual([]);
    expect(disks.some((d) => d.id === vm.disks[0]?.id)).toBe(false);
  });
});

describe("disks", () => {
  it("creates, lists, reads, grows and deletes a disk", async () => {
    const created = await api.call("POST", api.project("/disks"), {
      name: "disk-1",
      size: "1TiB",
      location: "us-east1-a",
      block_size: 512,
    });
    const op = await api.settle("disk", opOf(created).operation_id);
    expect(op).toMatchObject({ state: "SUCCEEDED", metadata: { operation_name: "CREATE", type: "disk" } });
    const disk = ok(await api.call("GET", api.project(`/disks/${op.metadata.id}`)), Disk);
    expect(disk).toMatchObject({
      name: "disk-1",
      size: "1TiB",
      type: "persistent-ssd",
      block_size: 512,
      attached_to: [],
    });
    expect(disk.updated_at).toMatch(TIMESTAMP);
    const list = ok(await api.call("GET", api.project("/disks")), itemsOf(Disk)).items;
    expect(list.map((d) => d.id)).toContain(disk.id);

    expect(
      errorOf(await api.call("PATCH", api.project(`/disks/${disk.id}`), { size: "512GiB" }), 400, "bad_request"),
    ).toMatch(/size/);
    errorOf(await api.call("PATCH", api.project(`/disks/${disk.id}`), { size: "2 TiB" }), 400, "bad_request");
    const resize = await api.settle(
      "disk",
      opOf(await api.call("PATCH", api.project(`/disks/${disk.id}`), { size: "2048GiB" })).operation_id,
    );
    expect(resize).toMatchObject({
      state: "SUCCEEDED",
      metadata: { operation_name: "RESIZE" },
      result: { size: "2048GiB" },
    });

    const deleted = await api.settle(
      "disk",
      opOf(await api.call("DELETE", api.project(`/disks/${disk.id}`))).operation_id,
    );
    expect(deleted).toMatchObject({ state: "SUCCEEDED", metadata: { operation_name: "DELETE" } });
    errorOf(await api.call("GET", api.project(`/disks/${disk.id}`)), 404, "not_found");
    const ops = ok(
      await api.call("GET", api.project(`/disks/operations?resource_id=${disk.id}`)),
      itemsOf(Operation),
    ).items;
    expect(ops.map((o) => o.metadata.operation_name)).toEqual(["CREATE", "RESIZE", "DELETE"]);
  });

  it("checks sizes per disk type and unique names", async () => {
    const post = (body: Record<string, unknown>) =>
      api.call("POST", api.project("/disks"), { name: "sz", location: "us-east1-a", ...body });
    errorOf(await post({ size: "11TiB" }), 400, "bad_request");
    errorOf(await post({ size: "512GiB", type: "shared-volume" }), 400, "bad_request");
    errorOf(await post({ size: "1TiB", type: "nfs" }), 400, "bad_request");
    errorOf(await post({ size: "1TiB", block_size: 1024 }), 400, "bad_request");
    await createDisk("dup-disk");
    errorOf(
      await api.call("POST", api.project("/disks"), { name: "dup-disk", size: "1GiB", location: "us-east1-a" }),
      409,
      "conflict",
    );
  });
});

describe("networks and firewall rules", () => {
  it("creates networks and rules, patches and deletes them, and guards networks in use", async () => {
    const created = await api.call("POST", api.project("/vpc/networks"), { name: "net-1", cidr: "10.20.0.0/16" });
    const netOp = await api.settle("network", opOf(created).operation_id);
    expect(netOp).toMatchObject({
      state: "SUCCEEDED",
      metadata: { type: "network" },
      result: { cidr: "10.20.0.0/16" },
    });
    const network = ok(await api.call("GET", api.project(`/vpc/networks/${netOp.metadata.id}`)), VpcNetwork);
    expect(network.subnets.length).toBe(1);
    errorOf(
      await api.call("POST", api.project("/vpc/networks"), { name: "bad", cidr: "10.0.0.0/33" }),
      400,
      "bad_request",
    );
    errorOf(await api.call("POST", api.project("/vpc/networks"), { name: "net-1" }), 409, "conflict");

    const ruleBody = {
      name: "ssh",
      vpc_network_id: network.id,
      direction: "ingress",
      action: "allow",
      protocols: ["tcp"],
      sources: [{ cidr: "0.0.0.0/0" }],
      destination_ports: ["22"],
    };
    errorOf(
      await api.call("POST", api.project("/vpc/firewall-rules"), { ...ruleBody, destination_ports: [22] }),
      400,
      "bad_request",
    );
    const ruleOp = await api.settle(
      "firewall-rule",
      opOf(await api.call("POST", api.project("/vpc/firewall-rules"), ruleBody)).operation_id,
    );
    const rule = FirewallRule.parse(ruleOp.result);
    expect(rule).toMatchObject({
      id: ruleOp.metadata.id,
      state: "active",
      sources: [{ cidr: "0.0.0.0/0", resource_id: "" }],
    });
    expect(rule.destinations).toEqual([]);
    const listed = ok(await api.call("GET", api.project("/vpc/firewall-rules")), itemsOf(FirewallRule)).items;
    expect(listed.map((r) => r.id)).toContain(rule.id);

    const patch = { destination_ports: ["22", "8000-9000"], protocols: ["tcp", "udp"] };
    const patchOp = await api.settle(
      "firewall-rule",
      opOf(await api.call("PATCH", api.project(`/vpc/firewall-rules/${rule.id}`), patch)).operation_id,
    );
    expect(patchOp.metadata.operation_name).toBe("UPDATE");
    const patched = ok(await api.call("GET", api.project(`/vpc/firewall-rules/${rule.id}`)), FirewallRule);
    expect(patched).toMatchObject(patch);

    errorOf(await api.call("DELETE", api.project(`/vpc/networks/${network.id}`)), 409, "conflict");
    await api.settle(
      "firewall-rule",
      opOf(await api.call("DELETE", api.project(`/vpc/firewall-rules/${rule.id}`))).operation_id,
    );
    errorOf(await api.call("GET", api.project(`/vpc/firewall-rules/${rule.id}`)), 404, "not_found");
    const netDelete = await api.settle(
      "network",
      opOf(await api.call("DELETE", api.project(`/vpc/networks/${network.id}`))).operation_id,
    );
    expect(netDelete.state).toBe("SUCCEEDED");
    errorOf(await api.call("GET", api.project(`/vpc/networks/${network.id}`)), 404, "not_found");

    // The default network carries the VMs' interfaces: deleting it is refused.
    await createVm("net-user");
    const defaultNet = ok(await api.call("GET", api.project("/vpc/networks")), itemsOf(VpcNetwork)).items.find(
      (n) => n.name === "default",
    );
    errorOf(await api.call("DELETE", api.project(`/vpc/networks/${defaultNet?.id}`)), 409, "conflict");
  });
});

describe("routing and errors", () => {
  it("answers 404 for unknown routes and 405 for a wrong method", async () => {
    errorOf(await api.call("GET", "/nothing-here"), 404, "not_found");
    errorOf(await api.call("GET", "/projects/p/vms/v/extra"), 404, "not_found");
    const wrong = await api.call("PUT", api.project("/vms"));
    errorOf(wrong, 405, "method_not_allowed");
    expect(wrong.headers.get("allow")).toMatch(/GET/);
    errorOf(await api.call("DELETE", "/projects"), 405, "method_not_allowed");
  });

  it("accepts a DELETE that carries a JSON content type and no body", async () => {
    const disk = await createDisk("empty-body-delete");
    const response = await fetch(`${api.sim.url}${api.project(`/disks/${disk.id}`)}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${api.sim.apiKey}`, "content-type": "application/json" },
    });
    expect(response.status).toBe(200);
  });
});

describe("exact shapes", () => {
  const keysOf = (value: unknown) => Object.keys(value as object).sort();

  // Usage items: test/simulator/lifecycle.test.ts (they need days to pass on a manual clock).
  it("answers disks, networks, rules, operations, images and specs with exactly the contract's fields", async () => {
    const disk = await createDisk("shape-disk");
    expect(keysOf(disk)).toEqual(
      [
        "attached_to",
        "block_size",
        "created_at",
        "id",
        "location",
        "name",
        "serial_number",
        "size",
        "type",
        "updated_at",
      ].sort(),
    );
    const networks = (await api.call("GET", api.project("/vpc/networks"))).body as { items: unknown[] };
    expect(keysOf(networks.items[0])).toEqual(["cidr", "gateway", "id", "name", "subnets"]);
    const network = VpcNetwork.parse(networks.items[0]);
    const ruleBody = {
      name: "shape-rule",
      vpc_network_id: network.id,
      direction: "egress",
      action: "deny",
      protocols: ["icmp"],
    };
    const op = await api.settle(
      "firewall-rule",
      opOf(await api.call("POST", api.project("/vpc/firewall-rules"), ruleBody)).operation_id,
    );
    expect(keysOf(op)).toEqual(["completed_at", "metadata", "operation_id", "result", "started_at", "state"]);
    expect(keysOf(op.metadata)).toEqual(["id", "operation_name", "request", "type"]);
    expect(keysOf(op.result)).toEqual(
      [
        "action",
        "destination_ports",
        "destinations",
        "direction",
        "id",
        "name",
        "protocols",
        "source_ports",
        "sources",
        "state",
        "vpc_network_id",
      ].sort(),
    );
    const images = (await api.call("GET", api.project("/images"))).body as { items: unknown[] };
    expect(keysOf(images.items[0])).toEqual(["created_at", "description", "id", "locations", "name", "tags"]);
    const specs = (await api.call("GET", api.project("/specs"))).body as { items: unknown[] };
    expect(keysOf(specs.items[0])).toEqual(
      [
        "cpu_cores",
        "cpu_type",
        "description",
        "disk_gb",
        "disk_type",
        "gpu_type",
        "memory_gb",
        "memory_type",
        "num_gpu",
        "product_name",
      ].sort(),
    );
    const vmList = (await api.call("GET", api.project("/vms?limit=1"))).body;
    expect(keysOf(vmList)).toEqual(["items", "next_page_token", "prev_page_token"]);
  });

  it("checks firewall-rule references and names, and shares read-only disks", async () => {
    const bad = { name: "orphan", vpc_network_id: "nope", direction: "ingress", action: "allow", protocols: ["tcp"] };
    expect(errorOf(await api.call("POST", api.project("/vpc/firewall-rules"), bad), 400, "bad_request")).toMatch(
      /vpc_network_id/,
    );
    errorOf(
      await api.call("POST", api.project("/vpc/firewall-rules"), { ...bad, direction: "sideways" }),
      400,
      "bad_request",
    );
    const network = ok(await api.call("GET", api.project("/vpc/networks")), itemsOf(VpcNetwork)).items[0];
    const rule = { ...bad, name: "twice", vpc_network_id: network?.id };
    await api.settle(
      "firewall-rule",
      opOf(await api.call("POST", api.project("/vpc/firewall-rules"), rule)).operation_id,
    );
    errorOf(await api.call("POST", api.project("/vpc/firewall-rules"), rule), 409, "conflict");

    const shared = await createDisk("shared-ro", { type: "shared-volume", size: "2TiB" });
    const first = await createVm("reader-1", { disks: [{ id: shared.id, mode: "read-only" }] });
    const second = await createVm("reader-2", { disks: [{ id: shared.id, mode: "read-only" }] });
    const attached = ok(await api.call("GET", api.project(`/disks/${shared.id}`)), Disk).attached_to;
    expect(attached.map((a) => [a.vm_id, a.mode]).sort()).toEqual(
      [
        [first.id, "read-only"],
        [second.id, "read-only"],
      ].sort(),
    );
    errorOf(
      await api.call("POST", api.project("/vms"), vmBody("writer", { disks: [{ id: shared.id }] })),
      409,
      "conflict",
    );
  });
});
