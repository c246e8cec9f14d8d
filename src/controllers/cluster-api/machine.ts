// The GpuMachine lifecycle. A GpuMachine owns a GpuVm of the same name (and the Secret holding its bootstrap
// data), never a cloud resource: the GpuVm controller does the cloud work, with its claim, crash-safe create,
// operations, deletion and fencing (ADR 0031). Order of a pass: read → invalid spec? → paused (its Cluster's
// spec.paused or its annotation: the GpuVm is paused too, once a create in flight has ended) → deleting (the GpuVm
// first, then our finalizer; nothing for clusterctl move) → the Machine owner, the Cluster → finalizer and
// clusterctl's block-move → the GpuVm: made once the cluster's infrastructure and the Machine's bootstrap data are
// there (never again once it had a VM), or mirrored: its VM id pinned in its spec.id, providerID, addresses,
// failure domain, provisioned, Ready.
import { CLUSTER_API_ANNOTATIONS } from "../../api/cluster-api.ts";
import { ANNOTATIONS, FINALIZER, REASONS } from "../../api/common.ts";
import { GpuMachineStatus } from "../../api/gpu-machine.ts";
import { VM_TYPES, vmTypeInfoOf } from "../../cloud/wire.ts";
import { keyOf, type Outcome, type ReconcileContext, type ReconcileRequest } from "../../runtime/index.ts";
import { providerIdOf } from "../../util/provider-id.ts";
import type { KubeAccess } from "../core/kube-access.ts";
import { parseManaged } from "../core/object-model.ts";
import { GuardedWrites } from "../core/own-writes.ts";
import { after, conflict, DONE, isReason, RELEASED, type Step, type Verdict, verdict } from "../core/verdict.ts";
import type { ClusterApiReads, OwnedAccess, SecretAccess, SelfPatch } from "./access.ts";
import {
  addressesOf,
  bootstrapSecretBody,
  bootstrapSecretNameOf,
  type GpuMachineObject,
  gpuVmBody,
  gpuVmNameOf,
  locationOfVm,
  MachineSpecSchema,
  placementOf,
  type VmPlacement,
} from "./machine-vm.ts";
import {
  ClusterView,
  clusterApiOwner,
  clusterNameOf,
  controlledBy,
  GpuClusterView,
  MachineView,
  MetadataView,
  type ObjectRefs,
  OwnedView,
  ownedReady,
  ownedReadyCondition,
  pauseOf,
  viewOf,
} from "./objects.ts";
import { type OwnerPassBase, ownerMetadata, pausedOwner, pinCloudId, releaseOwner } from "./owner-pass.ts";
import { reconcileInfrastructure } from "./status.ts";

export interface MachineReconcilerOptions {
  /** The GpuMachines (cache, guarded status and finalizer writes, Events). */
  kube: KubeAccess;
  patchSelf: SelfPatch;
  reads: ClusterApiReads;
  owned: OwnedAccess;
  secrets: SecretAccess;
  /** Requeue while waiting for something no watch announces (a cache behind a live read). Default 2 s. */
  shortMs?: number;
  now?: () => number;
}

/** What a machine's GpuVm is made from. */
interface CreateInputs {
  clusterName: string;
  dataSecretName: string;
  placement: VmPlacement;
  credentialsSecret: string;
}

/**
 * A placement chosen moments ago whose GpuVm the cache may not show yet (or is being made): counted when the next
 * one is placed.
 */
const CHOICE_MEMORY_MS = 60_000;

interface MachinePass extends OwnerPassBase<GpuMachineObject> {
  /** The owner references (the parsed metadata keeps neither them nor the labels). */
  owners: ObjectRefs;
  clusterName: string | undefined;
  cluster: ClusterView | undefined;
  vm: OwnedView | undefined;
}

export class GpuMachineReconciler {
  readonly #options: MachineReconcilerOptions;
  readonly #writes: GuardedWrites;
  readonly #now: () => number;
  readonly #shortMs: number;
  /** gpumachine key → the failure domain its GpuVm was just sent to, with when. */
  readonly #choices = new Map<string, { clusterKey: string; domain: string; at: number }>();

  constructor(options: MachineReconcilerOptions) {
    this.#options = options;
    this.#writes = new GuardedWrites(options.kube);
    this.#now = options.now ?? Date.now;
    this.#shortMs = options.shortMs ?? 2_000;
  }

  /** The registration's echo filter: our own writes start no pass. */
  isEcho(key: string, resourceVersion: string): boolean | Promise<boolean> {
    return this.#writes.isEcho(key, resourceVersion);
  }

