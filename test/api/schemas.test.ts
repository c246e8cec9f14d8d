import { describe, expect, it } from "vitest";
import { findCondition, type ManagedResource } from "../../src/api/common.ts";
import { GpuDisk, GpuDiskSpec, sizeInGiB } from "../../src/api/gpu-disk.ts";
import { GpuFirewallRuleSpec } from "../../src/api/gpu-firewall-rule.ts";
import { GpuNetworkSpec, maskedCidr } from "../../src/api/gpu-network.ts";
import { GpuVm, GpuVmSpec } from "../../src/api/gpu-vm.ts";
import { KINDS, kindInfo, USER_KINDS } from "../../src/api/kinds.ts";

const SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFJd4knmLnu7vb1EZH4MrFswCzeoXJt+H962yEUHk+WU me@example.com";
const VM_SPEC = { type: "a100.1x", location: "us-east1-a", sshPublicKey: SSH_KEY };

function issues(result: { success: boolean; error?: { issues: { message: string }[] } }): string[] {
  return result.success ? [] : (result.error?.issues.map((issue) => issue.message) ?? []);
}

describe("defaults", () => {
  it("fills the managed defaults and the kind's own", () => {
    const vm = GpuVmSpec.parse(VM_SPEC);
    expect(vm).toMatchObject({
      credentialsRef: { name: "gpucloud-credentials" },
      deletionPolicy: "Delete",
      managementPolicy: "Manage",
      powerState: "Running",
    });
    expect(GpuDiskSpec.parse({ size: "1TiB", location: "us-east1-a" })).toMatchObject({
      type: "persistent-ssd",
      blockSize: 4096,
    });
    expect(GpuNetworkSpec.parse({}).cidr).toBe("10.0.0.0/16");
    expect(GpuVmSpec.parse({ ...VM_SPEC, disks: [{ diskRef: { name: "datasets" } }] }).disks?.[0]?.mode).toBe(
      "read-write",
    );
  });
});

describe("one-of rules mirrored in zod", () => {
  it.each([
    ["location and locations", { ...VM_SPEC, locations: ["us-east1-a"] }, "set location or locations, not both"],
    [
      "neither location",
      { type: "a100.1x", sshPublicKey: SSH_KEY },
      "set location or locations (or id to adopt an existing VM)",
    ],
    [
      "key and key ref",
      { ...VM_SPEC, sshPublicKeySecretRef: { name: "keys", key: "pub" } },
      "set sshPublicKey or sshPublicKeySecretRef, not both",
    ],
    [
      "script and script ref",
      { ...VM_SPEC, startupScript: "x", startupScriptRef: { kind: "ConfigMap", name: "s", key: "k" } },
      "set startupScript or startupScriptRef, not both",
    ],
    [
      "disk ref and id",
      { ...VM_SPEC, disks: [{ diskRef: { name: "d" }, id: "x" }] },
      "set exactly one of diskRef and id",
    ],
    ["disk with neither", { ...VM_SPEC, disks: [{ mode: "read-only" }] }, "set exactly one of diskRef and id"],
    [
      "both connection targets",
      { ...VM_SPEC, connectionDetails: { secretName: "a", configMapName: "b" } },
      "set exactly one of secretName and configMapName",
    ],
  ])("GpuVm: %s", (_name, spec, message) => {
    expect(issues(GpuVmSpec.safeParse(spec))).toContain(message);
  });

  it("an adopted VM (id) needs neither location nor key", () => {
    expect(GpuVmSpec.safeParse({ type: "a100.1x", id: "vm-123", managementPolicy: "Observe" }).success).toBe(true);
  });

  const RULE = { networkRef: { name: "net" }, direction: "ingress", action: "allow", protocols: ["tcp"] };
  it.each([
    ["network ref and id", { ...RULE, networkId: "n-1" }, "set exactly one of networkRef and networkId"],
    [
      "no network",
      { direction: "ingress", action: "allow", protocols: ["tcp"] },
      "set exactly one of networkRef and networkId",
    ],
    [
      "endpoint with two kinds",
      { ...RULE, sources: [{ cidr: "0.0.0.0/0", resourceId: "vm-1" }] },
      "set exactly one of cidr, vmRef and resourceId",
    ],
    ["reversed port range", { ...RULE, destinationPorts: ["9000-8000"] }, "a port range must not end before it starts"],
    ["repeated protocol", { ...RULE, protocols: ["tcp", "tcp"] }, "protocols must not repeat"],
  ])("GpuFirewallRule: %s", (_name, spec, message) => {
    expect(issues(GpuFirewallRuleSpec.safeParse(spec))).toContain(message);
  });

  it("accepts a valid rule with port ranges", () => {
    const spec = {
      ...RULE,
      sources: [{ cidr: "0.0.0.0/0" }],
      destinations: [{ vmRef: { name: "trainer" } }],
      destinationPorts: ["22", "8000-9000"],
    };
    expect(GpuFirewallRuleSpec.safeParse(spec).success).toBe(true);
  });
});

