// Argo CD health for the gpucloud.dev kinds, following kstatus. The rules below are the one source: `assessHealth`
// interprets them in TypeScript (tested against health_test.yaml) and `renderHealthLua` turns the same rules into
// the Lua that Argo CD runs, because there is no Lua runtime in this project to test the script itself.
//
// Regenerate the Lua and the argocd-cm patch: `npx node deploy/argocd/health.ts` (the test fails when stale).

export type HealthStatus = "Healthy" | "Progressing" | "Degraded";

export interface HealthAssessment {
  status: HealthStatus;
  message: string;
}

/** A rule matches when its predicate holds; the first matching rule decides. */
export type HealthRule =
  | { when: "deleting"; status: HealthStatus; message: string }
  | { when: "generationNotObserved"; status: HealthStatus; message: string }
  | { when: "conditionTrue"; condition: string; status: HealthStatus; message: string };

/**
 * kstatus order: deleting → Progressing; stale observedGeneration → Progressing; Reconciling → Progressing;
 * Stalled → Degraded; Ready → Healthy. Reconciling comes before Ready so that an object that stays Ready while an
 * update is in flight (a resize, a power change) shows Progressing until the cloud has followed.
 */
export const HEALTH_RULES: readonly HealthRule[] = [
  { when: "deleting", status: "Progressing", message: "Deleting: waiting for the cloud resource to be removed" },
  {
    when: "generationNotObserved",
    status: "Progressing",
    message: "Waiting for the operator to observe the latest generation",
  },
  { when: "conditionTrue", condition: "Reconciling", status: "Progressing", message: "Reconciling" },
  { when: "conditionTrue", condition: "Stalled", status: "Degraded", message: "Stalled" },
  { when: "conditionTrue", condition: "Ready", status: "Healthy", message: "Ready" },
];

/** Used when no rule matches. */
export const FALLBACK_HEALTH: HealthAssessment = { status: "Progressing", message: "Waiting for Ready" };

export const HEALTH_KINDS = ["GpuVm", "GpuDisk", "GpuNetwork", "GpuFirewallRule", "GpuVmPool"] as const;
export const HEALTH_GROUP = "gpucloud.dev";

interface ConditionLike {
  type?: unknown;
  status?: unknown;
  reason?: unknown;
  message?: unknown;
}

function asRecord(value: unknown): Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function findCondition(status: Record<string, unknown>, type: string): ConditionLike | undefined {
  const conditions = Array.isArray(status.conditions) ? status.conditions : [];
  return conditions.map(asRecord).find((condition) => condition.type === type);
}

/** The message a condition rule reports: "Reason: message" of the condition when it has them, else the rule's text. */
function conditionMessage(condition: ConditionLike | undefined, fallback: string): string {
  const reason = typeof condition?.reason === "string" && condition.reason !== "" ? condition.reason : undefined;
  const message = typeof condition?.message === "string" && condition.message !== "" ? condition.message : undefined;
  if (reason !== undefined && message !== undefined) return `${reason}: ${message}`;
  return message ?? reason ?? fallback;
}

function ruleMatches(rule: HealthRule, object: Record<string, unknown>): boolean {
  const metadata = asRecord(object.metadata);
  const status = asRecord(object.status);
  switch (rule.when) {
    case "deleting":
      return metadata.deletionTimestamp !== undefined && metadata.deletionTimestamp !== null;
    case "generationNotObserved":
      return metadata.generation !== undefined && status.observedGeneration !== metadata.generation;
    case "conditionTrue":
      return findCondition(status, rule.condition)?.status === "True";
  }
}

/** Health of one custom resource object, exactly as the generated Lua computes it. Never throws. */
export function assessHealth(object: unknown): HealthAssessment {
  const record = asRecord(object);
  for (const rule of HEALTH_RULES) {
    if (!ruleMatches(rule, record)) continue;
    if (rule.when === "conditionTrue") {
      const condition = findCondition(asRecord(record.status), rule.condition);
      return { status: rule.status, message: conditionMessage(condition, rule.message) };
    }
    return { status: rule.status, message: rule.message };
  }
  const ready = findCondition(asRecord(record.status), "Ready");
  return { status: FALLBACK_HEALTH.status, message: conditionMessage(ready, FALLBACK_HEALTH.message) };
}

function luaString(text: string): string {
  return JSON.stringify(text); // a JSON string of printable ASCII is a valid Lua string literal
}

