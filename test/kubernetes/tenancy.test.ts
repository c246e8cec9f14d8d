// A hostile tenant on the real kube-apiserver with RBAC (issue #28): a ServiceAccount with the `edit` role in its
// own namespace and rights on GpuVms there (their /status included), nothing else, against the operator running
// as deploy/ installs it. With what it may write, it tries to take another namespace's VM (Observe, then Manage;
// status.id edits) and to get its objects created with the platform's credentials (an unlabelled Secret naming
// its own API URL). It can neither touch the claims nor the other namespace's VM, and nothing is spent for it.
import { execFile } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { type CustomObject, eventually, listCloud, type Playground, startPlayground } from "../e2e/harness.ts";
import { kubeBin } from "./shared.ts";

const run = promisify(execFile);

let pg: Playground;
let tenantKubeconfig = "";

/** kubectl as the tenant (its ServiceAccount token); rejects with kubectl's stderr. */
async function asTenant(...args: string[]): Promise<string> {
  try {
    const { stdout } = await run(kubeBin("kubectl"), ["--kubeconfig", tenantKubeconfig, ...args], { timeout: 60_000 });
    return stdout;
  } catch (error) {
    throw new Error(String((error as { stderr?: string }).stderr ?? error), { cause: error });
  }
}

/** `kubectl auth can-i` as the tenant: yes or no (kubectl exits 1 on no). */
async function canI(verb: string, resource: string, namespace: string): Promise<string> {
  const args = ["--kubeconfig", tenantKubeconfig, "auth", "can-i", verb, resource, "-n", namespace];
  const answer = await run(kubeBin("kubectl"), args).catch((error: { stdout?: string }) => ({
    stdout: error.stdout ?? "",
  }));
  return answer.stdout.trim();
}

async function vm(namespace: string, name: string): Promise<CustomObject | undefined> {
  const text = await pg.kubectl("get", "gpuvm", name, "-n", namespace, "-o", "json", "--ignore-not-found");
  return text.trim() === "" ? undefined : (JSON.parse(text) as CustomObject);
}

const reason = (object: CustomObject | undefined) =>
  object?.status?.conditions?.find((condition) => condition.type === "Ready")?.reason;

async function apply(file: string, yaml: string, as: (...args: string[]) => Promise<string>): Promise<void> {
  const manifest = path.join(pg.stateDir, file);
  await writeFile(manifest, yaml);
  await as("apply", "-f", manifest);
}

const gpuVm = (namespace: string, name: string, extra: string[]) =>
  [
    "apiVersion: gpucloud.dev/v1alpha1",
    "kind: GpuVm",
    "metadata:",
    `  name: ${name}`,
    `  namespace: ${namespace}`,
    "spec:",
    "  type: a100.1x",
    "  location: us-east1-a",
    "  image: ubuntu22.04",
    "  sshPublicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ0ZXN0a2V5Zm9ydGhlb3BlcmF0b3J0ZXN0cw tenant@example",
    ...extra.map((line) => `  ${line}`),
    "",
  ].join("\n");

beforeAll(async () => {
  pg = await startPlayground({ latencyMs: 0, kube: "real", kubectl: kubeBin("kubectl") });
  for (const namespace of ["team-a", "team-b"]) await pg.kubectl("create", "namespace", namespace);
  // The tenant: what `edit` gives in team-b (Secrets, ConfigMaps; written out, since the playground's control plane
  // runs no role aggregation) and GpuVms and GpuNetworks there, their status included.
  await pg.kubectl("create", "serviceaccount", "tenant", "-n", "team-b");
  await pg.kubectl(
    "create",
    "role",
    "gpuvm-editor",
    "-n",
    "team-b",
    "--verb=get,list,watch,create,update,patch,delete",
    "--resource=secrets,configmaps,gpuvms,gpuvms/status,gpunetworks",
  );
  await pg.kubectl(
    "create",
    "rolebinding",
    "tenant-gpuvms",
    "-n",
    "team-b",
    "--role=gpuvm-editor",
    "--serviceaccount=team-b:tenant",
  );
  const token = (await pg.kubectl("create", "token", "tenant", "-n", "team-b", "--duration=1h")).trim();
  const admin = parse(await readFile(pg.kubeconfigPath, "utf8")) as {
    users: { name: string; user: Record<string, unknown> }[];
  };
  for (const user of admin.users) user.user = { token };
  tenantKubeconfig = path.join(pg.stateDir, "tenant.kubeconfig");
  await writeFile(tenantKubeconfig, stringify(admin), { mode: 0o600 });
}, 240_000);

