// The frame of a pass of the Cluster API infrastructure kinds: the object read from the cache (unless the cache
// is behind our own write), an invalid spec said as such, the kind's lifecycle, and at the end (GpuCluster,
// GpuMachine) the verdict as their conditions (kstatus' Ready, Reconciling and Stalled, and the contract's
// Paused; no Synced or UpToDate, which are the operator's own kinds'), observedGeneration, and one status write
// when something changed; an Event when the Ready story changed.
import type { Logger } from "pino";
import { REASONS } from "../../api/common.ts";
import { keyOf, type Outcome, type ReconcileContext, type ReconcileRequest } from "../../runtime/index.ts";
import { sameJson } from "../../util/json-values.ts";
import { classify } from "../core/classify.ts";
import type { KubeAccess } from "../core/kube-access.ts";
import type { Condition, ManagedObject, ManagedSpecBase, ManagedStatusBase, Parsed } from "../core/object-model.ts";
import type { GuardedWrites } from "../core/own-writes.ts";
import { formatKubeTime } from "../core/status-building.ts";
import { after, DONE, RELEASED, type Step, type Verdict, verdict } from "../core/verdict.ts";

/** Whether the object is paused, and why (the Paused condition's message). */
export type PauseState = { paused: false; message?: string } | { paused: true; message: string };

/** The infrastructure conditions of a verdict, keeping each lastTransitionTime while its status holds. */
export function infrastructureConditions(
  mr: ManagedObject,
  result: Verdict,
  pause: PauseState,
  nowMs: number,
): Condition[] {
  const previous = mr.status.conditions ?? [];
  const at = formatKubeTime(nowMs);
  const generation = mr.metadata.generation;
  const condition = (type: string, status: Condition["status"], reason: string, message: string): Condition => {
    const old = previous.find((c) => c.type === type);
    const transition = old?.status === status ? old.lastTransitionTime : at;
    return { type, status, reason, message, lastTransitionTime: transition, observedGeneration: generation };
  };
  const previousReady = previous.find((c) => c.type === "Ready");
  const ready = result.ready === undefined ? (previousReady?.status ?? "False") : result.ready ? "True" : "False";
  return [
    condition("Ready", ready, result.reason, result.message),
    condition("Reconciling", result.progressing ? "True" : "False", result.reason, result.message),
    condition("Stalled", result.stalled ? "True" : "False", result.reason, result.message),
    pause.paused
      ? condition("Paused", "True", REASONS.Paused, pause.message)
      : condition("Paused", "False", REASONS.NotPaused, pause.message ?? ""),
  ];
}

/** What the end of a pass writes with. */
export interface FinishServices {
  writes: GuardedWrites;
  kube: Pick<KubeAccess, "event">;
  now(): number;
}

/** Conditions and observedGeneration onto the draft, one status write when it changed, an Event when the story did. */
export async function finishInfrastructure(
  services: FinishServices,
  mr: ManagedObject,
  draft: ManagedStatusBase,
  result: Verdict,
  pause: PauseState,
  logger: Logger,
): Promise<Outcome> {
  if (result.silent) return result.outcome;
  const previousReady = mr.status.conditions?.find((c) => c.type === "Ready");
  draft.conditions = infrastructureConditions(mr, result, pause, services.now());
  draft.observedGeneration = mr.metadata.generation;
  if (!sameJson(mr.status, draft)) {
    const written = await services.writes.writeStatus(mr, draft);
    if (written.type === "conflict") return after(0);
    if (written.type === "invalid") {
      logger.error({ detail: written.message }, "status write rejected");
      return after(60_000);
    }
    if (written.type === "written") mr.status = structuredClone(draft);
  }
  const ready = draft.conditions.find((c) => c.type === "Ready");
  const storyChanged = previousReady?.reason !== result.reason || previousReady?.status !== ready?.status;
  if (storyChanged && result.event !== undefined) services.kube.event(mr, result.event, result.reason, result.message);
  logger.debug({ reason: result.reason, ready: ready?.status, outcome: result.outcome.type }, "reconciled");
  return result.outcome;
}

/** The request's object as the cache holds it: gone, behind our own last write (wait for it), or read and parsed. */
export type CachedRead<Spec extends ManagedSpecBase> =
  | { type: "gone"; key: string }
  | { type: "behind" }
  | { type: "read"; key: string; raw: unknown; parsed: Parsed<Spec> };

export function readCached<Spec extends ManagedSpecBase>(
  kube: Pick<KubeAccess, "get">,
  writes: GuardedWrites,
  request: ReconcileRequest,
  parse: (raw: unknown) => Parsed<Spec>,
): CachedRead<Spec> {
  const key = keyOf(request.namespace, request.name);
  const raw = kube.get(request.namespace, request.name);
  if (raw === undefined) {
    writes.forget(key);
    return { type: "gone", key };
  }
  const parsed = parse(raw);
  if (writes.behind(key, parsed.object?.metadata.resourceVersion ?? "") !== undefined) return { type: "behind" };
  return { type: "read", key, raw, parsed };
}

/** What one pass of an infrastructure kind carries to its end. */
export interface InfrastructurePass {
  draft: ManagedStatusBase;
  pause: PauseState;
}

/** An infrastructure kind's lifecycle, as the frame of reconcileInfrastructure runs it. */
export interface InfrastructureLifecycle<Spec extends ManagedSpecBase, P extends InfrastructurePass> {
  services: FinishServices & { kube: Pick<KubeAccess, "get" | "event"> };
  shortMs: number;
  parse(raw: unknown): Parsed<Spec>;
  /** The object is gone: forget what is kept about it. */
  forget(key: string): void;
  passOf(mr: ManagedObject<Spec>, raw: unknown, key: string, ctx: ReconcileContext): P;
  run(pass: P): Promise<Step>;
}

/** One pass: read, invalid spec or the lifecycle (its errors classified), then the status at its end. */
export async function reconcileInfrastructure<Spec extends ManagedSpecBase, P extends InfrastructurePass>(
  lifecycle: InfrastructureLifecycle<Spec, P>,
  request: ReconcileRequest,
  ctx: ReconcileContext,
): Promise<Outcome> {
  const { services } = lifecycle;
  const read = readCached(services.kube, services.writes, request, (raw) => lifecycle.parse(raw));
  if (read.type === "gone") {
    lifecycle.forget(read.key);
    return DONE;
  }
  if (read.type === "behind") return after(lifecycle.shortMs);
  const { parsed } = read;
  if (!parsed.ok) {
    if (parsed.object === undefined) return { type: "terminal", error: new Error(parsed.message) };
    const invalid = verdict(REASONS.InvalidSpec, parsed.message, DONE, { stalled: true, event: "Warning" });
    const draft = structuredClone(parsed.object.status);
    return finishInfrastructure(services, parsed.object, draft, invalid, { paused: false }, ctx.logger);
  }
  const pass = lifecycle.passOf(parsed.object, read.raw, read.key, ctx);
  let step: Step;
  try {
    step = await lifecycle.run(pass);
  } catch (error) {
    step = classify(error);
    ctx.logger.debug({ err: error, reason: step.reason }, "reconcile failed");
  }
  if (step === RELEASED) {
    lifecycle.forget(read.key);
    return DONE;
  }
  return finishInfrastructure(services, parsed.object, pass.draft, step, pass.pause, ctx.logger);
}