describe("field formats", () => {
  it.each([
    ["ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ== user", true],
    ["ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTY=", true],
    ["sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29t", true],
    ["ssh-dss AAAAB3NzaC1kc3MAAACBAP", false],
    ["AAAAC3NzaC1lZDI1NTE5AAAAIFJd", false],
  ])("ssh key %s → %s", (key, valid) => {
    expect(GpuVmSpec.safeParse({ ...VM_SPEC, sshPublicKey: key }).success).toBe(valid);
  });

  it.each([
    ["persistent-ssd", "1GiB", true],
    ["persistent-ssd", "10TiB", true],
    ["persistent-ssd", "11TiB", false],
    ["persistent-ssd", "0GiB", false],
    ["persistent-ssd", "1.5TiB", false],
    ["shared-volume", "2048GiB", true],
    ["shared-volume", "1536GiB", false],
    ["shared-volume", "1001TiB", false],
  ])("%s of %s → %s", (type, size, valid) => {
    expect(GpuDiskSpec.safeParse({ type, size, location: "us-east1-a" }).success).toBe(valid);
  });

  it("converts sizes to GiB", () => {
    expect([sizeInGiB("512GiB"), sizeInGiB("2TiB"), sizeInGiB("2TB")]).toEqual([512, 2048, undefined]);
  });

  it.each(["10.0.0.0/16", "0.0.0.0/0", "192.168.1.0/24"])("accepts CIDR %s", (cidr) => {
    expect(GpuNetworkSpec.safeParse({ cidr }).success).toBe(true);
  });
  it.each(["10.0.0.0/33", "256.0.0.0/8", "10.0.0.0", "fd00::/8"])("rejects CIDR %s", (cidr) => {
    expect(GpuNetworkSpec.safeParse({ cidr }).success).toBe(false);
  });

  it.each([
    ["10.0.0.1/8", "10.0.0.0/8"],
    ["192.168.7.77/20", "192.168.0.0/20"],
    ["10.0.0.1/0", "0.0.0.0/0"],
    ["203.0.113.9/31", "203.0.113.8/31"],
  ])("refuses CIDR %s (host bits set) naming %s, in one issue", (cidr, network) => {
    expect(maskedCidr(cidr)).toBe(network);
    const parsed = GpuNetworkSpec.safeParse({ cidr });
    expect(parsed.error?.issues.map((issue) => issue.message)).toEqual([`host bits are set: use ${network}`]);
  });

  it("says a malformed CIDR in words, once, and keeps /32 addresses", () => {
    expect(GpuNetworkSpec.safeParse({ cidr: "10.0.0.0/33" }).error?.issues.map((issue) => issue.message)).toEqual([
      "must be an IPv4 CIDR such as 10.0.0.0/16",
    ]);
    expect(maskedCidr("203.0.113.7/32")).toBe("203.0.113.7/32");
    expect(maskedCidr("not a cidr")).toBeUndefined();
  });
});

describe("whole objects as an informer delivers them", () => {
  it("parses a VM with status and keeps the metadata the operator needs", () => {
    const vm = GpuVm.parse({
      apiVersion: "gpucloud.dev/v1alpha1",
      kind: "GpuVm",
      metadata: {
        name: "trainer",
        namespace: "default",
        generation: 3,
        uid: "u-1",
        resourceVersion: "42",
        managedFields: [],
      },
      spec: VM_SPEC,
      status: {
        observedGeneration: 2,
        conditions: [
          { type: "Ready", status: "False", reason: "Creating", lastTransitionTime: "2026-11-21T00:00:00Z" },
        ],
        operation: { id: "op-1", name: "CREATE", state: "IN_PROGRESS", startedAt: "2026-11-21T00:00:00Z" },
        createPending: { cloudName: "default-trainer", location: "us-east1-a", requestedAt: "2026-11-21T00:00:00Z" },
        hourlyPriceUSD: 14.48,
        locationIndex: 0,
      },
    });
    expect(vm.metadata.generation).toBe(3);
    // Every kind fits the generic shape the reconciler works with.
    const managed: ManagedResource = vm;
    expect(findCondition(managed.status?.conditions, "Ready")?.reason).toBe("Creating");
    expect(findCondition(managed.status?.conditions, "Stalled")).toBeUndefined();
  });

  it("fills apiVersion and kind when a list item lacks them, and rejects a malformed object with a clear path", () => {
    const disk = GpuDisk.parse({
      metadata: { name: "d", namespace: "default" },
      spec: { size: "1TiB", location: "us-east1-a" },
    });
    expect([disk.apiVersion, disk.kind]).toEqual(["gpucloud.dev/v1alpha1", "GpuDisk"]);
    const bad = GpuDisk.safeParse({ metadata: { name: "d", namespace: "default" }, spec: { size: 5, location: "x" } });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]?.path).toEqual(["spec", "size"]);
  });

  it("KINDS lists every kind with its schema; USER_KINDS those users write (not the operator's claims)", () => {
    const users = ["GpuVm", "GpuDisk", "GpuNetwork", "GpuFirewallRule", "GpuVmPool", "GpuBudget"];
    const clusterApi = ["GpuCluster", "GpuMachine", "GpuMachineTemplate"];
    expect(KINDS.map((info) => info.kind)).toEqual([...users, "GpuCloudClaim", ...clusterApi]);
    expect(USER_KINDS.map((info) => info.kind)).toEqual([...users, ...clusterApi]);
    expect(kindInfo("GpuVm")?.schema).toBe(GpuVm);
    expect(kindInfo("Pod")).toBeUndefined();
  });
});
