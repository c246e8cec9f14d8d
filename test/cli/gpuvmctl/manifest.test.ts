// manifest vm|disk|network|rule: YAML checked against the CRD schema and rules (the same validator as
// check:manifests), errors as exit 2; credentials-secret from an API key or from the login.
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { createManifestValidator } from "../../../src/api/validate.ts";
import { type Cli, login, startCli } from "./harness.ts";

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey me@laptop";
let cli: Cli;
const validator = createManifestValidator();

beforeAll(async () => {
  cli = await startCli();
  await mkdir(path.join(cli.configDir, ".ssh"), { recursive: true });
  await writeFile(path.join(cli.configDir, ".ssh", "id_ed25519.pub"), `${KEY}\n`);
});
afterAll(async () => {
  await cli.close();
});

/** The YAML parses, and the validator that check:manifests uses accepts it. */
function accepted(yaml: string): Record<string, unknown> {
  const object = parse(yaml) as Record<string, unknown>;
  expect(validator.check(object).problems).toEqual([]);
  return object;
}

describe("manifest", () => {
  it("vm: locations to try in order, the key from ~/.ssh, disks, power state", async () => {
    const result = await cli.run([
      "manifest",
      "vm",
      "trainer",
      "-n",
      "ml",
      "--type",
      "a100-80gb.8x",
      "--location",
      "us-east1-a,eu-iceland1-a",
      "--image",
      "ubuntu22.04-nvidia-550",
      "--disk",
      "datasets",
      "--disk-id",
      "d-123:read-only",
      "--stopped",
      "--connection-secret",
      "trainer-ssh",
    ]);
    expect(result).toMatchObject({ code: 0, stderr: "" });
    expect(result.stdout).toMatchInlineSnapshot(`
      "apiVersion: gpucloud.dev/v1alpha1
      kind: GpuVm
      metadata:
        name: trainer
        namespace: ml
      spec:
        type: a100-80gb.8x
        locations:
          - us-east1-a
          - eu-iceland1-a
        image: ubuntu22.04-nvidia-550
        sshPublicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey me@laptop
        disks:
          - diskRef:
              name: datasets
          - id: d-123
            mode: read-only
        powerState: Stopped
        connectionDetails:
          secretName: trainer-ssh
      "
    `);
    accepted(result.stdout);
  });

  it("vm: one location, a key line, JSON", async () => {
    const result = await cli.run([
      "manifest",
      "vm",
      "nb",
      "--type",
      "a40.1x",
      "--location",
      "us-east1-a",
      "--ssh-key",
      KEY,
      "-o",
      "json",
    ]);
    const object = JSON.parse(result.stdout) as { spec: Record<string, unknown> };
    expect(object.spec).toEqual({ type: "a40.1x", location: "us-east1-a", sshPublicKey: KEY });
    expect(validator.check(object).problems).toEqual([]);
  });

  it("never folds a long value (an ed25519 key with a comment, an RSA key) over lines", async () => {
    const rsa = `ssh-rsa ${"A".repeat(540)}= someone@a-rather-long-host-name.example.com`;
    const result = await cli.run([
      "manifest",
      "vm",
      "nb",
      "--type",
      "a40.1x",
      "--location",
      "us-east1-a",
      "--ssh-key",
      rsa,
    ]);
    expect(result.stdout).toContain(`  sshPublicKey: ${rsa}\n`);
    expect((parse(result.stdout) as { spec: { sshPublicKey: string } }).spec.sshPublicKey).toBe(rsa);
  });

  it("disk, network and rule", async () => {
    const disk = await cli.run([
      "manifest",
      "disk",
      "datasets",
      "--size",
      "2TiB",
      "--location",
      "us-east1-a",
      "--type",
      "shared-volume",
    ]);
    expect(disk.stdout).toMatchInlineSnapshot(`
      "apiVersion: gpucloud.dev/v1alpha1
      kind: GpuDisk
      metadata:
        name: datasets
      spec:
        size: 2TiB
        location: us-east1-a
        type: shared-volume
      "
    `);
    accepted(disk.stdout);
    const network = await cli.run(["manifest", "network", "lab", "--cidr", "10.20.0.0/16", "--orphan"]);
    expect(network.stdout).toMatchInlineSnapshot(`
      "apiVersion: gpucloud.dev/v1alpha1
      kind: GpuNetwork
      metadata:
        name: lab
      spec:
        cidr: 10.20.0.0/16
        deletionPolicy: Orphan
      "
    `);
    accepted(network.stdout);
    const rule = await cli.run([
      "manifest",
      "rule",
      "ssh",
      "--network",
      "lab",
      "--source",
      "0.0.0.0/0",
      "--destination",
      "vm:trainer",
      "--port",
      "22",
      "--protocol",
      "tcp",
      "--credentials-secret",
      "team-cloud",
    ]);
    expect(rule.stdout).toMatchInlineSnapshot(`
      "apiVersion: gpucloud.dev/v1alpha1
      kind: GpuFirewallRule
      metadata:
        name: ssh
      spec:
        networkRef:
          name: lab
        direction: ingress
        action: allow
        protocols:
          - tcp
        sources:
          - cidr: 0.0.0.0/0
        destinations:
          - vmRef:
              name: trainer
        destinationPorts:
          - "22"
        credentialsRef:
          name: team-cloud
      "
    `);
    accepted(rule.stdout);
  });

  it("what the API server would refuse is exit 2, naming the field", async () => {
    const size = await cli.run(["manifest", "disk", "d", "--size", "20TiB", "--location", "us-east1-a"]);
    expect(size).toMatchObject({ code: 2, stdout: "" });
    expect(size.stderr).toContain(
      "error: the GpuDisk would be rejected: rules: /spec/size a persistent-ssd disk is at most 10TiB",
    );
    const cidr = await cli.run(["manifest", "network", "n", "--cidr", "10.0.0.0/33"]);
    expect(cidr.stderr).toContain("/spec/cidr");
    const name = await cli.run(["manifest", "network", "Not_A_Name"]);
    expect(name).toMatchObject({ code: 2, stderr: expect.stringContaining("/metadata/name") });
    const type = await cli.run(["manifest", "vm", "x", "--type", "h100.8x", "--location", "us-east1-a"]);
    expect(type).toMatchObject({ code: 2, stderr: expect.stringContaining("--type must be one of") });
    const noKey = await cli.run(["manifest", "vm", "x", "--type", "a40.1x", "--location", "a"], {
      env: { HOME: "/nonexistent" },
    });
    expect(noKey).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("pass --ssh-key <file|key> or --ssh-key-secret"),
    });
    const both = await cli.run(["manifest", "rule", "r", "--network", "a", "--network-id", "b"]);
    expect(both).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("exactly one of --network and --network-id"),
    });
    const noArg = await cli.run(["manifest", "disk", "--size", "1TiB", "--location", "x"]);
    expect(noArg).toMatchObject({ code: 2, stderr: expect.stringContaining("manifest disk: expected <name>") });
  });
});

