// The GpuVm kind's client keeps no state between calls: what `resolve` found is handed back to `create` and
// `update` by the reconciler, so no call has to come before another, and one client serves any object.
import { describe, expect, it } from "vitest";
import { type GpuVmSpec, gpuVmKind } from "../../../src/api/gpu-vm.ts";
import type { CreateVmRequest, Operation } from "../../../src/cloud/wire.ts";
import type { CloudAccount } from "../../../src/controllers/accounts/cloud-account.ts";
import type { ManagedObject } from "../../../src/controllers/core/object-model.ts";
import { gpuVm } from "../../../src/controllers/kinds/gpu-vm.ts";
import type { KindDeps } from "../../../src/controllers/managed/external.ts";

const signal = new AbortController().signal;
const deps: KindDeps = { managed: () => undefined, listManaged: () => [], dataKey: () => undefined };

function vm(name: string, sshPublicKey: string): ManagedObject<GpuVmSpec> {
  const spec = gpuVmKind.specSchema.parse({
    type: "a100.1x",
    location: "us-east1-a",
    image: "ubuntu22.04",
    sshPublicKey,
  });
  return {
    apiVersion: gpuVmKind.apiVersion,
    kind: gpuVmKind.kind,
    metadata: {
      namespace: "ns",
      name,
      uid: `uid-${name}`,
      generation: 1,
      resourceVersion: "1",
      finalizers: [],
      annotations: {},
      labels: {},
    },
    spec,
    status: {},
  };
}

/** An account whose client records the create requests it is sent. */
function recordingAccount(bodies: CreateVmRequest[]): CloudAccount {
  const operation = (id: string): Operation => ({
    operation_id: `op-${id}`,
    state: "IN_PROGRESS",
    metadata: { operation_name: "CREATE", id, type: "vm" },
    result: null,
    started_at: "2026-11-28T12:00:00Z",
    completed_at: "",
  });
  const account = {
    projectId: "project-1",
    isAvailable: async () => true,
    client: {
      vms: {
        create: async (_projectId: string, body: CreateVmRequest) => {
          bodies.push(body);
          return operation(`vm-${body.name}`);
        },
      },
    },
  };
  return account as unknown as CloudAccount;
}

describe("the GpuVm kind's client", () => {
  it("creates each object with what its own resolve found, whatever was resolved in between", async () => {
    const bodies: CreateVmRequest[] = [];
    const client = gpuVm.external(recordingAccount(bodies), deps);
    const first = vm("first", "ssh-ed25519 AAAAfirst first@example");
    const second = vm("second", "ssh-ed25519 AAAAsecond second@example");
    const firstResolved = await client.resolve(first, "ns-first", signal);
    const secondResolved = await client.resolve(second, "ns-second", signal);
    if (firstResolved.type !== "ready" || secondResolved.type !== "ready") throw new Error("not resolved");

    const created = await client.create(
      first,
      firstResolved.resolved,
      { cloudName: "ns-first", location: "us-east1-a" },
      signal,
    );
    await client.create(second, secondResolved.resolved, { cloudName: "ns-second", location: "us-east1-a" }, signal);

    expect(bodies.map((body) => [body.name, body.ssh_public_key])).toEqual([
      ["ns-first", "ssh-ed25519 AAAAfirst first@example"],
      ["ns-second", "ssh-ed25519 AAAAsecond second@example"],
    ]);
    expect(created.type).toBe("started");
  });

  it("waits for a missing create input instead of failing on a call made out of order", async () => {
    const bodies: CreateVmRequest[] = [];
    const client = gpuVm.external(recordingAccount(bodies), deps);
    const keyless = vm("keyless", "ssh-ed25519 AAAAkey key@example");
    const refersToSecret: ManagedObject<GpuVmSpec> = {
      ...keyless,
      spec: { ...keyless.spec, sshPublicKey: undefined, sshPublicKeySecretRef: { name: "keys", key: "id.pub" } },
      // An existing VM (an id) resolves without its create inputs: they only serve a comparison then.
      status: { id: "vm-gone" },
    };
    const resolution = await client.resolve(refersToSecret, "ns-keyless", signal);
    if (resolution.type !== "ready") throw new Error("an existing VM resolves without its create inputs");

    // The VM vanished and is created again: the Secret's key is needed now, and nothing is sent without it.
    const answer = await client.create(
      refersToSecret,
      resolution.resolved,
      { cloudName: "ns-keyless", location: "us-east1-a" },
      signal,
    );

    expect(answer).toMatchObject({ type: "blocked", reason: "ReferenceNotFound" });
    expect(bodies).toEqual([]);
  });
});
