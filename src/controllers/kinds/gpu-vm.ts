// GpuVm: create (image, SSH key inline or from a Secret, scripts inline or from a ConfigMap/Secret, data disks
// as GpuDisk references or ids), power state through START/STOP, RESET on a new reset annotation, a type change
// within its family through STOP → UPDATE type → START (one step per reconcile), data disks through UPDATE
// disks, connection details published to a Secret or ConfigMap owned by the GpuVm. What it spends (budgets,
// docs/budgets.md): its type's price from a create or a START on, the larger type through a running VM's type
// change, nothing while stopped; its creates wait in the capacity queue of (type, location).

import { hash } from "node:crypto";
import { type LedgerStep, vmLedgerStep } from "../../admission/actions.ts";
import type { Need } from "../../admission/ledger.ts";
import { DEFAULT_PRICES, type PriceTable } from "../../admission/prices.ts";
import { ANNOTATIONS, REASONS, SECRET_WATCH_HINT } from "../../api/common.ts";
import { type GpuVmSpec, gpuVmKind, MAX_RESET_VALUE_LENGTH } from "../../api/gpu-vm.ts";
import type { CloudClient } from "../../cloud/client.ts";
import type { CreateVmRequest, DiskRef, Operation } from "../../cloud/wire.ts";
import type { Account } from "../accounts/account.ts";
import type { CloudAccount } from "../accounts/cloud-account.ts";
import { summarizeVm } from "../accounts/vm-summary.ts";
import { cloudStatus, ReconcileError } from "../core/classify.ts";
import type { ManagedObject } from "../core/object-model.ts";
import { fitText } from "../core/status-limits.ts";
import type {
  Action,
  Blocked,
  CreateAnswer,
  CreateOnlyValue,
  CreateTarget,
  Existing,
  ExternalClient,
  KindDefinition,
  KindDeps,
  KindSpend,
  OwnedObject,
  Resolution,
  UpdateAnswer,
} from "../managed/external.ts";
import { connectionDetails, type DesiredVm, nextVmStepFromObservation, observeVm } from "./gpu-vm-mappers.ts";
import {
  blocked,
  findResource,
  knownId,
  managedByCloudId,
  readyTarget,
  referenceNotFound,
  rereadById,
  type Waiting,
} from "./support.ts";

/** Inline value or a key of a Secret/ConfigMap (and where it came from); Blocked names what is missing. */
function valueOrRef(
  deps: KindDeps,
  namespace: string,
  inline: { field: string; value: string | undefined },
  ref: { kind: "Secret" | "ConfigMap"; name: string; key: string; field: string } | undefined,
): { value?: string; source?: string } | Blocked {
  if (inline.value !== undefined) return { value: inline.value, source: `spec.${inline.field}` };
  if (ref === undefined) return {};
  const value = deps.dataKey(ref.kind, namespace, ref.name, ref.key);
  const where = `${ref.kind} ${namespace}/${ref.name} key ${ref.key}`;
  if (value !== undefined) return { value, source: where };
  // An unlabelled Secret is invisible to the operator: say so where it is missing.
  const hint = ref.kind === "Secret" ? ` (${SECRET_WATCH_HINT})` : "";
  return referenceNotFound(`${where}${hint}`, `spec.${ref.field}`);
}

interface CreateInputs {
  sshPublicKey: string;
  startupScript?: string;
  shutdownScript?: string;
  /** What the cloud takes only at creation, as digests: compared later to report a change (UpToDate). */
  createOnly: Record<string, CreateOnlyValue>;
}

/**
 * Recent digests by value: VMs mostly share an image and a key, and every pass of a VM digests them again. Only
 * short values are kept (images, keys), so that the memo stays small next to the objects.
 */
const recentDigests = new Map<string, string>();
const RECENT_DIGESTS = 256;
const MEMO_MAX_LENGTH = 2048;