  reconcile(request: ReconcileRequest, ctx: ReconcileContext): Promise<Outcome> {
    return reconcileInfrastructure(
      {
        services: { writes: this.#writes, kube: this.#options.kube, now: this.#now },
        shortMs: this.#shortMs,
        parse: (raw) => parseManaged(raw, MachineSpecSchema, GpuMachineStatus),
        forget: (key) => this.#choices.delete(key),
        passOf: (mr, raw, key, context) => this.#passOf(mr, raw, key, context),
        run: (pass) => this.#lifecycle(pass),
      },
      request,
      ctx,
    );
  }

  #passOf(mr: GpuMachineObject, raw: unknown, key: string, ctx: ReconcileContext): MachinePass {
    const meta = viewOf(MetadataView, raw)?.metadata;
    const clusterName = clusterNameOf(meta?.labels ?? {});
    const { namespace } = mr.metadata;
    return {
      mr,
      owners: meta?.ownerReferences ?? [],
      draft: structuredClone(mr.status),
      key,
      logger: ctx.logger,
      pause: { paused: false },
      clusterName,
      cluster:
        clusterName === undefined
          ? undefined
          : viewOf(ClusterView, this.#options.reads.cluster(namespace, clusterName)),
      vm: viewOf(OwnedView, this.#options.owned.get("GpuVm", namespace, gpuVmNameOf(mr))),
    };
  }

  async #lifecycle(pass: MachinePass): Promise<Step> {
    const { mr } = pass;
    const deleting = mr.metadata.deletionTimestamp !== undefined;
    if (deleting && !mr.metadata.finalizers.includes(FINALIZER)) return RELEASED;
    const pause = pauseOf(mr.metadata.annotations, pass.cluster);
    const owned =
      pass.vm !== undefined && controlledBy(pass.vm, mr.metadata.uid)
        ? [{ kind: "GpuVm" as const, object: pass.vm }]
        : [];
    const ownerServices = this.#ownerServices();
    if (pause !== undefined) return pausedOwner(ownerServices, pass, pause, owned, deleting);
    if (deleting) {
      if (CLUSTER_API_ANNOTATIONS.deleteForMove in mr.metadata.annotations) {
        return releaseOwner(ownerServices, pass, "moved by clusterctl: its GpuVm and VM stay for the new cluster");
      }
      return this.#delete(pass);
    }
    if (clusterApiOwner(pass.owners, "Machine") === undefined) {
      // No write until Cluster API's Machine controller has set it (as Cluster API's own providers do): the
      // MachineSet makes this object just before its Machine, and a status written in between makes that
      // controller's patch of the owner reference fail (or ours), for most of a hundred Machines made at once.
      return {
        ...verdict(REASONS.WaitingForDependency, "waiting for the Machine owner reference", DONE),
        silent: true,
      };
    }
    if (pass.clusterName === undefined || pass.cluster === undefined) {
      const which =
        pass.clusterName === undefined ? "its cluster.x-k8s.io/cluster-name label" : `Cluster ${pass.clusterName}`;
      return verdict(REASONS.WaitingForDependency, `waiting for ${which}`, DONE);
    }
    const metadata = await ownerMetadata(ownerServices, pass);
    if (metadata !== undefined) return metadata;
    const vm = pass.vm;
    if (vm === undefined) return this.#createVm(pass);
    if (!controlledBy(vm, mr.metadata.uid)) {
      const message = `GpuVm ${vm.metadata.name} exists and is not this GpuMachine's: delete or rename it`;
      return verdict(REASONS.NameConflict, message, after(this.#shortMs * 30), { stalled: true, event: "Warning" });
    }
    if (vm.metadata.annotations[ANNOTATIONS.paused] !== undefined) {
      // Paused with the machine, which is not paused any more.
      const written = await this.#options.owned.patch("GpuVm", vm.metadata.namespace, vm.metadata.name, {
        metadata: { annotations: { [ANNOTATIONS.paused]: null } },
      });
      if (written !== "written") return conflict();
    }
    return this.#mirror(pass, vm);
  }

  #ownerServices() {
    return {
      writes: this.#writes,
      kube: this.#options.kube,
      patchSelf: this.#options.patchSelf,
      owned: this.#options.owned,
      shortMs: this.#shortMs,
    };
  }

