// The Cluster API infrastructure kinds against the v1beta2 contract (Cluster API v1.14): every contract field at
// the path Cluster API reads (internal/contract/infrastructure_*.go), the CRD labels and names it looks up, the
// validation a user meets, and docs/cluster-api.md's contract table naming every field.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CONTRACT_CRD_LABELS, INFRASTRUCTURE_API_VERSION } from "../../src/api/cluster-api.ts";
import { crdOf, type SchemaNode } from "../../src/api/crd.ts";
import { GpuCluster } from "../../src/api/gpu-cluster.ts";
import { GpuMachine } from "../../src/api/gpu-machine.ts";
import { GpuMachineTemplate } from "../../src/api/gpu-machine-template.ts";
import { kindInfo } from "../../src/api/kinds.ts";
import { createManifestValidator } from "../../src/api/validate.ts";

const ROOT = join(import.meta.dirname, "../..");
const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFJd4knmLnu7vb1EZH4MrFswCzeoXJt+H962yEUHk+WU me@example.com";
const INFRA_KINDS = ["GpuCluster", "GpuMachine", "GpuMachineTemplate"] as const;

function crd(kind: string) {
  const info = kindInfo(kind);
  if (info === undefined) throw new Error(`no kind ${kind}`);
  return crdOf(info);
}

/** The schema node at a dotted path of a kind's CRD (`status.addresses[]` steps into the items). */
function nodeAt(kind: string, path: string): SchemaNode | undefined {
  let node: SchemaNode | undefined = crd(kind).spec.versions[0]?.schema.openAPIV3Schema;
  for (const step of path.split(".")) {
    const name = step.replace(/\[\]$/, "");
    node = node?.properties?.[name];
    if (step.endsWith("[]")) node = node?.items;
  }
  return node;
}

/** Every field of the v1beta2 contract these kinds implement, with the type Cluster API reads it as. */
const CONTRACT_FIELDS: readonly [kind: string, path: string, type: string][] = [
  ["GpuMachine", "spec.providerID", "string"],
  ["GpuMachine", "spec.failureDomain", "string"],
  ["GpuMachine", "status.initialization.provisioned", "boolean"],
  ["GpuMachine", "status.addresses", "array"],
  ["GpuMachine", "status.addresses[].type", "string"],
  ["GpuMachine", "status.addresses[].address", "string"],
  ["GpuMachine", "status.failureDomain", "string"],
  ["GpuMachine", "status.conditions", "array"],
  ["GpuCluster", "spec.controlPlaneEndpoint.host", "string"],
  ["GpuCluster", "spec.controlPlaneEndpoint.port", "integer"],
  ["GpuCluster", "status.failureDomains", "array"],
  ["GpuCluster", "status.failureDomains[].name", "string"],
  ["GpuCluster", "status.failureDomains[].controlPlane", "boolean"],
  ["GpuCluster", "status.failureDomains[].attributes", "object"],
  ["GpuCluster", "status.initialization.provisioned", "boolean"],
  ["GpuCluster", "status.conditions", "array"],
  ["GpuMachineTemplate", "spec.template.metadata.labels", "object"],
  ["GpuMachineTemplate", "spec.template.metadata.annotations", "object"],
  ["GpuMachineTemplate", "spec.template.spec", "object"],
  ["GpuMachineTemplate", "status.capacity", "object"],
  ["GpuMachineTemplate", "status.nodeInfo.architecture", "string"],
  ["GpuMachineTemplate", "status.nodeInfo.operatingSystem", "string"],
];

function machine(spec: Record<string, unknown>) {
  return { apiVersion: INFRASTRUCTURE_API_VERSION, kind: "GpuMachine", metadata: { name: "m", namespace: "d" }, spec };
}