function digestOf(value: string): string {
  const known = recentDigests.get(value);
  if (known !== undefined) return known;
  const digest = hash("sha256", value).slice(0, 16);
  if (value.length > MEMO_MAX_LENGTH) return digest;
  if (recentDigests.size >= RECENT_DIGESTS) recentDigests.delete(recentDigests.keys().next().value ?? "");
  recentDigests.set(value, digest);
  return digest;
}

function resolveCreateInputs(deps: KindDeps, mr: ManagedObject<GpuVmSpec>): CreateInputs | Blocked {
  const ns = mr.metadata.namespace;
  const { spec } = mr;
  const secretRef = spec.sshPublicKeySecretRef;
  const ssh = valueOrRef(
    deps,
    ns,
    { field: "sshPublicKey", value: spec.sshPublicKey },
    secretRef ? { kind: "Secret", ...secretRef, field: "sshPublicKeySecretRef" } : undefined,
  );
  if ("type" in ssh) return ssh;
  if (ssh.value === undefined) {
    return blocked(REASONS.InvalidSpec, "no SSH public key: set spec.sshPublicKey or spec.sshPublicKeySecretRef");
  }
  const startupRef = spec.startupScriptRef ? { ...spec.startupScriptRef, field: "startupScriptRef" } : undefined;
  const startup = valueOrRef(deps, ns, { field: "startupScript", value: spec.startupScript }, startupRef);
  if ("type" in startup) return startup;
  const shutdownRef = spec.shutdownScriptRef ? { ...spec.shutdownScriptRef, field: "shutdownScriptRef" } : undefined;
  const shutdown = valueOrRef(deps, ns, { field: "shutdownScript", value: spec.shutdownScript }, shutdownRef);
  if ("type" in shutdown) return shutdown;
  const createOnly: Record<string, CreateOnlyValue> = {
    image: { digest: digestOf(spec.image ?? ""), source: "spec.image" },
    sshPublicKey: { digest: digestOf(ssh.value), source: ssh.source ?? "spec.sshPublicKey" },
  };
  for (const [field, resolved] of [
    ["startupScript", startup],
    ["shutdownScript", shutdown],
  ] as const) {
    if (resolved.value !== undefined) {
      createOnly[field] = { digest: digestOf(resolved.value), source: resolved.source ?? `spec.${field}` };
    }
  }
  return {
    sshPublicKey: ssh.value,
    ...(startup.value !== undefined ? { startupScript: startup.value } : {}),
    ...(shutdown.value !== undefined ? { shutdownScript: shutdown.value } : {}),
    createOnly,
  };
}

/** Where the connection details go (spec.connectionDetails): written and deleted with the GpuVm. */
function ownedObjectsOf(spec: GpuVmSpec): OwnedObject[] {
  const target = spec.connectionDetails;
  if (target === undefined) return [];
  return [
    ...(target.secretName !== undefined ? [{ kind: "Secret" as const, name: target.secretName }] : []),
    ...(target.configMapName !== undefined ? [{ kind: "ConfigMap" as const, name: target.configMapName }] : []),
  ];
}

/** Values of a create request worth naming when the cloud finds the request too large. */
const LARGE_VALUE_BYTES = 1024;

/**
 * A create the cloud refused as too large (HTTP 413), said so that the user knows what to change: the request's
 * size, its large values and where they come from (the cloud's message says its limit when it knows it).
 */