  /** The GpuVm's VM id pinned in its spec, providerID, the contract's fields and Ready, from the GpuVm. */
  async #mirror(pass: MachinePass, vm: OwnedView): Promise<Verdict> {
    const { mr, draft } = pass;
    draft.gpuVm = vm.metadata.name;
    if (vm.status.printableState !== undefined) draft.state = vm.status.printableState;
    const addresses = addressesOf(vm);
    if (addresses.length > 0) draft.addresses = addresses;
    if (vm.status.location !== undefined) draft.failureDomain = vm.status.location;
    const id = vm.status.id;
    if (!ownedReady(vm) || id === undefined) return waitingForVm(vm, mr.status);
    if (!(await pinCloudId(this.#options.owned, "GpuVm", vm))) return conflict();
    const providerID = providerIdOf(id);
    if (mr.spec.providerID === undefined) {
      const written = await this.#options.patchSelf(mr.metadata.namespace, mr.metadata.name, {
        metadata: { resourceVersion: mr.metadata.resourceVersion },
        spec: { providerID },
      });
      if (written.type !== "written") return conflict();
      this.#writes.advance(pass.key, mr.metadata.resourceVersion, written.resourceVersion);
      mr.metadata.resourceVersion = written.resourceVersion;
      // The status written next describes the spec with the providerID we set: its generation, not the one before
      // (else the next pass writes the status again only to move observedGeneration).
      if (written.generation !== undefined) mr.metadata.generation = written.generation;
    } else if (mr.spec.providerID !== providerID) {
      const message = `spec.providerID ${mr.spec.providerID} names another VM than GpuVm ${vm.metadata.name}'s (${id}): replace the Machine`;
      return verdict(REASONS.InvalidSpec, message, after(this.#shortMs * 300), { stalled: true, event: "Warning" });
    }
    draft.initialization = { provisioned: true };
    const where = vm.status.location !== undefined ? ` in ${vm.status.location}` : "";
    return verdict(REASONS.Available, `VM ${vm.status.printableState ?? "ready"}${where} (${providerID})`, DONE, {
      ready: true,
    });
  }

  /** No GpuVm in the cache: make it, unless this machine had one (its VM is never made twice). */
  async #createVm(pass: MachinePass): Promise<Verdict> {
    const { mr, draft } = pass;
    const { namespace } = mr.metadata;
    const name = gpuVmNameOf(mr);
    if (draft.gpuVm !== undefined || mr.spec.providerID !== undefined) {
      // A cache that does not show the GpuVm proves nothing: the API server says whether it is gone.
      const live = await this.#options.owned.read("GpuVm", namespace, name);
      if (live !== undefined)
        return verdict(REASONS.Creating, `GpuVm ${name} is not in the cache yet`, after(this.#shortMs), {
          progressing: true,
        });
      if (mr.spec.providerID !== undefined) {
        const message = `GpuVm ${name} is gone, and with it VM ${mr.spec.providerID}: a machine's VM is never made twice; delete the Machine (a MachineHealthCheck replaces it)`;
        return verdict(REASONS.ReferenceNotFound, message, DONE, { stalled: true, event: "Warning" });
      }
    }
    const inputs = this.#createInputs(pass);
    if ("reason" in inputs) return inputs;
    // Counted by every placement from here on, with no await since this one's counting: the passes of machines
    // whose bootstrap data came at once overlap, and each must see the domains chosen before its own.
    this.#choices.set(pass.key, {
      clusterKey: keyOf(namespace, inputs.clusterName),
      domain: inputs.placement.locations[0] ?? "",
      at: this.#now(),
    });
    // Forgotten when no GpuVm was made; a pass that throws keeps it (its create may have gone through), until the
    // cache shows the GpuVm or the memory ends.
    const notMade = await this.#makeGpuVm(mr, inputs);
    if (notMade !== undefined) {
      this.#choices.delete(pass.key);
      return notMade;
    }
    draft.gpuVm = name;
    const first = inputs.placement.locations[0];
    return verdict(REASONS.Creating, `GpuVm ${name} made for ${first} (${inputs.placement.source})`, DONE, {
      progressing: true,
      event: "Normal",
    });
  }

  /** The GpuVm from the bootstrap data: undefined once made, else why not (yet). */
  async #makeGpuVm(mr: GpuMachineObject, inputs: CreateInputs): Promise<Verdict | undefined> {
    const { namespace } = mr.metadata;
    const bootstrap = await this.#options.secrets.read(namespace, inputs.dataSecretName);
    const cloudConfig = bootstrap?.data.value;
    if (bootstrap === undefined || cloudConfig === undefined) {
      return verdict(
        REASONS.WaitingForDependency,
        `waiting for the bootstrap data Secret ${inputs.dataSecretName} (key value)`,
        after(this.#shortMs),
        { progressing: true },
      );
    }
    const format = bootstrap.data.format ?? "cloud-config";
    if (format !== "cloud-config") {
      const message = `the bootstrap data is ${format}: this provider boots cloud-config only (the VM's startup script)`;
      return verdict(REASONS.InvalidSpec, message, after(this.#shortMs * 300), { stalled: true, event: "Warning" });
    }
    const copy = await this.#ensureBootstrapCopy(mr, inputs.clusterName, cloudConfig);
    if (copy !== undefined) return copy;
    const body = gpuVmBody(mr, { ...inputs, paused: false });
    const created = await this.#options.owned.create("GpuVm", namespace, body);
    if (created === "exists") {
      const name = gpuVmNameOf(mr);
      return verdict(REASONS.Creating, `GpuVm ${name} exists: waiting for the cache to show it`, after(this.#shortMs), {
        progressing: true,
      });
    }
    return undefined;
  }

  /** What a GpuVm is made from, or why it cannot be made yet. */
  #createInputs(pass: MachinePass): CreateInputs | Verdict {
    const { mr } = pass;
    const { namespace } = mr.metadata;
    const cluster = pass.cluster;
    const clusterName = pass.clusterName;
    if (cluster === undefined || clusterName === undefined) throw new Error("GpuMachine create without its Cluster");
    if (cluster.status.initialization?.infrastructureProvisioned !== true) {
      return verdict(
        REASONS.WaitingForDependency,
        `waiting for Cluster ${clusterName}'s infrastructure to be provisioned`,
        DONE,
      );
    }
    const owner = clusterApiOwner(pass.owners, "Machine");
    const machine =
      owner === undefined ? undefined : viewOf(MachineView, this.#options.reads.machine(namespace, owner.name));
    if (machine === undefined)
      return verdict(REASONS.WaitingForDependency, `waiting for Machine ${owner?.name ?? ""}`, DONE);
    const dataSecretName = machine.spec.bootstrap.dataSecretName;
    if (dataSecretName === undefined) {
      return verdict(
        REASONS.WaitingForDependency,
        `waiting for Machine ${machine.metadata.name}'s bootstrap data (spec.bootstrap.dataSecretName)`,
        DONE,
      );
    }
    const reference = cluster.spec.infrastructureRef;
    if (reference?.kind !== "GpuCluster") {
      const message = `Cluster ${clusterName}'s infrastructureRef is ${reference?.kind ?? "missing"}, not a GpuCluster: its machines cannot use it`;
      return verdict(REASONS.InvalidSpec, message, after(this.#shortMs * 300), { stalled: true, event: "Warning" });
    }
    const gpuCluster = viewOf(GpuClusterView, this.#options.reads.gpuCluster(namespace, reference.name));
    if (gpuCluster === undefined)
      return verdict(REASONS.WaitingForDependency, `waiting for GpuCluster ${reference.name}`, DONE);
    if (vmTypeInfoOf(mr.spec.type) === undefined) {
      const message = `spec.type ${mr.spec.type} is not a VM type this cloud offers (${VM_TYPES.join(", ")}): use a new GpuMachineTemplate`;
      return verdict(REASONS.InvalidSpec, message, after(this.#shortMs * 300), { stalled: true, event: "Warning" });
    }
    const domains = (gpuCluster.status.failureDomains ?? []).map((domain) => domain.name);
    const placement = placementOf(
      mr,
      machine.spec.failureDomain,
      domains,
      this.#vmsPerDomain(namespace, clusterName, pass.key),
    );
    if (placement === undefined) {
      return verdict(REASONS.WaitingForDependency, `waiting for GpuCluster ${reference.name}'s failure domains`, DONE);
    }
    const credentialsSecret = gpuCluster.spec.credentialsRef?.name ?? "gpucloud-credentials";
    return { clusterName, dataSecretName, placement, credentialsSecret };
  }

  /** How many of the cluster's VMs each location holds (or was just given), for the spread. */
  #vmsPerDomain(namespace: string, clusterName: string, ownKey: string): Map<string, number> {
    const counts = new Map<string, number>();
    const counted = new Set<string>();
    for (const raw of this.#options.owned.list("GpuVm", namespace)) {
      const vm = viewOf(OwnedView, raw);
      if (vm === undefined || clusterNameOf(vm.metadata.labels) !== clusterName) continue;
      counted.add(keyOf(namespace, vm.metadata.name));
      const location = locationOfVm(vm);
      if (location !== undefined) counts.set(location, (counts.get(location) ?? 0) + 1);
    }
    const clusterKey = keyOf(namespace, clusterName);
    const now = this.#now();
    for (const [key, choice] of this.#choices) {
      if (now - choice.at > CHOICE_MEMORY_MS) this.#choices.delete(key);
      else if (choice.clusterKey === clusterKey && key !== ownKey && !counted.has(key)) {
        counts.set(choice.domain, (counts.get(choice.domain) ?? 0) + 1);
      }
    }
    return counts;
  }

  /** The bootstrap data copied into a Secret the GpuMachine owns; a verdict when a stranger holds its name. */
  async #ensureBootstrapCopy(
    mr: GpuMachineObject,
    clusterName: string,
    cloudConfig: string,
  ): Promise<Verdict | undefined> {
    const { namespace } = mr.metadata;
    const created = await this.#options.secrets.create(namespace, bootstrapSecretBody(mr, clusterName, cloudConfig));
    if (created === "created") return undefined;
    const existing = await this.#options.secrets.read(namespace, bootstrapSecretNameOf(mr));
    if (existing === undefined)
      return verdict(REASONS.Creating, "the bootstrap data Secret is being replaced", after(this.#shortMs), {
        progressing: true,
      });
    if (existing.ownerUids.includes(mr.metadata.uid)) return undefined;
    const message = `Secret ${bootstrapSecretNameOf(mr)} exists and is not this GpuMachine's: delete or rename it`;
    return verdict(REASONS.NameConflict, message, after(this.#shortMs * 30), { stalled: true, event: "Warning" });
  }

  /** Deleting: the GpuVm goes first (its controller deletes the VM), then the bootstrap copy, then our finalizer. */
  async #delete(pass: MachinePass): Promise<Step> {
    const { mr } = pass;
    const { namespace } = mr.metadata;
    const vm = pass.vm;
    if (vm !== undefined && controlledBy(vm, mr.metadata.uid)) {
      return this.#deleteVm(vm);
    }
    if (pass.draft.gpuVm !== undefined && vm === undefined) {
      const live = viewOf(OwnedView, await this.#options.owned.read("GpuVm", namespace, gpuVmNameOf(mr)));
      if (live !== undefined && controlledBy(live, mr.metadata.uid)) return this.#deleteVm(live);
    }
    const copy = await this.#options.secrets.read(namespace, bootstrapSecretNameOf(mr));
    if (copy?.ownerUids.includes(mr.metadata.uid)) {
      await this.#options.secrets.delete(namespace, bootstrapSecretNameOf(mr), copy.uid);
    }
    return releaseOwner(this.#ownerServices(), pass, "its GpuVm and VM are deleted");
  }

  async #deleteVm(vm: OwnedView): Promise<Verdict> {
    const { namespace, name } = vm.metadata;
    if (vm.metadata.annotations[ANNOTATIONS.paused] !== undefined) {
      // Paused with the machine before: it must act to delete its VM.
      const written = await this.#options.owned.patch("GpuVm", namespace, name, {
        metadata: { annotations: { [ANNOTATIONS.paused]: null } },
      });
      if (written !== "written") return conflict();
    }
    if (vm.metadata.deletionTimestamp === undefined) {
      const deleted = await this.#options.owned.delete("GpuVm", namespace, name, vm.metadata.uid);
      if (deleted === "conflict") return conflict();
      return verdict(REASONS.Deleting, `deleting GpuVm ${name} and its VM`, after(this.#shortMs * 5), {
        progressing: true,
        event: "Normal",
      });
    }
    const said = ownedReadyCondition(vm)?.message;
    const message = `waiting for GpuVm ${name} to delete its VM${said ? `: ${said}` : ""}`;
    return verdict(REASONS.Deleting, message, after(this.#shortMs * 5), { progressing: true });
  }
}

function isProvisioned(status: unknown): boolean {
  return GpuMachineStatus.safeParse(status).data?.initialization?.provisioned === true;
}

/**
 * The GpuVm not Ready (yet, or any more): its own reason and message, as the machine's. A GpuVm that has no Ready
 * condition yet (its controller has not had its first pass) changes nothing: the machine's "GpuVm made" stands.
 */
function waitingForVm(vm: OwnedView, status: GpuMachineObject["status"]): Verdict {
  const ready = ownedReadyCondition(vm);
  const own = status.conditions?.find((c) => c.type === "Ready");
  if (ready === undefined && own?.reason === REASONS.Creating && own.status === "False") {
    return verdict(REASONS.Creating, own.message ?? "", DONE, { progressing: true });
  }
  const provisioned = isProvisioned(status);
  const stalled = vm.status.conditions?.some((c) => c.type === "Stalled" && c.status === "True") ?? false;
  const reason =
    ready !== undefined && isReason(ready.reason) ? ready.reason : provisioned ? REASONS.Updating : REASONS.Creating;
  const message = `GpuVm ${vm.metadata.name}: ${ready?.message || "not Ready yet"}`;
  return verdict(reason, message, DONE, { progressing: !stalled, stalled });
}
