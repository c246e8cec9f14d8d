// The GpuCluster lifecycle. A GpuCluster owns Kubernetes objects only: the GpuNetwork and GpuFirewallRules its
// spec asks for (their controllers do the cloud work, with claims and crash-safe creates); it reads the catalogue
// (which of its locations offer VMs now: its failure domains). Order of a pass: read → invalid spec? → paused
// (what it owns pauses too) → deleting (rules, then the network, then our finalizer; nothing for clusterctl move)
// → its Cluster → finalizer and block-move → failure domains → network → rules → provisioned and Ready.
import { CLUSTER_API_ANNOTATIONS, CLUSTER_API_LABELS } from "../../api/cluster-api.ts";
import { ANNOTATIONS, FINALIZER, REASONS } from "../../api/common.ts";
import { GpuClusterSpec, GpuClusterStatus } from "../../api/gpu-cluster.ts";
import type { Outcome, ReconcileContext, ReconcileRequest } from "../../runtime/index.ts";
import type { KubeAccess } from "../core/kube-access.ts";
import { parseManaged } from "../core/object-model.ts";
import { GuardedWrites } from "../core/own-writes.ts";
import { after, conflict, DONE, RELEASED, type Step, type Verdict, verdict } from "../core/verdict.ts";
import type { CatalogueAccess, ClusterApiReads, OwnedAccess, OwnedKind, SelfPatch } from "./access.ts";
import {
  type GpuClusterObject,
  networkBody,
  networkNameOf,
  ruleBody,
  ruleChange,
  ruleNameOf,
  ruleSpec,
} from "./cluster-network.ts";
import {
  ClusterView,
  clusterApiOwner,
  controlledBy,
  MetadataView,
  OwnedView,
  ownedReady,
  ownedReadyCondition,
  pauseOf,
  viewOf,
} from "./objects.ts";
import { type OwnerPassBase, ownerMetadata, pausedOwner, pinCloudId, releaseOwner } from "./owner-pass.ts";
import { reconcileInfrastructure } from "./status.ts";

export interface ClusterReconcilerOptions {
  kube: KubeAccess;
  patchSelf: SelfPatch;
  reads: ClusterApiReads;
  owned: OwnedAccess;
  catalogue: CatalogueAccess;
  /** Requeue while waiting (default 2 s); failure domains are read again after `capacityRetryMs` (60 s). */
  shortMs?: number;
  capacityRetryMs?: number;
  now?: () => number;
}

interface ClusterPass extends OwnerPassBase<GpuClusterObject> {
  clusterName: string | undefined;
  cluster: ClusterView | undefined;
  network: OwnedView | undefined;
  rules: OwnedView[];
  signal: AbortSignal;
}

export class GpuClusterReconciler {
  readonly #options: ClusterReconcilerOptions;
  readonly #writes: GuardedWrites;
  readonly #now: () => number;
  readonly #shortMs: number;
  readonly #capacityRetryMs: number;

  constructor(options: ClusterReconcilerOptions) {
    this.#options = options;
    this.#writes = new GuardedWrites(options.kube);
    this.#now = options.now ?? Date.now;
    this.#shortMs = options.shortMs ?? 2_000;
    this.#capacityRetryMs = options.capacityRetryMs ?? 60_000;
  }

  isEcho(key: string, resourceVersion: string): boolean | Promise<boolean> {
    return this.#writes.isEcho(key, resourceVersion);
  }