function tooLarge(error: unknown, body: CreateVmRequest, inputs: CreateInputs): ReconcileError | undefined {
  if (cloudStatus(error) !== 413) return undefined;
  const bytes = (text: string) => Buffer.byteLength(text, "utf8");
  const values = [
    ["startup script", body.startup_script, inputs.createOnly.startupScript?.source],
    ["shutdown script", body.shutdown_script, inputs.createOnly.shutdownScript?.source],
    ["SSH public key", body.ssh_public_key, inputs.createOnly.sshPublicKey?.source],
  ] as const;
  const large = values.flatMap(([what, value, source]) =>
    value !== undefined && bytes(value) >= LARGE_VALUE_BYTES ? [`${what} (${bytes(value)} bytes, ${source})`] : [],
  );
  const fix =
    large.length > 0
      ? `; the large values: ${large.join(", ")}: make them smaller (a script can fetch the rest when the VM boots)`
      : ": make the values it sends smaller";
  const said = error instanceof Error ? error.message : String(error);
  const message = `the cloud refused the VM's create request as too large (HTTP 413: ${said}): it was ${bytes(JSON.stringify(body))} bytes${fix}`;
  return new ReconcileError(REASONS.InvalidSpec, message, { cause: error });
}

interface ResolvedDisks {
  disks: DiskRef[];
  /** disk id → GpuDisk name, for messages. */
  names: Record<string, string>;
}

function resolveDisks(deps: KindDeps, mr: ManagedObject<GpuVmSpec>): ResolvedDisks | Waiting | Blocked {
  const disks: DiskRef[] = [];
  const names: Record<string, string> = {};
  for (const [index, disk] of (mr.spec.disks ?? []).entries()) {
    if (disk.id !== undefined) disks.push({ id: disk.id, mode: disk.mode });
    else if (disk.diskRef !== undefined) {
      const target = readyTarget(deps, "GpuDisk", mr.metadata.namespace, disk.diskRef.name, `spec.disks[${index}]`);
      if ("type" in target) return target;
      disks.push({ id: target.id, mode: disk.mode });
      names[target.id] = disk.diskRef.name;
    }
  }
  return { disks, names };
}

/** The VM's data disks with the GpuDisk of this namespace that manages each (when one does). */
function namedDisks(
  deps: KindDeps,
  mr: ManagedObject<GpuVmSpec>,
  account: Account,
  atProvider: Record<string, unknown>,
) {
  const disks = Array.isArray(atProvider.attachedDisks) ? (atProvider.attachedDisks as { id: string }[]) : [];
  const named = disks.map((disk) => {
    const gpuDisk = managedByCloudId(deps, "GpuDisk", mr.metadata.namespace, account, disk.id)?.metadata.name;
    return gpuDisk === undefined ? disk : { ...disk, gpuDisk };
  });
  return { ...atProvider, attachedDisks: named };
}

/**
 * The reset annotation's value when it asks for a RESET not yet acted on. Compared as status can hold it (a long
 * value shortened the same way every time), so that a value too long for status never asks again and again.
 */
function pendingReset(mr: ManagedObject<GpuVmSpec>): string | undefined {
  const annotation = mr.metadata.annotations[ANNOTATIONS.resetRequestedAt];
  if (annotation === undefined) return undefined;
  const requested = fitText(annotation, MAX_RESET_VALUE_LENGTH);
  return requested !== mr.status.lastResetRequestedAt ? requested : undefined;
}

/** What a GpuVm's `resolve` finds: the VM as the spec wants it, and the values it is created with. */
interface VmResolved {
  desired: DesiredVm;
  /** Blocked when an input is missing: an existing VM only compares them, a create waits for them. */
  inputs: CreateInputs | Blocked;
}

function resolveVm(deps: KindDeps, mr: ManagedObject<GpuVmSpec>): Resolution<VmResolved> {
  const disks = resolveDisks(deps, mr);
  if ("type" in disks) return disks;
  const reset = pendingReset(mr);
  const desired: DesiredVm = {
    type: mr.spec.type,
    powerState: mr.spec.powerState,
    disks: disks.disks,
    diskNames: disks.names,
    ...(reset ? { resetRequestedAt: reset } : {}),
  };
  const inputs = resolveCreateInputs(deps, mr);
  // An existing VM needs its create inputs only to compare them (a Secret gone since is no reason to wait).
  if ("type" in inputs && knownId(mr) === undefined) return inputs;
  return { type: "ready", resolved: { desired, inputs } };
}

