// Table tests of the per-kind pure mappers: normalisation before comparison, the VM's next step, sizes.

import { describe, expect, it } from "vitest";
import type { FirewallRule, Vm } from "../../../src/cloud/wire.ts";
import { summarizeVm } from "../../../src/controllers/accounts/vm-summary.ts";
import { compareDiskSize } from "../../../src/controllers/kinds/gpu-disk.ts";
import { type DesiredRule, normalizePorts, ruleDrift } from "../../../src/controllers/kinds/gpu-firewall-rule.ts";
import {
  connectionDetails,
  type DesiredVm,
  nextVmStep,
  observeVm,
} from "../../../src/controllers/kinds/gpu-vm-mappers.ts";

describe("compareDiskSize", () => {
  it.each([
    { desired: "1TiB", observed: "1024GiB", want: "equal" },
    { desired: "2TiB", observed: "1TiB", want: "grow" },
    { desired: "512GiB", observed: "1TiB", want: "shrink" },
    { desired: "1TiB", observed: "1 TB", want: "unknown" },
  ])("$desired vs $observed → $want", ({ desired, observed, want }) => {
    expect(compareDiskSize(desired, observed)).toBe(want);
  });
});

describe("normalizePorts", () => {
  it.each([
    { ports: ["*"], want: [] },
    { ports: ["1-65535"], want: [] },
    { ports: [], want: [] },
    { ports: ["443", "22", "22"], want: ["22", "443"] },
    { ports: ["80-80", 8080], want: ["80", "8080"] },
  ])("$ports → $want", ({ ports, want }) => {
    expect(normalizePorts(ports)).toEqual(want);
  });
});

describe("ruleDrift", () => {
  const observed: FirewallRule = {
    id: "r1",
    name: "ns-ssh",
    direction: "ingress",
    action: "allow",
    vpc_network_id: "n1",
    state: "active",
    sources: [
      { cidr: "10.0.0.0/8", resource_id: "" },
      { cidr: "0.0.0.0/0", resource_id: "" },
    ],
    source_ports: ["*"],
    destinations: [{ cidr: "", resource_id: "vm-1" }],
    destination_ports: ["22"],
    protocols: ["tcp"],
  };
  const desired: DesiredRule = {
    name: "ns-ssh",
    protocols: ["tcp"],
    sources: [
      { cidr: "0.0.0.0/0", resource_id: "" },
      { cidr: "10.0.0.0/8", resource_id: "" },
    ],
    destinations: [{ cidr: "", resource_id: "vm-1" }],
    source_ports: [],
    destination_ports: ["22"],
  };
  it.each([
    { reason: "order and all-ports spellings do not count", change: {}, want: [] },
    { reason: "a new port is drift", change: { destination_ports: ["22", "443"] }, want: ["destination_ports"] },
    {
      reason: "another protocol is drift",
      change: { protocols: ["tcp", "udp"] as DesiredRule["protocols"] },
      want: ["protocols"],
    },
    {
      reason: "a different source is drift",
      change: { sources: [{ cidr: "1.2.3.4/32", resource_id: "" }] },
      want: ["sources"],
    },
  ])("$reason", ({ change, want }) => {
    expect(ruleDrift({ ...desired, ...change }, observed)).toEqual(want);
  });
});

function vm(state: string, type = "a100.1x", disks: Vm["disks"] = []): Vm {
  return {
    id: "vm-1",
    project_id: "p",
    type,
    state,
    ssh_destination: "ubuntu@1.2.3.4",
    created_at: "",
    updated_at: "",
    name: "ns-trainer",
    location: "us-east1-a",
    commitment_period: 0,
    commitment_end: "",
    disks,
    network_interfaces: [
      {
        id: "nic",
        name: "nic",
        network: "n",
        subnet: "s",
        interface_type: "Ethernet",
        mac_address: "",
        ips: [
          { private_ipv4: { address: "10.0.0.2" }, public_ipv4: { address: "1.2.3.4", id: "ip", type: "dynamic" } },
        ],
      },
    ],
    host_channel_adapters: [],
    virtualization_features: { nested_virtualization: false },
    instance_template_id: "",
    instance_group_id: "",
    reservation_id: "",
  };
}

const dataDisk = {
  id: "d1",
  name: "data",
  type: "persistent-ssd",
  size: "1TiB",
  location: "us-east1-a",
  block_size: 4096,
  created_at: "",
  updated_at: "",
  serial_number: "",
  attachment_type: "data",
  mode: "read-write",
};

