// ssh <gpuvm>: the GpuVm's status.sshDestination read through the kubeconfig (the Kubernetes API test double
// here), then ssh run with the arguments after `--`, or printed with --print; the failures and their exit codes.
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningKubeDouble, startKubeDouble } from "../../../src/kube-double/index.ts";
import { type Cli, startCli } from "./harness.ts";

const CRD_DIR = fileURLToPath(new URL("../../../crds", import.meta.url));
const GPUVMS = { group: "gpucloud.dev", version: "v1alpha1", plural: "gpuvms" };
let cli: Cli;
let double: RunningKubeDouble;
let kubeconfig: string;

async function createGpuVm(name: string, status?: Record<string, unknown>): Promise<void> {
  const config = new KubeConfig();
  config.loadFromFile(kubeconfig);
  const api = config.makeApiClient(CustomObjectsApi);
  const body = {
    apiVersion: "gpucloud.dev/v1alpha1",
    kind: "GpuVm",
    metadata: { name },
    spec: { type: "a40.1x", location: "us-east1-a", sshPublicKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey t@x" },
  };
  await api.createNamespacedCustomObject({ ...GPUVMS, namespace: "default", body });
  if (status === undefined) return;
  const response = await fetch(`${double.url}/apis/gpucloud.dev/v1alpha1/namespaces/default/gpuvms/${name}/status`, {
    method: "PATCH",
    headers: { "content-type": "application/merge-patch+json", authorization: "Bearer test" },
    body: JSON.stringify({ status }),
  });
  expect(response.status).toBe(200);
}

beforeAll(async () => {
  cli = await startCli();
  double = await startKubeDouble({ port: 0, crdDir: CRD_DIR });
  kubeconfig = path.join(cli.configDir, "kubeconfig");
  await double.writeKubeconfig(kubeconfig);
  await createGpuVm("trainer", {
    state: "STATE_RUNNING",
    sshDestination: "ubuntu@198.18.0.7",
    conditions: [
      { type: "Ready", status: "True", reason: "Available", lastTransitionTime: "2026-11-21T12:00:00Z", message: "" },
    ],
  });
  await createGpuVm("fresh");
});
afterAll(async () => {
  await double.close();
  await cli.close();
});

const run = (argv: string[], env: Record<string, string | undefined> = {}) =>
  cli.run(argv, { env: { KUBECONFIG: kubeconfig, ...env } });

describe("ssh", () => {
  it("--print prints the command; without it, ssh runs with the arguments after --", async () => {
    expect(await run(["ssh", "trainer", "--print"])).toMatchObject({ code: 0, stdout: "ssh ubuntu@198.18.0.7\n" });
    const printed = await run([
      "ssh",
      "trainer",
      "-n",
      "default",
      "--print",
      "--",
      "-L",
      "8888:localhost:8888",
      "echo hi",
    ]);
    expect(printed.stdout).toBe("ssh ubuntu@198.18.0.7 -L 8888:localhost:8888 'echo hi'\n");
    const ran = await run(["ssh", "trainer", "--", "-i", "/keys/gpu", "nvidia-smi"]);
    expect(ran).toMatchObject({ code: 0, stdout: "" });
    expect(ran.ran).toEqual([{ command: "ssh", args: ["ubuntu@198.18.0.7", "-i", "/keys/gpu", "nvidia-smi"] }]);
  });

  it("a GpuVm without an SSH destination yet: exit 1 saying how to wait", async () => {
    const result = await run(["ssh", "fresh", "--print"]);
    expect(result).toMatchObject({
      code: 1,
      stderr:
        "error: GpuVm default/fresh has no SSH destination yet: wait with 'kubectl wait --for=condition=Ready gvm/fresh -n default'\n",
    });
  });

  it("an unknown GpuVm is exit 4; an unreachable cluster exit 5; arguments after -- elsewhere exit 2", async () => {
    const missing = await run(["ssh", "ghost"]);
    expect(missing).toMatchObject({
      code: 4,
      stderr: "error: GpuVm default/ghost not found: 'kubectl get gvm -n default' lists them\n",
    });
    const other = await run(["ssh", "trainer", "-n", "team-b"]);
    expect(other.code).toBe(4);
    const dead = path.join(cli.configDir, "dead-kubeconfig");
    await writeFile(
      dead,
      [
        "apiVersion: v1",
        "kind: Config",
        "clusters: [{ name: c, cluster: { server: 'http://127.0.0.1:9' } }]",
        "users: [{ name: u, user: { token: t } }]",
        "contexts: [{ name: x, context: { cluster: c, user: u, namespace: ml } }]",
        "current-context: x",
      ].join("\n"),
    );
    const unreachable = await run(["ssh", "trainer"], { KUBECONFIG: dead });
    expect(unreachable.code).toBe(5);
    expect(unreachable.stderr).toMatch(/^error: cannot read GpuVm ml\/trainer from http:\/\/127\.0\.0\.1:9: /);
    expect((await run(["vms", "list", "--", "x"])).code).toBe(2);
  });
});
