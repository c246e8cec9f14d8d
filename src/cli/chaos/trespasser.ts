// The hostile tenant of a chaos run (issue #28, cases 1–4): with only what a tenant may write in its own
// namespaces, it tries, while the chaos goes on, to take the healthy tenants' VMs (an Observe object of a VM's
// cloud name switched to Manage; a status.id edited to a VM's id), to make its objects re-create their VMs in
// another project (its Secret switched there and back), to get its objects made with the platform's default
// credentials (an unlabelled Secret), and to have connection details written over credentials. The checks: the
// victims' VMs see nothing but their CREATE, nothing is made in the other project, the unlabelled namespace's
// objects get nothing made, and every trespasser object says why it waits.
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { GROUP, SECRET_WATCH_LABEL } from "../../api/common.ts";
import { eventually } from "../../util/eventually.ts";
import type { Random } from "./random.ts";
import type { Rig } from "./rig.ts";
import { isReady, type ObjectSpec, vmSpecOf } from "./workload.ts";

/**
 * The trespasser's namespaces: `attacks` (its own Secret for the healthy tenants' project: spies and thieves),
 * `own` (one VM under a Secret it switches to another project and back), `unlabelled` (an unlabelled Secret).
 */
export const TRESPASS_NAMESPACES = { attacks: "trespass", own: "trespassown", unlabelled: "trespasslab" } as const;

const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

export interface TrespassCheck {
  name: string;
  ok: boolean;
  detail: string;
}

interface Victim {
  object: ObjectSpec;
  id: string;
  cloudName: string;
}

export class Trespasser {
  readonly #rig: Rig;
  readonly #random: Random;
  readonly #say: (line: string) => void;
  readonly #log: string[] = [];
  #victims: Victim[] = [];
  #elsewhere: { projectId: string; apiKey: string } = { projectId: "", apiKey: "" };
  #moved = false;
  #serial = 0;
  #ownId: string | undefined;

  constructor(rig: Rig, random: Random, say: (line: string) => void) {
    this.#rig = rig;
    this.#random = random;
    this.#say = say;
  }

  /** What it did, one line per move (for the report). */
  get moves(): readonly string[] {
    return this.#log;
  }

  /** Its namespaces, its Secrets, a VM of its own; the victims are Ready healthy VMs nobody else changes. */
  async prepare(victims: readonly ObjectSpec[]): Promise<void> {
    const { core } = this.#rig;
    for (const namespace of Object.values(TRESPASS_NAMESPACES)) {
      await core.createNamespace({ body: { metadata: { name: namespace } } });
    }
    const made = (await this.#rig.admin("POST", "/projects", { name: "trespass-elsewhere" })) as {
      project_id: string;
      api_key: string;
    };
    this.#elsewhere = { projectId: made.project_id, apiKey: made.api_key };
    await this.#ownSecret(false, true);
    const { sim } = this.#rig;
    await core.createNamespacedSecret({
      namespace: TRESPASS_NAMESPACES.attacks,
      body: {
        metadata: { name: "gpucloud-credentials", labels: { [SECRET_WATCH_LABEL]: "true" } },
        stringData: { apiKey: sim.apiKey, projectId: sim.projectId, apiUrl: sim.url },
      },
    });
    // Unlabelled: never read, and never replaced by the operator's default Secret.
    await core.createNamespacedSecret({
      namespace: TRESPASS_NAMESPACES.unlabelled,
      body: {
        metadata: { name: "gpucloud-credentials" },
        stringData: { apiKey: made.api_key, projectId: made.project_id, apiUrl: this.#rig.sim.url },
      },
    });
    const own: ObjectSpec = {
      kind: "GpuVm",
      namespace: TRESPASS_NAMESPACES.own,
      name: "own",
      spec: vmSpecOf("a40.1x"),
    };
    await this.#rig.apply(own);
    await this.#rig.apply({ kind: "GpuNetwork", namespace: TRESPASS_NAMESPACES.unlabelled, name: "net", spec: {} });
    // Its VM exists before its Secret ever moves: the move must never make a second one elsewhere.
    this.#ownId = await eventually(
      "the trespasser's own VM",
      async () => {
        const live = await this.#rig.read(own);
        return isReady(live) ? live.status?.id : undefined;
      },
      120_000,
      250,
    );
    this.#victims = [];
    for (const object of victims) {
      const live = await this.#rig.read(object);
      const id = live.status?.id;
      const cloudName = (live.status as { cloudName?: string } | undefined)?.cloudName;
      if (id !== undefined && cloudName !== undefined) this.#victims.push({ object, id, cloudName });
    }
    this.#say(`trespasser: ${this.#victims.length} victims, its own project elsewhere ${made.project_id}`);
  }

