// A hostile or careless tenant against the operator (issue #28, cases 1–5), through the real runtime on the
// Kubernetes API test double: namespaces sharing the platform's default credentials, Observe objects switched to
// Manage, status edits, Secrets changed or left unlabelled, connection details named like credentials, and a
// cloud whose reads lag its creates. Whatever they do, an object never touches a resource another object owns
// and nothing is created in an account the user did not name.
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterEach, describe, expect, it, vi } from "vitest";
import { GROUP, VERSION } from "../../src/api/common.ts";
import type { Operation, Vm } from "../../src/cloud/wire.ts";
import {
  condition,
  createIn,
  type Env,
  type ManagedView,
  NAMESPACE,
  readIn,
  reasonOf,
  startEnv,
  vmSpec,
  WATCHED,
  waitIn,
} from "./harness.ts";

const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

let env: Env | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** An operator whose default credentials (the simulator's project) serve every namespace without its own. */
async function platform(options: Parameters<typeof startEnv>[0] = {}): Promise<Env> {
  env = await startEnv({
    ...options,
    config: { credentialsSecret: { namespace: NAMESPACE, name: "gpucloud-credentials" }, ...options.config },
  });
  return env;
}

async function namespace(e: Env, name: string, labels?: Record<string, string>): Promise<void> {
  await e.core.createNamespace({ body: { metadata: { name, ...(labels ? { labels } : {}) } } }).catch(() => undefined);
}

const ref = (namespaceName: string, name: string) => ({
  group: GROUP,
  version: VERSION,
  plural: "gpuvms",
  namespace: namespaceName,
  name,
});

const ready = (o: ManagedView | undefined) => condition(o, "Ready")?.status === "True";
const message = (o: ManagedView | undefined) => condition(o, "Ready")?.message ?? "";

async function vmsIn(e: Env, apiKey: string, projectId: string): Promise<Vm[]> {
  const response = await fetch(`${e.sim.url}/projects/${projectId}/vms?limit=500`, {
    headers: { authorization: `Bearer ${apiKey}` },
  });
  return ((await response.json()) as { items: Vm[] }).items;
}

/** The names of the operations the cloud lists for a VM, oldest first. */
async function actionsOn(e: Env, id: string): Promise<string[]> {
  const { items } = await e.cloud<{ items: Operation[] }>(`vms/operations?resource_id=${id}`);
  return items.map((op) => op.metadata.operation_name).reverse();
}

async function secret(
  e: Env,
  namespaceName: string,
  name: string,
  data: Record<string, string>,
  labels?: Record<string, string>,
): Promise<void> {
  await e.core.createNamespacedSecret({
    namespace: namespaceName,
    body: { metadata: { name, ...(labels ? { labels } : {}) }, stringData: data },
  });
}

describe("takeover across namespaces (case 1)", () => {
  it("an Observe object switched to Manage never takes another namespace's VM, nor sees it", async () => {
    const e = await platform();
    await namespace(e, "team-a");
    await namespace(e, "team-b");
    // The attacker's object first, observing the name the victim will use.
    await createIn(e, "team-b", "GpuVm", "spy", vmSpec({ cloudName: "victim-vm", managementPolicy: "Observe" }));
    await waitIn(e, "team-b", "GpuVm", "spy", (o) => reasonOf(o) === "Observed");
    await createIn(e, "team-a", "GpuVm", "victim", vmSpec({ cloudName: "victim-vm" }));
    const victim = await waitIn(e, "team-a", "GpuVm", "victim", ready);
    const id = victim?.status?.id as string;

    // Observing another namespace's VM is refused, and nothing of it is shown.
    const spy = await waitIn(e, "team-b", "GpuVm", "spy", (o) => reasonOf(o) === "NotPermitted");
    expect(condition(spy, "Stalled")?.status).toBe("True");
    expect(spy?.status?.id).toBeUndefined();
    expect(spy?.status?.publicIP).toBeUndefined();

    // Switched to Manage (with only GpuVm edit rights): NameConflict, the victim untouched.
    await e.custom.patchNamespacedCustomObject(
      { ...ref("team-b", "spy"), body: { spec: { managementPolicy: "Manage", powerState: "Stopped" } } },
      MERGE,
    );
    const managing = await waitIn(e, "team-b", "GpuVm", "spy", (o) => reasonOf(o) === "NameConflict");
    expect(message(managing)).toContain("in another namespace");
    expect(message(managing)).not.toContain("victim");
    await e.custom.deleteNamespacedCustomObject(ref("team-b", "spy"));
    await waitIn(e, "team-b", "GpuVm", "spy", (o) => o === undefined);

    expect(await actionsOn(e, id)).toEqual(["CREATE"]);
    expect(ready(await readIn(e, "team-a", "GpuVm", "victim"))).toBe(true);
    expect((await vmsIn(e, e.sim.apiKey, e.sim.projectId)).filter((vm) => vm.id === id)).toHaveLength(1);
  });

  it("a status.id edited to another namespace's VM (a user with /status rights) changes, stops or deletes nothing of it", async () => {
    const e = await platform();
    await namespace(e, "team-a");
    await namespace(e, "team-b");
    await createIn(e, "team-a", "GpuVm", "victim", vmSpec());
    const id = (await waitIn(e, "team-a", "GpuVm", "victim", ready))?.status?.id as string;
    await createIn(e, "team-b", "GpuVm", "thief", vmSpec(), { "gpucloud.dev/paused": "true" });
    await waitIn(e, "team-b", "GpuVm", "thief", (o) => reasonOf(o) === "Paused");
    await e.custom.patchNamespacedCustomObjectStatus(
      { ...ref("team-b", "thief"), body: { status: { id, projectId: e.sim.projectId } } },
      MERGE,
    );
    await e.custom.patchNamespacedCustomObject(
      {
        ...ref("team-b", "thief"),
        body: { spec: { powerState: "Stopped" }, metadata: { annotations: { "gpucloud.dev/paused": null } } },
      },
      MERGE,
    );
    // It makes (and stops) a VM of its own; the victim's is never its.
    const thief = await waitIn(e, "team-b", "GpuVm", "thief", (o) => ready(o) && o?.status?.id !== id, 15_000);
    await e.custom.deleteNamespacedCustomObject(ref("team-b", "thief"));
    await waitIn(e, "team-b", "GpuVm", "thief", (o) => o === undefined, 15_000);
    expect(await actionsOn(e, id)).toEqual(["CREATE"]);
    expect(ready(await readIn(e, "team-a", "GpuVm", "victim"))).toBe(true);
    const remaining = (await vmsIn(e, e.sim.apiKey, e.sim.projectId)).map((vm) => vm.id);
    expect(remaining).toContain(id);
    expect(remaining).not.toContain(thief?.status?.id);
  });
});

describe("credentials (cases 2–4)", () => {
  it("a Secret whose projectId changes under a VM stalls AccountChanged: nothing is created in the new project", async () => {
    const e = await platform();
    await namespace(e, "team-c");
    const other = (await e.admin("POST", "/projects", { name: "other" })) as { project_id: string; api_key: string };
    const own = { apiKey: e.sim.apiKey, projectId: e.sim.projectId, apiUrl: e.sim.url };
    await secret(e, "team-c", "gpucloud-credentials", own, WATCHED);
    await createIn(e, "team-c", "GpuVm", "trainer", vmSpec());
    const id = (await waitIn(e, "team-c", "GpuVm", "trainer", ready))?.status?.id as string;

    await e.core.patchNamespacedSecret(
      {
        namespace: "team-c",
        name: "gpucloud-credentials",
        body: { stringData: { apiKey: other.api_key, projectId: other.project_id } },
      },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    const moved = await waitIn(e, "team-c", "GpuVm", "trainer", (o) => reasonOf(o) === "AccountChanged");
    expect(condition(moved, "Stalled")?.status).toBe("True");
    expect(message(moved)).toContain(`project ${e.sim.projectId}`);
    expect(message(moved)).toContain(`project ${other.project_id}`);
    // A change of spec meanwhile creates nothing either.
    await e.custom.patchNamespacedCustomObject(
      { ...ref("team-c", "trainer"), body: { spec: { powerState: "Stopped" } } },
      MERGE,
    );
    await waitIn(
      e,
      "team-c",
      "GpuVm",
      "trainer",
      (o) => o?.status?.observedGeneration === 2 && reasonOf(o) === "AccountChanged",
    );
    expect(await vmsIn(e, other.api_key, other.project_id)).toEqual([]);
    expect(await actionsOn(e, id)).toEqual(["CREATE"]);

    // Restored: the same VM again, nothing re-created.
    await e.core.patchNamespacedSecret(
      { namespace: "team-c", name: "gpucloud-credentials", body: { stringData: own } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    const back = await waitIn(e, "team-c", "GpuVm", "trainer", (o) => reasonOf(o) === "Available", 15_000);
    expect(back?.status?.id).toBe(id);
    expect(await vmsIn(e, other.api_key, other.project_id)).toEqual([]);
  });

  it("an unlabelled credentials Secret is never replaced by the platform's: the object stalls with the label command", async () => {
    const e = await platform();
    await namespace(e, "team-d");
    const tenant = (await e.admin("POST", "/projects", { name: "team-d" })) as { project_id: string; api_key: string };
    await secret(e, "team-d", "gpucloud-credentials", {
      apiKey: tenant.api_key,
      projectId: tenant.project_id,
      apiUrl: e.sim.url,
    });
    await createIn(e, "team-d", "GpuVm", "trainer", vmSpec());
    const stalled = await waitIn(e, "team-d", "GpuVm", "trainer", (o) => reasonOf(o) === "CredentialsMissing");
    expect(message(stalled)).toContain("kubectl label secret -n team-d gpucloud-credentials gpucloud.dev/watch=true");
    // An explicit reference to another unlabelled Secret says the same for that one.
    await secret(e, "team-d", "team-creds", { apiKey: tenant.api_key, projectId: tenant.project_id });
    await createIn(e, "team-d", "GpuVm", "explicit", vmSpec({ credentialsRef: { name: "team-creds" } }));
    const explicit = await waitIn(e, "team-d", "GpuVm", "explicit", (o) => reasonOf(o) === "CredentialsMissing");
    expect(message(explicit)).toContain("kubectl label secret -n team-d team-creds gpucloud.dev/watch=true");
    // Nothing went to the platform's project meanwhile.
    const platformVms = (await vmsIn(e, e.sim.apiKey, e.sim.projectId)).map((vm) => vm.name);
    expect(platformVms.filter((name) => name.startsWith("team-d"))).toEqual([]);

    // Labelled as told: created in the tenant's own project.
    await e.core.patchNamespacedSecret(
      { namespace: "team-d", name: "gpucloud-credentials", body: { metadata: { labels: WATCHED } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    await waitIn(e, "team-d", "GpuVm", "trainer", ready, 15_000);
    expect((await vmsIn(e, tenant.api_key, tenant.project_id)).map((vm) => vm.name)).toHaveLength(1);
    expect((await vmsIn(e, e.sim.apiKey, e.sim.projectId)).filter((vm) => vm.name.startsWith("team-d"))).toEqual([]);
  });

  it("the default credentials serve only the namespaces --default-credentials-namespaces selects", async () => {
    const e = await platform({ config: { defaultCredentialsNamespaces: "gpucloud.dev/default-credentials=allowed" } });
    await namespace(e, "allowed-team", { "gpucloud.dev/default-credentials": "allowed" });
    await namespace(e, "other-team");
    await createIn(e, "allowed-team", "GpuVm", "vm", vmSpec());
    await createIn(e, "other-team", "GpuVm", "vm", vmSpec());
    await waitIn(e, "allowed-team", "GpuVm", "vm", ready);
    const refused = await waitIn(e, "other-team", "GpuVm", "vm", (o) => reasonOf(o) === "CredentialsMissing");
    expect(message(refused)).toContain("not offered to namespace other-team");
  });

  it("connection details are never written to a credentials Secret's name (case 4)", async () => {
    const e = await platform();
    await namespace(e, "team-e");
    // Refused by the API server (CEL): the default name and the object's own credentialsRef.
    const refusal = await createIn(
      e,
      "team-e",
      "GpuVm",
      "shadow",
      vmSpec({ connectionDetails: { secretName: "gpucloud-credentials" } }),
    ).then(
      () => "accepted",
      (error: { body?: string }) => String(error.body),
    );
    expect(refusal).toContain("connectionDetails.secretName must not be a credentials Secret");
    // Another object's credentials Secret (unknown to the API server's rule): refused when publishing.
    await secret(
      e,
      "team-e",
      "shared-creds",
      { apiKey: e.sim.apiKey, projectId: e.sim.projectId, apiUrl: e.sim.url },
      WATCHED,
    );
    await createIn(e, "team-e", "GpuVm", "user", vmSpec({ credentialsRef: { name: "shared-creds" } }));
    await waitIn(e, "team-e", "GpuVm", "user", ready);
    await e.core.deleteNamespacedSecret({ namespace: "team-e", name: "shared-creds" }).catch(() => undefined);
    await createIn(e, "team-e", "GpuVm", "publisher", vmSpec({ connectionDetails: { secretName: "shared-creds" } }));
    const publisher = await waitIn(e, "team-e", "GpuVm", "publisher", (o) => reasonOf(o) === "NameConflict", 15_000);
    expect(message(publisher)).toContain("is a credentials Secret name in this namespace");
    // The Secret being deleted is not replaced by connection details: the first object keeps its credentials' story.
    const user = await readIn(e, "team-e", "GpuVm", "user");
    expect(reasonOf(user)).not.toBe("InternalError");
  });
});

describe("a cloud whose reads lag its creates (case 5)", () => {
  const lagging = { simulator: { faults: { not_found_after_create_ms: 6000 } }, timing: { goneConfirmMs: 20_000 } };

  it("one POST, the same VM Ready once it shows: no second create, no NameConflict on its own VM", async () => {
    const e = await platform(lagging);
    await e.admin("DELETE", "/requests");
    await e.apply("GpuVm", "slow", vmSpec());
    // Ready may come from the create's operation (its answer carries the VM) before any read shows the VM.
    const done = await e.waitFor("GpuVm", "slow", (o) => ready(o), 20_000);
    // Once reads show it (the lag is 6 s), it is the one VM of that name, and there was one POST.
    await vi.waitFor(
      async () => {
        const vms = (await vmsIn(e, e.sim.apiKey, e.sim.projectId)).filter((vm) => vm.name === "default-slow");
        expect(vms.map((vm) => vm.id)).toEqual([done?.status?.id]);
      },
      { timeout: 15_000, interval: 500 },
    );
    const counts = ((await e.admin("GET", "/requests")) as { counts: Record<string, number> }).counts;
    const posts = Object.entries(counts).filter(([route]) => /^POST \S*\/projects\/:projectId\/vms$/.test(route));
    expect(posts.reduce((sum, [, n]) => sum + n, 0)).toBe(1);
    expect(ready(await e.get("GpuVm", "slow"))).toBe(true);
  });

  it("an object deleted before its VM shows deletes the VM once it shows: nothing leaks", async () => {
    const e = await platform(lagging);
    const appliedAt = Date.now();
    await e.apply("GpuVm", "short-lived", vmSpec());
    const created = await e.waitFor("GpuVm", "short-lived", (o) => o?.status?.id !== undefined);
    await e.remove("GpuVm", "short-lived");
    await e.waitFor("GpuVm", "short-lived", (o) => o === undefined, 30_000);
    // Once every read shows what exists (the lag is over), the VM is not there.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, appliedAt + 7000 - Date.now())));
    const left = (await vmsIn(e, e.sim.apiKey, e.sim.projectId)).filter((vm) => vm.id === created?.status?.id);
    expect(left).toEqual([]);
  }, 40_000);
});