afterAll(async () => {
  await pg?.close();
});

describe("a tenant with edit rights in its namespace only", () => {
  it("cannot read or write the claims, and cannot take, stop or delete another namespace's VM", async () => {
    expect(await canI("create", "gpucloudclaims", "gpuvm-system")).toBe("no");
    expect(await canI("patch", "gpucloudclaims", "team-b")).toBe("no");
    expect(await canI("patch", "gpuvms/status", "team-b")).toBe("yes");

    // The tenant observes the name the victim will use, first.
    await apply("spy.yaml", gpuVm("team-b", "spy", ["cloudName: victim-vm", "managementPolicy: Observe"]), asTenant);
    await apply("victim.yaml", gpuVm("team-a", "victim", ["cloudName: victim-vm"]), (...args) => pg.kubectl(...args));
    const victim = await eventually("the victim Ready", async () => {
      const object = await vm("team-a", "victim");
      return reason(object) === "Available" ? object : undefined;
    });
    const id = victim.status?.id as string;
    await eventually("the spy refused", async () =>
      reason(await vm("team-b", "spy")) === "NotPermitted" ? true : undefined,
    );
    expect((await vm("team-b", "spy"))?.status?.publicIP).toBeUndefined();

    // Switched to Manage and told to stop; a second object with the victim's id put in its status.
    await asTenant(
      "patch",
      "gpuvm",
      "spy",
      "-n",
      "team-b",
      "--type=merge",
      "-p",
      '{"spec":{"managementPolicy":"Manage","powerState":"Stopped"}}',
    );
    await eventually("the spy in conflict", async () =>
      reason(await vm("team-b", "spy")) === "NameConflict" ? true : undefined,
    );
    await apply("thief.yaml", gpuVm("team-b", "thief", ["powerState: Stopped"]), asTenant);
    await asTenant(
      "patch",
      "gpuvm",
      "thief",
      "-n",
      "team-b",
      "--subresource=status",
      "--type=merge",
      "-p",
      JSON.stringify({ status: { id } }),
    );
    await eventually("the thief with a VM of its own", async () => {
      const thief = await vm("team-b", "thief");
      return reason(thief) === "Available" && thief?.status?.id !== id ? true : undefined;
    });
    await asTenant("delete", "gpuvm", "spy", "thief", "-n", "team-b", "--timeout=120s");

    const operations = (await pg.cloudGet(`/projects/${pg.cloud.projectId}/vms/operations?resource_id=${id}`)) as {
      items: { metadata: { operation_name: string } }[];
    };
    expect(operations.items.map((op) => op.metadata.operation_name)).toEqual(["CREATE"]);
    expect(reason(await vm("team-a", "victim"))).toBe("Available");
    expect((await listCloud(pg, "vms")).filter((item) => item.id === id)).toHaveLength(1);
  });

  it("an unlabelled credentials Secret naming its own API URL gets nothing created, with the platform's account either", async () => {
    const secret = path.join(pg.stateDir, "hostile-secret.yaml");
    await writeFile(
      secret,
      [
        "apiVersion: v1",
        "kind: Secret",
        "metadata:",
        "  name: gpucloud-credentials",
        "  namespace: team-b",
        "stringData:",
        "  apiKey: tenant-key",
        "  projectId: tenant-project",
        "  apiUrl: http://127.0.0.1:1/v0.1",
        "",
      ].join("\n"),
    );
    await asTenant("apply", "-f", secret);
    await apply(
      "net.yaml",
      [
        "apiVersion: gpucloud.dev/v1alpha1",
        "kind: GpuNetwork",
        "metadata:",
        "  name: net",
        "  namespace: team-b",
        "spec: {}",
        "",
      ].join("\n"),
      asTenant,
    );
    const message = await eventually("the network stalled with the label command", async () => {
      const text = await pg.kubectl("get", "gpunetwork", "net", "-n", "team-b", "-o", "json");
      const network = JSON.parse(text) as CustomObject;
      const ready = network.status?.conditions?.find((condition) => condition.type === "Ready");
      return ready?.reason === "CredentialsMissing" ? ready.message : undefined;
    });
    expect(message).toContain("kubectl label secret -n team-b gpucloud-credentials gpucloud.dev/watch=true");
    const networks = await listCloud(pg, "vpc/networks");
    expect(networks.map((network) => network.name).filter((name) => String(name).startsWith("team-b"))).toEqual([]);
    await asTenant("delete", "gpunetwork", "net", "-n", "team-b", "--timeout=60s");
  });
  it("its Secret switched to another project under a VM stalls AccountChanged: nothing is made in either (case 2)", async () => {
    const admin = `${new URL(pg.cloud.url).origin}/_sim`;
    const made = await fetch(`${admin}/projects`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "tenant-elsewhere" }),
    });
    const other = (await made.json()) as { project_id: string; api_key: string };
    const own = { apiKey: pg.cloud.apiKey, projectId: pg.cloud.projectId, apiUrl: pg.cloud.url };
    await asTenant(
      "create",
      "secret",
      "generic",
      "team-creds",
      "-n",
      "team-b",
      ...Object.entries(own).map(([k, v]) => `--from-literal=${k}=${v}`),
    );
    await asTenant("label", "secret", "team-creds", "-n", "team-b", "gpucloud.dev/watch=true");
    await apply("own.yaml", gpuVm("team-b", "own", ["credentialsRef: {name: team-creds}"]), asTenant);
    const id = await eventually("its VM Ready", async () => {
      const object = await vm("team-b", "own");
      return reason(object) === "Available" ? (object?.status?.id as string) : undefined;
    });
    const patch = { stringData: { apiKey: other.api_key, projectId: other.project_id } };
    await asTenant("patch", "secret", "team-creds", "-n", "team-b", "--type=merge", "-p", JSON.stringify(patch));
    await eventually("AccountChanged", async () =>
      reason(await vm("team-b", "own")) === "AccountChanged" ? true : undefined,
    );
    const theirs = await fetch(`${pg.cloud.url}/projects/${other.project_id}/vms`, {
      headers: { authorization: `Bearer ${other.api_key}` },
    });
    expect(((await theirs.json()) as { items: unknown[] }).items).toEqual([]);
    expect((await listCloud(pg, "vms")).filter((item) => item.id === id)).toHaveLength(1);
    // Letting it go keeps the VM where it is.
    await asTenant(
      "patch",
      "gpuvm",
      "own",
      "-n",
      "team-b",
      "--type=merge",
      "-p",
      '{"spec":{"deletionPolicy":"Orphan"}}',
    );
    await asTenant("delete", "gpuvm", "own", "-n", "team-b", "--timeout=60s");
    expect((await listCloud(pg, "vms")).filter((item) => item.id === id)).toHaveLength(1);
  });

  it("cannot make the operator write connection details over a credentials Secret (case 4)", async () => {
    const refused = await apply(
      "shadow.yaml",
      gpuVm("team-b", "shadow", ["connectionDetails: {secretName: gpucloud-credentials}"]),
      asTenant,
    ).then(
      () => "accepted",
      (error: Error) => error.message,
    );
    expect(refused).toContain("connectionDetails.secretName must not be a credentials Secret");
  });
});