  /** One move, at random. */
  async move(): Promise<void> {
    const victim = this.#victims.length > 0 ? this.#random.pick(this.#victims) : undefined;
    const serial = ++this.#serial;
    const roll = this.#random.next();
    try {
      if (victim !== undefined && roll < 0.3) await this.#observeThenManage(victim, serial);
      else if (victim !== undefined && roll < 0.6) await this.#editStatus(victim, serial);
      else if (roll < 0.85) {
        this.#moved = !this.#moved;
        this.#log.push(`its Secret names ${this.#moved ? "another project" : "its own again"}`);
        await this.#ownSecret(this.#moved, false);
      } else await this.#shadowCredentials(serial);
    } catch (error) {
      this.#log.push(`(move ${serial} refused: ${String(error).slice(0, 80)})`);
    }
  }

  /** Its Secret back to its own project (before the checks and the deletion). */
  async restore(): Promise<void> {
    if (this.#moved) await this.#ownSecret(false, false);
    this.#moved = false;
  }

  async #ownSecret(elsewhere: boolean, create: boolean): Promise<void> {
    const { sim, core } = this.#rig;
    const stringData = elsewhere
      ? { apiKey: this.#elsewhere.apiKey, projectId: this.#elsewhere.projectId, apiUrl: sim.url }
      : { apiKey: sim.apiKey, projectId: sim.projectId, apiUrl: sim.url };
    const namespace = TRESPASS_NAMESPACES.own;
    if (create) {
      await core.createNamespacedSecret({
        namespace,
        body: { metadata: { name: "gpucloud-credentials", labels: { [SECRET_WATCH_LABEL]: "true" } }, stringData },
      });
      return;
    }
    await core.patchNamespacedSecret({ namespace, name: "gpucloud-credentials", body: { stringData } }, MERGE);
  }

  /** Case 1: an Observe object of the victim's cloud name, then Manage with another power state. */
  async #observeThenManage(victim: Victim, serial: number): Promise<void> {
    const name = `spy-${serial}`;
    this.#log.push(`${name} observes ${victim.cloudName}, then manages it`);
    const spec = vmSpecOf("a40.2x", { cloudName: victim.cloudName, managementPolicy: "Observe" });
    await this.#rig.apply({ kind: "GpuVm", namespace: TRESPASS_NAMESPACES.attacks, name, spec });
    await new Promise((resolve) => setTimeout(resolve, 500));
    await this.#patch(name, { spec: { managementPolicy: "Manage", powerState: "Stopped" } });
  }