  reconcile(request: ReconcileRequest, ctx: ReconcileContext): Promise<Outcome> {
    return reconcileInfrastructure(
      {
        services: { writes: this.#writes, kube: this.#options.kube, now: this.#now },
        shortMs: this.#shortMs,
        parse: (raw) => parseManaged(raw, GpuClusterSpec, GpuClusterStatus),
        forget: () => undefined,
        passOf: (mr, raw, key, context) => this.#passOf(mr, raw, key, context),
        run: (pass) => this.#lifecycle(pass),
      },
      request,
      ctx,
    );
  }

  #passOf(mr: GpuClusterObject, raw: unknown, key: string, ctx: ReconcileContext): ClusterPass {
    const { namespace, name, uid } = mr.metadata;
    const meta = viewOf(MetadataView, raw)?.metadata;
    const owner = clusterApiOwner(meta?.ownerReferences ?? [], "Cluster");
    const clusterName = meta?.labels[CLUSTER_API_LABELS.clusterName] ?? owner?.name;
    const ownedViews = (kind: OwnedKind) =>
      this.#options.owned
        .list(kind, namespace)
        .map((object) => viewOf(OwnedView, object))
        .filter((object): object is OwnedView => object !== undefined && controlledBy(object, uid));
    return {
      mr,
      draft: structuredClone(mr.status),
      key,
      logger: ctx.logger,
      signal: ctx.signal,
      pause: { paused: false },
      clusterName,
      cluster:
        clusterName === undefined
          ? undefined
          : viewOf(ClusterView, this.#options.reads.cluster(namespace, clusterName)),
      network: ownedViews("GpuNetwork").find((network) => network.metadata.name === networkNameOf(mr)),
      rules: ownedViews("GpuFirewallRule").filter(
        (rule) => rule.metadata.labels[CLUSTER_API_LABELS.gpuCluster] === name,
      ),
    };
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

  async #lifecycle(pass: ClusterPass): Promise<Step> {
    const { mr } = pass;
    const deleting = mr.metadata.deletionTimestamp !== undefined;
    if (deleting && !mr.metadata.finalizers.includes(FINALIZER)) return RELEASED;
    const services = this.#ownerServices();
    const owned = [
      ...(pass.network === undefined ? [] : [{ kind: "GpuNetwork" as const, object: pass.network }]),
      ...pass.rules.map((rule) => ({ kind: "GpuFirewallRule" as const, object: rule })),
    ];
    const pause = pauseOf(mr.metadata.annotations, pass.cluster);
    if (pause !== undefined) return pausedOwner(services, pass, pause, owned, deleting);
    if (deleting) {
      if (CLUSTER_API_ANNOTATIONS.deleteForMove in mr.metadata.annotations) {
        return releaseOwner(services, pass, "moved by clusterctl: its network and rules stay for the new cluster");
      }
      return this.#delete(pass);
    }
    if (pass.clusterName === undefined || pass.cluster === undefined) {
      const which = pass.clusterName === undefined ? "its Cluster owner reference" : `Cluster ${pass.clusterName}`;
      return verdict(REASONS.WaitingForDependency, `waiting for ${which}`, DONE);
    }
    const metadata = await ownerMetadata(services, pass);
    if (metadata !== undefined) return metadata;
    const unpaused = await this.#unpause(owned.map((entry) => entry));
    if (unpaused !== undefined) return unpaused;
    const domains = await this.#failureDomains(pass);
    if (domains !== undefined) return domains;
    const network = await this.#network(pass);
    if (network !== undefined) return network;
    const rules = await this.#rules(pass);
    if (rules !== undefined) return rules;
    pass.draft.initialization = { provisioned: true };
    const count = (mr.spec.firewallRules ?? []).length;
    const parts = [
      `${GpuClusterStatus.safeParse(pass.draft).data?.failureDomains?.length ?? 0} failure domains`,
      ...(pass.draft.networkId !== undefined ? [`network ${pass.draft.networkId}`] : []),
      ...(count > 0 ? [`${count} firewall rules`] : []),
    ];
    return verdict(REASONS.Available, parts.join(", "), after(this.#capacityRetryMs), { ready: true });
  }

  /** Owned objects paused with the cluster before act again. */
  async #unpause(owned: { kind: OwnedKind; object: OwnedView }[]): Promise<Verdict | undefined> {
    for (const { kind, object } of owned) {
      if (object.metadata.annotations[ANNOTATIONS.paused] === undefined) continue;
      const { namespace, name } = object.metadata;
      const patch = { metadata: { annotations: { [ANNOTATIONS.paused]: null } } };
      if ((await this.#options.owned.patch(kind, namespace, name, patch)) !== "written") return conflict();
    }
    return undefined;
  }

  /** The spec's locations where the cloud offers VMs now; the last ones known are kept while none has any. */
  async #failureDomains(pass: ClusterPass): Promise<Verdict | undefined> {
    const { mr, draft } = pass;
    const answer = await this.#options.catalogue.locationsWithCapacity(
      mr.metadata.namespace,
      mr.spec.credentialsRef.name,
      mr.spec.locations,
      pass.signal,
    );
    if (answer.type === "missing") {
      return verdict(answer.reason ?? REASONS.CredentialsMissing, answer.message, after(this.#shortMs * 15), {
        stalled: true,
        event: "Warning",
      });
    }
    if (answer.value.length > 0) {
      draft.failureDomains = answer.value.map((name) => ({ name, controlPlane: true }));
      return undefined;
    }
    if (draft.failureDomains !== undefined) return undefined;
    const message = `no location of spec.locations (${mr.spec.locations.join(", ")}) offers VMs now; looked at again in ${Math.round(this.#capacityRetryMs / 1000)} s`;
    return verdict(REASONS.CapacityUnavailable, message, after(this.#capacityRetryMs), {
      stalled: true,
      event: "Warning",
    });
  }

  /** spec.network: an existing network's id, or a GpuNetwork made for the cluster (Ready before rules go on it). */
  async #network(pass: ClusterPass): Promise<Verdict | undefined> {
    const { mr, draft } = pass;
    const asked = mr.spec.network;
    if (asked?.id !== undefined) {
      draft.networkId = asked.id;
      return undefined;
    }
    if (asked?.cidr === undefined) {
      delete draft.networkId;
      return undefined;
    }
    const network = pass.network;
    if (network === undefined) {
      const name = networkNameOf(mr);
      const created = await this.#options.owned.create(
        "GpuNetwork",
        mr.metadata.namespace,
        networkBody(mr, asked.cidr, pass.clusterName),
      );
      if (created === "exists") {
        const live = viewOf(OwnedView, await this.#options.owned.read("GpuNetwork", mr.metadata.namespace, name));
        if (live !== undefined && !controlledBy(live, mr.metadata.uid)) {
          const message = `GpuNetwork ${name} exists and is not this GpuCluster's: delete or rename it`;
          return verdict(REASONS.NameConflict, message, after(this.#shortMs * 30), { stalled: true, event: "Warning" });
        }
      }
      return verdict(REASONS.Creating, `creating GpuNetwork ${name} (${asked.cidr})`, DONE, { progressing: true });
    }
    if (!ownedReady(network) || network.status.id === undefined) return waitingFor("GpuNetwork", network);
    if (!(await pinCloudId(this.#options.owned, "GpuNetwork", network))) return conflict();
    draft.networkId = network.status.id;
    return undefined;
  }

  /** One GpuFirewallRule per spec.firewallRules entry, changed in place where the cloud allows; others deleted. */
  async #rules(pass: ClusterPass): Promise<Verdict | undefined> {
    const { mr } = pass;
    const { namespace } = mr.metadata;
    const wanted = new Map((mr.spec.firewallRules ?? []).map((rule) => [ruleNameOf(mr, rule), rule]));
    const busy: string[] = [];
    for (const existing of pass.rules) {
      const name = existing.metadata.name;
      const rule = wanted.get(name);
      if (existing.metadata.deletionTimestamp !== undefined) busy.push(`GpuFirewallRule ${name} being deleted`);
      else if (rule === undefined) {
        await this.#options.owned.delete("GpuFirewallRule", namespace, name, existing.metadata.uid);
        busy.push(`deleting GpuFirewallRule ${name}`);
      } else {
        const change = ruleChange(existing, ruleSpec(mr, rule));
        if (change.type === "replace") {
          await this.#options.owned.delete("GpuFirewallRule", namespace, name, existing.metadata.uid);
          busy.push(`replacing GpuFirewallRule ${name} (direction or action changed)`);
        } else if (change.type === "patch") {
          await this.#options.owned.patch("GpuFirewallRule", namespace, name, { spec: change.spec });
          busy.push(`changing GpuFirewallRule ${name}`);
        } else if (!ownedReady(existing)) {
          busy.push(`GpuFirewallRule ${name}: ${ownedReadyCondition(existing)?.message ?? "not Ready yet"}`);
        } else if (!(await pinCloudId(this.#options.owned, "GpuFirewallRule", existing))) {
          busy.push(`GpuFirewallRule ${name} changed meanwhile`);
        }
      }
    }
    const present = new Set(pass.rules.map((rule) => rule.metadata.name));
    for (const [name, rule] of wanted) {
      if (present.has(name)) continue;
      await this.#options.owned.create("GpuFirewallRule", namespace, ruleBody(mr, rule, pass.clusterName));
      busy.push(`creating GpuFirewallRule ${name}`);
    }
    if (busy.length === 0) return undefined;
    const stalled = pass.rules.some((rule) =>
      rule.status.conditions?.some((c) => c.type === "Stalled" && c.status === "True"),
    );
    return verdict(REASONS.Creating, busy.join("; "), after(this.#shortMs * 5), { progressing: !stalled, stalled });
  }

  /** Deleting: the rules first, then the network (the cloud refuses a network still used), then our finalizer. */
  async #delete(pass: ClusterPass): Promise<Step> {
    const { namespace } = pass.mr.metadata;
    const owned = [
      ...pass.rules.map((rule) => ({ kind: "GpuFirewallRule" as const, object: rule })),
      ...(pass.network === undefined ? [] : [{ kind: "GpuNetwork" as const, object: pass.network }]),
    ];
    const unpaused = await this.#unpause(owned);
    if (unpaused !== undefined) return unpaused;
    const first = pass.rules.length > 0 ? owned.filter((entry) => entry.kind === "GpuFirewallRule") : owned;
    if (first.length > 0) {
      for (const { kind, object } of first) {
        if (object.metadata.deletionTimestamp === undefined) {
          await this.#options.owned.delete(kind, namespace, object.metadata.name, object.metadata.uid);
        }
      }
      const names = first.map(({ kind, object }) => `${kind} ${object.metadata.name}`).join(", ");
      return verdict(REASONS.Deleting, `deleting ${names}`, after(this.#shortMs * 5), { progressing: true });
    }
    if (pass.mr.spec.network?.cidr !== undefined) {
      // Absent from the cache is no proof: the API server says whether the network is gone.
      const live = viewOf(OwnedView, await this.#options.owned.read("GpuNetwork", namespace, networkNameOf(pass.mr)));
      if (live !== undefined && controlledBy(live, pass.mr.metadata.uid)) {
        return verdict(REASONS.Deleting, `waiting for GpuNetwork ${live.metadata.name} to go`, after(this.#shortMs), {
          progressing: true,
        });
      }
    }
    return releaseOwner(this.#ownerServices(), pass, "its network and firewall rules are deleted");
  }
}

function waitingFor(kind: string, object: OwnedView): Verdict {
  const ready = ownedReadyCondition(object);
  const stalled = object.status.conditions?.some((c) => c.type === "Stalled" && c.status === "True") ?? false;
  const message = `${kind} ${object.metadata.name}: ${ready?.message || "not Ready yet"}`;
  return verdict(REASONS.Creating, message, DONE, { progressing: !stalled, stalled });
}