async function createVm(
  account: CloudAccount,
  mr: ManagedObject<GpuVmSpec>,
  { desired, inputs }: VmResolved,
  target: CreateTarget,
  signal: AbortSignal,
): Promise<CreateAnswer> {
  // A VM re-created after it vanished needs its create inputs again: it waits for them, like a first create.
  if ("type" in inputs) return inputs;
  const location = target.location;
  if (location === undefined) throw new Error("VM create without a location");
  if (!(await account.isAvailable(mr.spec.type, location, signal))) {
    return { type: "capacityUnavailable", message: `${mr.spec.type} is not available in ${location}` };
  }
  const body: CreateVmRequest = {
    name: target.cloudName,
    type: mr.spec.type,
    location,
    ssh_public_key: inputs.sshPublicKey,
    ...(mr.spec.image ? { image: mr.spec.image } : {}),
    ...(desired.disks.length > 0 ? { disks: desired.disks } : {}),
    ...(inputs.startupScript !== undefined ? { startup_script: inputs.startupScript } : {}),
    ...(inputs.shutdownScript !== undefined ? { shutdown_script: inputs.shutdownScript } : {}),
  };
  let operation: Operation;
  try {
    operation = await account.client.vms.create(account.projectId, body, { signal });
  } catch (error) {
    throw tooLarge(error, body, inputs) ?? error;
  }
  const createOnlyDigests = Object.fromEntries(
    Object.entries(inputs.createOnly).map(([field, value]) => [field, value.digest]),
  );
  return { type: "started", operation, statusFields: { cloudName: target.cloudName, location, createOnlyDigests } };
}

/** The amount a reserve step asks for (undefined: the step releases or changes nothing). */
function reserved(step: LedgerStep): Need | undefined {
  return step.step === "reserve" ? step.need : undefined;
}

/**
 * What a step raises spend by: a START reserves the VM's type, the STOP that begins a running VM's type change
 * reserves the new type (kept through its UPDATE and START); a STOP the user asked for releases once the VM is
 * seen stopped (managed/spend.ts), a RESET or a disk change changes nothing.
 */
function reserveOf(
  step: ReturnType<typeof nextVmStepFromObservation>,
  desired: DesiredVm,
  observed: Existing,
  prices: PriceTable,
) {
  const type = String(observed.atProvider.type ?? "");
  if (step.action === "START") return reserved(vmLedgerStep({ action: "start", type }, prices));
  if (step.action === "STOP" && desired.type !== type) {
    return reserved(vmLedgerStep({ action: "changeType", to: desired.type, running: true }, prices));
  }
  return undefined;
}

/** The one next step of a VM towards the spec, as a request to send once its intent is recorded. */
function updateVm(
  vms: CloudClient["vms"],
  projectId: string,
  mr: ManagedObject<GpuVmSpec>,
  desired: DesiredVm,
  observed: Existing,
  signal: AbortSignal,
  prices: PriceTable,
): UpdateAnswer {
  const step = nextVmStepFromObservation(desired, observed);
  const reset = desired.resetRequestedAt;
  // A reset asked while the VM is meant to be stopped is acknowledged without a call.
  const acknowledgeReset = reset !== undefined && (step.action === "RESET" || mr.spec.powerState === "Stopped");
  const fields = acknowledgeReset ? { lastResetRequestedAt: reset } : undefined;
  const id = observed.id;
  if (step.action === "none" || step.action === "wait") {
    return fields ? { type: "unchanged", statusFields: fields } : { type: "unchanged" };
  }
  const send = (): Promise<Operation> => {
    switch (step.action) {
      case "UPDATE": {
        const change = { ...(step.type ? { type: step.type } : {}), ...(step.disks ? { disks: step.disks } : {}) };
        return vms.update(projectId, id, change, { signal });
      }
      case "START":
        return vms.start(projectId, id, { signal });
      case "STOP":
        return vms.stop(projectId, id, { signal });
      case "RESET":
        return vms.reset(projectId, id, { signal });
    }
  };
  const reserve = reserveOf(step, desired, observed, prices);
  const action: Action = { type: "action", action: step.action, send, note: step.why };
  return { ...action, ...(fields ? { intentFields: fields } : {}), ...(reserve ? { reserve } : {}) };
}