describe("credentials-secret", () => {
  it("with an API key: apiKey, projectId, apiUrl", async () => {
    const result = await cli.run(["credentials-secret", "-n", "ml"], { env: { GPUCLOUD_API_KEY: cli.sim.apiKey } });
    expect(result.code).toBe(0);
    expect(parse(result.stdout)).toEqual({
      apiVersion: "v1",
      kind: "Secret",
      type: "Opaque",
      // Labelled: the operator reads only Secrets with gpucloud.dev/watch=true.
      metadata: { name: "gpucloud-credentials", namespace: "ml", labels: { "gpucloud.dev/watch": "true" } },
      stringData: { apiKey: cli.sim.apiKey, projectId: cli.sim.projectId, apiUrl: cli.sim.url },
    });
  });

  it("after login: email and the password, checked with one sign-in", async () => {
    await login(cli);
    const { email, password } = cli.sim.user;
    const result = await cli.run(["credentials-secret", "--name", "mine", "--password-stdin", "-o", "json"], {
      stdin: `${password}\n`,
    });
    expect(JSON.parse(result.stdout)).toMatchObject({
      metadata: { name: "mine" },
      stringData: { email, password, projectId: cli.sim.projectId, apiUrl: cli.sim.url },
    });
    const wrong = await cli.run(["credentials-secret", "--password-stdin"], { stdin: "wrong\n" });
    expect(wrong).toMatchObject({
      code: 3,
      stdout: "",
      stderr: expect.stringContaining(`that password does not sign ${email} in`),
    });
  });

  it("without any credential: exit 3", async () => {
    await cli.run(["logout"]);
    expect((await cli.run(["credentials-secret"])).code).toBe(3);
  });
});
