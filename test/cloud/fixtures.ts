// Well-formed wire objects for stub answers.
export const PROJECT_ID = "11111111-1111-4111-8111-111111111111";
export const VM_ID = "22222222-2222-4222-8222-222222222222";

export function vmFixture(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: VM_ID,
    project_id: PROJECT_ID,
    type: "a100.1x",
    state: "STATE_RUNNING",
    ssh_destination: "203.0.113.7:22",
    created_at: "2026-11-21T00:00:00Z",
    updated_at: "2026-11-21T00:00:00Z",
    name: "train-1",
    location: "us-east1-a",
    commitment_period: 0,
    commitment_end: "",
    disks: [],
    network_interfaces: [],
    host_channel_adapters: [],
    virtualization_features: { nested_virtualization: false },
    instance_template_id: "",
    instance_group_id: "",
    reservation_id: "",
    ...overrides,
  };
}

export function operationFixture(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    operation_id: "op-1",
    state: "IN_PROGRESS",
    metadata: { operation_name: "CREATE", id: VM_ID, type: "vm" },
    result: null,
    started_at: "2026-11-21T00:00:00Z",
    completed_at: "",
    ...overrides,
  };
}

export function diskFixture(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: "33333333-3333-4333-8333-333333333333",
    name: "data-1",
    type: "persistent-ssd",
    size: "1024GiB",
    location: "us-east1-a",
    block_size: 4096,
    serial_number: "SN1",
    created_at: "2026-11-21T00:00:00Z",
    updated_at: "2026-11-21T00:00:00Z",
    attached_to: [],
    ...overrides,
  };
}

export function networkFixture(): Record<string, unknown> {
  return { id: "net-1", name: "default", subnets: ["sub-1"], gateway: "gw-1", cidr: "10.0.0.0/16" };
}

export function firewallRuleFixture(): Record<string, unknown> {
  return {
    id: "fw-1",
    name: "ssh",
    direction: "ingress",
    action: "allow",
    vpc_network_id: "net-1",
    state: "active",
    sources: [{ cidr: "0.0.0.0/0", resource_id: "" }],
    source_ports: [],
    destinations: [{ cidr: "", resource_id: VM_ID }],
    destination_ports: [22],
    protocols: ["tcp"],
  };
}

export function tokenFixture(n: number, expiresIn = 3600): Record<string, unknown> {
  return { access_token: `access-${n}`, refresh_token: `refresh-${n}`, expires_in: expiresIn, token_type: "bearer" };
}