  /** Case 1 with /status rights: a paused object's status.id set to the victim's VM, then unpaused. */
  async #editStatus(victim: Victim, serial: number): Promise<void> {
    const name = `thief-${serial}`;
    this.#log.push(`${name} gets ${victim.object.namespace}/${victim.object.name}'s VM id in its status`);
    await this.#rig.apply({
      kind: "GpuVm",
      namespace: TRESPASS_NAMESPACES.attacks,
      name,
      spec: vmSpecOf("a40.2x", { powerState: "Stopped" }),
    });
    await this.#rig.custom.patchNamespacedCustomObjectStatus(
      { ...this.#ref(name), body: { status: { id: victim.id, projectId: this.#rig.sim.projectId } } },
      MERGE,
    );
  }

  /** Case 4: connection details named like the credentials (the API server refuses it). */
  async #shadowCredentials(serial: number): Promise<void> {
    const name = `shadow-${serial}`;
    this.#log.push(`${name} asks for its connection details in gpucloud-credentials`);
    const spec = vmSpecOf("a40.1x", { connectionDetails: { secretName: "gpucloud-credentials" } });
    await this.#rig.custom
      .createNamespacedCustomObject({
        group: GROUP,
        version: "v1alpha1",
        plural: "gpuvms",
        namespace: TRESPASS_NAMESPACES.attacks,
        body: { apiVersion: `${GROUP}/v1alpha1`, kind: "GpuVm", metadata: { name }, spec },
      })
      .then(
        () => this.#log.push(`${name} was ACCEPTED`),
        () => undefined,
      );
  }

  #ref(name: string) {
    return { group: GROUP, version: "v1alpha1", plural: "gpuvms", namespace: TRESPASS_NAMESPACES.attacks, name };
  }

  async #patch(name: string, body: Record<string, unknown>): Promise<void> {
    await this.#rig.custom.patchNamespacedCustomObject({ ...this.#ref(name), body }, MERGE);
  }

  /** After the chaos: what must hold whatever it did. */
  async check(): Promise<TrespassCheck[]> {
    const { cloud, sim } = this.#rig;
    const touched: string[] = [];
    for (const victim of this.#victims) {
      const operations = await cloud.operations.list(sim.projectId, "vm", { resource_id: victim.id });
      const names = operations.filter((op) => op.state !== "FAILED").map((op) => op.metadata.operation_name);
      if (names.some((name) => name !== "CREATE")) touched.push(`${victim.cloudName}: ${names.join(",")}`);
    }
    // The project its Secret switched to: nothing made there (its only object had its VM before), and nothing for
    // the unlabelled namespace either (whose Secret names that project), nor in the platform's.
    const elsewhere = async (route: string) => {
      const response = await fetch(`${sim.url}/projects/${this.#elsewhere.projectId}/${route}`, {
        headers: { authorization: `Bearer ${this.#elsewhere.apiKey}` },
      });
      return ((await response.json()) as { items?: { name: string }[] }).items ?? [];
    };
    const madeElsewhere = [...(await elsewhere("vms?limit=500")), ...(await elsewhere("vpc/networks"))].filter(
      (item) => item.name !== "default",
    );
    const networks = await cloud.networks.list(sim.projectId);
    const unlabelledMade = networks.filter((network) => network.name.startsWith(TRESPASS_NAMESPACES.unlabelled));
    const own = await this.#rig.read({ kind: "GpuVm", namespace: TRESPASS_NAMESPACES.own, name: "own" });
    const ownKept = own.status?.id === this.#ownId;
    const accepted = this.#log.filter((line) => line.endsWith("was ACCEPTED"));
    return [
      {
        name: "no resource changed by an object that does not own it",
        ok: touched.length === 0,
        detail: `${this.#victims.length} victims of ${this.#log.length} trespasser moves; touched: ${touched.join("; ") || "none"}`,
      },
      {
        name: "nothing made in an account the user did not name",
        ok: madeElsewhere.length === 0 && unlabelledMade.length === 0 && ownKept,
        detail: `${madeElsewhere.length} resources in the project its Secret switched to, ${unlabelledMade.length} networks for the unlabelled namespace, its VM ${ownKept ? "kept" : `changed from ${this.#ownId} to ${own.status?.id}`}`,
      },
      {
        name: "connection details never aimed at credentials",
        ok: accepted.length === 0,
        detail: accepted.length === 0 ? "every such object refused by the API server" : accepted.join("; "),
      },
    ];
  }
}