describe("nextVmStep", () => {
  const want: DesiredVm = { type: "a100.1x", powerState: "Running", disks: [] };
  it.each([
    { reason: "in sync", desired: want, observed: vm("STATE_RUNNING"), action: "none" },
    { reason: "transition in progress waits", desired: want, observed: vm("STATE_STARTING"), action: "wait" },
    { reason: "unprefixed state is understood", desired: want, observed: vm("RUNNING"), action: "none" },
    { reason: "stopped outside Kubernetes is started", desired: want, observed: vm("STATE_STOPPED"), action: "START" },
    {
      reason: "powerState Stopped stops",
      desired: { ...want, powerState: "Stopped" as const },
      observed: vm("STATE_RUNNING"),
      action: "STOP",
    },
    {
      reason: "type change while running stops first",
      desired: { ...want, type: "a100.2x" },
      observed: vm("STATE_RUNNING"),
      action: "STOP",
    },
    {
      reason: "type change while stopped updates",
      desired: { ...want, type: "a100.2x" },
      observed: vm("STATE_STOPPED"),
      action: "UPDATE",
    },
    {
      reason: "a disk to attach updates",
      desired: { ...want, disks: [{ id: "d1", mode: "read-write" as const }] },
      observed: vm("STATE_RUNNING"),
      action: "UPDATE",
    },
    {
      reason: "an attached disk no longer wanted updates",
      desired: want,
      observed: vm("STATE_RUNNING", "a100.1x", [dataDisk]),
      action: "UPDATE",
    },
    {
      reason: "a new reset annotation resets",
      desired: { ...want, resetRequestedAt: "2026-11-21T10:00:00Z" },
      observed: vm("STATE_RUNNING"),
      action: "RESET",
    },
  ])("$reason", ({ desired, observed, action }) => {
    expect(
      nextVmStep(desired, {
        type: observed.type,
        state: observed.state,
        disks: observed.disks.filter((d) => d.attachment_type !== "os"),
      }).action,
    ).toBe(action);
  });

  it("a VM's summary (what the snapshot holds) observes as the whole answer does, at under half its size", () => {
    const boot = { ...dataDisk, id: "b1", name: "boot", attachment_type: "os" };
    for (const whole of [
      vm("STATE_RUNNING", "a100.1x", [boot, dataDisk]),
      vm("STATE_STOPPING", "a100.2x", [boot]),
      { ...vm("STATE_RUNNING"), network_interfaces: [] },
    ]) {
      const summary = summarizeVm(whole);
      // The whole answer with the summary's flat fields beside it: dropping the rest changes no observation.
      const ip = whole.network_interfaces[0]?.ips[0];
      const wholeRead = {
        ...whole,
        disks: whole.disks.filter((disk) => disk.attachment_type !== "os"),
        privateIPv4: ip?.private_ipv4.address,
        publicIPv4: ip?.public_ipv4.address,
      };
      const desiredVms: DesiredVm[] = [
        want,
        { ...want, disks: [{ id: "d2", mode: "read-write" }] },
        { ...want, type: "a40.1x" },
      ];
      for (const desired of desiredVms) {
        expect(observeVm(desired, summary)).toEqual(observeVm(desired, wholeRead));
      }
      expect(JSON.stringify(summary).length).toBeLessThan(JSON.stringify(whole).length / 2);
      for (const disk of summary.disks) expect(disk).not.toHaveProperty("serial_number");
    }
    // Most VMs have no data disk: they share one empty list.
    const bootOnly = [summarizeVm(vm("STATE_RUNNING", "a100.1x", [boot])), summarizeVm(vm("STATE_STOPPED"))];
    expect(bootOnly[0]?.disks).toEqual([]);
    expect(bootOnly[0]?.disks).toBe(bootOnly[1]?.disks);
  });

  it("a type outside the family is an immutable change", () => {
    const observation = observeVm({ ...want, type: "a40.1x" }, summarizeVm(vm("STATE_RUNNING")));
    expect(observation.terminal?.reason).toBe("ImmutableFieldChanged");
  });

  it("observation carries IPs, price and readiness", () => {
    const observation = observeVm(want, summarizeVm(vm("STATE_RUNNING")));
    expect(observation).toMatchObject({
      ready: true,
      upToDate: true,
      atProvider: { publicIP: "1.2.3.4", privateIP: "10.0.0.2", hourlyPriceUSD: 1.6 },
    });
    expect(connectionDetails(observation.atProvider)).toEqual({
      host: "1.2.3.4",
      user: "ubuntu",
      sshDestination: "ubuntu@1.2.3.4",
      publicIP: "1.2.3.4",
      privateIP: "10.0.0.2",
      port: "22",
    });
  });
});