/** A running VM bills its type's price; a stopped one nothing. */
export const gpuVmSpend: KindSpend<GpuVmSpec> = {
  create(spec, prices) {
    const step = vmLedgerStep({ action: "create", type: spec.type }, prices);
    if (step.step !== "reserve") throw new Error("a VM create reserves its type's price");
    return step.need;
  },
  billing(observed, prices) {
    if (observed.atProvider.state !== "STATE_RUNNING") return undefined;
    const spend = prices.vm(String(observed.atProvider.type ?? ""));
    return spend === undefined ? undefined : { ...spend, purpose: "Running" };
  },
  capacityPair: (spec, location) => ({ type: spec.type, location }),
};

export const gpuVm: KindDefinition<GpuVmSpec, VmResolved> = {
  info: gpuVmKind,
  family: "vm",
  locations: (spec) => spec.locations ?? (spec.location !== undefined ? [spec.location] : []),
  references: (spec) => [
    ...(spec.disks ?? []).flatMap((d) => (d.diskRef ? [`GpuDisk/${d.diskRef.name}`] : [])),
    ...(spec.sshPublicKeySecretRef ? [`Secret/${spec.sshPublicKeySecretRef.name}`] : []),
    ...[spec.startupScriptRef, spec.shutdownScriptRef].flatMap((ref) => (ref ? [`${ref.kind}/${ref.name}`] : [])),
  ],
  ownedObjects: (spec) => ownedObjectsOf(spec),
  spend: gpuVmSpend,
  external(account, deps): ExternalClient<GpuVmSpec, VmResolved> {
    const { client, projectId } = account;
    const prices = () => deps.prices?.() ?? DEFAULT_PRICES;
    return {
      resolve: async (mr) => resolveVm(deps, mr),
      async observe(mr, options, signal) {
        const vm = await findResource(account.vms, mr, options, async (id) =>
          summarizeVm(await client.vms.get(projectId, id, { signal })),
        );
        if (vm === undefined) return { exists: false };
        const found = observeVm(options.resolved?.desired, vm, prices());
        const observed = { ...found, atProvider: namedDisks(deps, mr, account, found.atProvider), reads: [vm] };
        const inputs = options.resolved?.inputs;
        return inputs !== undefined && !("type" in inputs) ? { ...observed, createOnly: inputs.createOnly } : observed;
      },
      reread: (mr) => rereadById(account.vms, mr),
      async findByName(cloudName, signal) {
        const page = await client.vms.list(projectId, { names: [cloudName], limit: 10 }, { signal });
        const vm = page.items.find((item) => item.name === cloudName);
        return vm === undefined ? undefined : { id: vm.id, ...(vm.created_at ? { createdAt: vm.created_at } : {}) };
      },
      create: (mr, resolved, target, signal) => createVm(account, mr, resolved, target, signal),
      update: async (mr, resolved, observed, signal) =>
        updateVm(client.vms, projectId, mr, resolved.desired, observed, signal, prices()),
      async delete(_mr, id, signal) {
        return { type: "action", action: "DELETE", send: () => client.vms.terminate(projectId, id, { signal }) };
      },
      async publish(mr, observed) {
        if (deps.publish === undefined) return undefined;
        const data = connectionDetails(observed.atProvider);
        for (const target of ownedObjectsOf(mr.spec)) {
          const problem = await deps.publish(target.kind, mr, target.name, data);
          if (problem !== undefined) return problem;
        }
        return undefined;
      },
    };
  },
};