function luaRule(rule: HealthRule): string[] {
  switch (rule.when) {
    case "deleting":
      return [
        "if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then",
        `  return { status = ${luaString(rule.status)}, message = ${luaString(rule.message)} }`,
        "end",
      ];
    case "generationNotObserved":
      return [
        "if obj.metadata ~= nil and obj.metadata.generation ~= nil and status.observedGeneration ~= obj.metadata.generation then",
        `  return { status = ${luaString(rule.status)}, message = ${luaString(rule.message)} }`,
        "end",
      ];
    case "conditionTrue":
      return [
        `local ${luaLocal(rule.condition)} = findCondition(${luaString(rule.condition)})`,
        `if ${luaLocal(rule.condition)} ~= nil and ${luaLocal(rule.condition)}.status == "True" then`,
        `  return { status = ${luaString(rule.status)}, message = conditionMessage(${luaLocal(rule.condition)}, ${luaString(rule.message)}) }`,
        "end",
      ];
  }
}

function luaLocal(conditionType: string): string {
  return `condition${conditionType.replace(/[^A-Za-z0-9]/g, "")}`;
}

/** The Lua health script (Lua 5.1 as run by Argo CD's gopher-lua), generated from HEALTH_RULES. */
export function renderHealthLua(): string {
  const lines = [
    "-- Generated by deploy/argocd/health.ts from HEALTH_RULES; do not edit by hand.",
    "-- kstatus for gpucloud.dev kinds: deleting and unobserved generations are Progressing,",
    "-- Stalled=True is Degraded, Ready=True is Healthy, anything else is Progressing.",
    "local status = {}",
    "if obj.status ~= nil then",
    "  status = obj.status",
    "end",
    "local function findCondition(conditionType)",
    "  if status.conditions == nil then",
    "    return nil",
    "  end",
    "  for _, condition in ipairs(status.conditions) do",
    "    if condition.type == conditionType then",
    "      return condition",
    "    end",
    "  end",
    "  return nil",
    "end",
    "local function conditionMessage(condition, fallback)",
    "  if condition == nil then",
    "    return fallback",
    "  end",
    '  local hasReason = condition.reason ~= nil and condition.reason ~= ""',
    '  local hasMessage = condition.message ~= nil and condition.message ~= ""',
    "  if hasReason and hasMessage then",
    '    return condition.reason .. ": " .. condition.message',
    "  end",
    "  if hasMessage then",
    "    return condition.message",
    "  end",
    "  if hasReason then",
    "    return condition.reason",
    "  end",
    "  return fallback",
    "end",
    ...HEALTH_RULES.flatMap(luaRule),
    `return { status = ${luaString(FALLBACK_HEALTH.status)}, message = conditionMessage(findCondition("Ready"), ${luaString(FALLBACK_HEALTH.message)}) }`,
  ];
  return `${lines.join("\n")}\n`;
}

/** The argocd-cm patch that installs the script for the five kinds. */
export function renderArgocdConfigMapPatch(): string {
  const script = renderHealthLua()
    .trimEnd()
    .split("\n")
    .map((line) => (line === "" ? "" : `    ${line}`))
    .join("\n");
  const entries = HEALTH_KINDS.map((kind) => `  resource.customizations.health.${HEALTH_GROUP}_${kind}: |\n${script}`);
  return [
    "# Generated by deploy/argocd/health.ts; do not edit by hand.",
    "# Apply: kubectl -n argocd patch configmap argocd-cm --type merge --patch-file deploy/argocd/argocd-cm-patch.yaml",
    "apiVersion: v1",
    "kind: ConfigMap",
    "metadata:",
    "  name: argocd-cm",
    "  namespace: argocd",
    "data:",
    ...entries,
    "",
  ].join("\n");
}

export const GENERATED_FILES: readonly { path: string; render: () => string }[] = [
  { path: "deploy/argocd/health.lua", render: renderHealthLua },
  { path: "deploy/argocd/argocd-cm-patch.yaml", render: renderArgocdConfigMapPatch },
];

// Run directly (`npx node deploy/argocd/health.ts`): write the generated files, relative to the working directory.
if (import.meta.main) {
  const { writeFile } = await import("node:fs/promises");
  for (const file of GENERATED_FILES) {
    await writeFile(file.path, file.render());
    process.stdout.write(`wrote ${file.path}\n`);
  }
}