describe("the Cluster API infrastructure kinds (contract v1beta2)", () => {
  it.each(CONTRACT_FIELDS)("%s has %s where Cluster API reads it (%s)", (kind, path, type) => {
    expect(nodeAt(kind, path)?.type).toBe(type);
  });

  it("keeps the v1beta1 contract's status.ready out: with the v1beta2 label Cluster API reads initialization only", () => {
    for (const kind of ["GpuMachine", "GpuCluster"]) expect(nodeAt(kind, "status.ready")).toBeUndefined();
  });

  it("labels every CRD with the contract version it implements, named as Cluster API computes the name", () => {
    expect(CONTRACT_CRD_LABELS).toEqual({ "cluster.x-k8s.io/v1beta2": "v1alpha1" });
    for (const kind of INFRA_KINDS) {
      const document = crd(kind);
      expect(document.metadata.labels).toMatchObject({ "cluster.x-k8s.io/v1beta2": "v1alpha1" });
      // contract.CalculateCRDName: the lowercase plural of the kind, then the group.
      expect(document.metadata.name).toBe(`${kind.toLowerCase()}s.infrastructure.cluster.x-k8s.io`);
      expect(document.spec.names.listKind).toBe(`${kind}List`);
      expect(document.spec.scope).toBe("Namespaced");
      expect(document.spec.versions.map((version) => version.name)).toEqual(["v1alpha1"]);
    }
  });

  it("lists addresses of the contract's types, failure domains and conditions as maps keyed by name and type", () => {
    expect(nodeAt("GpuMachine", "status.addresses[].type")?.enum).toEqual([
      "Hostname",
      "ExternalIP",
      "InternalIP",
      "ExternalDNS",
      "InternalDNS",
    ]);
    expect(nodeAt("GpuCluster", "status.failureDomains")).toMatchObject({
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["name"],
      maxItems: 100,
    });
    for (const kind of ["GpuMachine", "GpuCluster"]) {
      expect(nodeAt(kind, "status.conditions")).toMatchObject({ "x-kubernetes-list-map-keys": ["type"] });
      expect(nodeAt(kind, "status.conditions")?.description).toContain("Paused");
    }
  });

  it("takes a GpuMachine as Cluster API makes it from a template, the VM type a plain string", () => {
    const validator = createManifestValidator();
    const made = machine({ type: "h200-141gb.8x", sshPublicKey: KEY, locations: ["us-east1-a"] });
    expect(validator.check(made)).toEqual({ kind: "GpuMachine", problems: [] });
    expect(GpuMachine.parse(made).spec.type).toBe("h200-141gb.8x");
    const provisioned = machine({ type: "a40.1x", sshPublicKey: KEY, providerID: "gpucloud://0b6f-vm" });
    expect(validator.check(provisioned).problems).toEqual([]);
  });

  it("refuses a VM type that is not <family>.<GPUs>x, a foreign providerID and two SSH keys, in words", () => {
    const validator = createManifestValidator();
    expect(validator.check(machine({ type: "8 GPUs", sshPublicKey: KEY })).problems).toContain(
      "rules: /spec/type must be a VM type such as a100-80gb.8x: <family>.<GPUs>x",
    );
    expect(
      validator.check(machine({ type: "a40.1x", sshPublicKey: KEY, providerID: "aws:///i-1" })).problems,
    ).toContain("rules: /spec/providerID must be gpucloud://<vm id>, as the operator sets it");
    const both = machine({ type: "a40.1x", sshPublicKey: KEY, sshPublicKeySecretRef: { name: "k", key: "pub" } });
    expect(validator.check(both).problems).toContain(
      "rules: /spec/sshPublicKeySecretRef set sshPublicKey or sshPublicKeySecretRef, not both",
    );
    expect(validator.check(machine({ type: "a40.1x" })).problems).toContain(
      "rules: /spec/sshPublicKey set sshPublicKey or sshPublicKeySecretRef",
    );
    expect(validator.check({ apiVersion: INFRASTRUCTURE_API_VERSION, kind: "GpuThing" }).problems).toEqual([
      "kind GpuThing is not served by infrastructure.cluster.x-k8s.io/v1alpha1",
    ]);
  });

  it("makes machines immutable but for the providerID set once, and a template's spec.template immutable", () => {
    const messages = (kind: string, path: "spec" | "spec.template" = "spec") =>
      ((nodeAt(kind, path)?.["x-kubernetes-validations"] as { message: string }[] | undefined) ?? []).map(
        (rule) => rule.message,
      );
    expect(messages("GpuMachine")).toEqual(
      expect.arrayContaining([
        "providerID cannot change once set: it names the machine's VM",
        "type is immutable: Cluster API replaces machines instead of changing them: point the MachineDeployment at a new GpuMachineTemplate",
        "disks is immutable: Cluster API replaces machines instead of changing them: point the MachineDeployment at a new GpuMachineTemplate",
      ]),
    );
    const templateRules = nodeAt("GpuMachineTemplate", "spec")?.["x-kubernetes-validations"];
    expect(templateRules).toEqual([
      expect.objectContaining({
        rule: "self.template == oldSelf.template",
        message: expect.stringMatching(/^spec\.template is immutable/),
      }),
    ]);
    expect(messages("GpuCluster")).toEqual(
      expect.arrayContaining([
        "controlPlaneEndpoint cannot change once set (Cluster API copies it to the Cluster, where it is fixed)",
      ]),
    );
  });

  it("a GpuCluster: locations are required, firewall rules need a network, one of network id and cidr", () => {
    const cluster = (spec: Record<string, unknown>) =>
      GpuCluster.safeParse({ metadata: { name: "c", namespace: "d" }, spec });
    expect(cluster({ locations: ["us-east1-a"] }).success).toBe(true);
    expect(cluster({}).success).toBe(false);
    const rule = {
      name: "apiserver",
      direction: "ingress",
      action: "allow",
      protocols: ["tcp"],
      destinationPorts: ["6443"],
    };
    expect(cluster({ locations: ["us-east1-a"], firewallRules: [rule] }).error?.issues[0]?.message).toBe(
      "firewallRules need a network: set network.id (an existing network) or network.cidr",
    );
    expect(cluster({ locations: ["us-east1-a"], network: { id: "n" }, firewallRules: [rule] }).success).toBe(true);
    expect(cluster({ locations: ["us-east1-a"], network: { id: "n", cidr: "10.0.0.0/16" } }).success).toBe(false);
    expect(cluster({ locations: ["us-east1-a"], network: { id: "n" }, firewallRules: [rule, rule] }).success).toBe(
      false,
    );
    const parsed = GpuCluster.parse({ metadata: { name: "c", namespace: "d" }, spec: { locations: ["us-east1-a"] } });
    expect(parsed.spec.credentialsRef).toEqual({ name: "gpucloud-credentials" });
  });

  it("a template's status holds the cluster-autoscaler's capacity and node info", () => {
    const template = GpuMachineTemplate.parse({
      apiVersion: INFRASTRUCTURE_API_VERSION,
      kind: "GpuMachineTemplate",
      metadata: { name: "t", namespace: "d" },
      spec: { template: { spec: { type: "a100-80gb.8x", sshPublicKey: KEY } } },
      status: {
        capacity: { cpu: "96", memory: "1800Gi", "nvidia.com/gpu": "8" },
        nodeInfo: { architecture: "amd64", operatingSystem: "linux" },
      },
    });
    expect(template.status?.capacity?.["nvidia.com/gpu"]).toBe("8");
    const bad = GpuMachineTemplate.safeParse({ ...template, status: { capacity: { cpu: "lots" } } });
    expect(bad.success).toBe(false);
  });

  it("docs/cluster-api.md's contract table names every contract field", async () => {
    const doc = await readFile(join(ROOT, "docs/cluster-api.md"), "utf8");
    for (const [kind, path] of CONTRACT_FIELDS) {
      expect(doc, `${kind} ${path}`).toMatch(new RegExp(`\\| ${kind} \\| \`${path.replace(/[[\].]/g, "\\$&")}\``));
    }
  });
});
