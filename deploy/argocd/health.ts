// Argo CD health for the gpucloud.dev kinds and the Cluster API infrastructure kinds, following kstatus. The rules below are the one source: `assessHealth`
// interprets them in TypeScript and `renderHealthLua` turns the same rules into the Lua that Argo CD runs. Both
// are tested against health_test.yaml; the Lua itself runs in Argo CD's interpreter (gopher-lua, built from its
// Go module) in test/kubernetes/peers.test.ts, which also feeds it malformed statuses and live objects.
//
// Regenerate the Lua and the argocd-cm patch: `npx node deploy/argocd/health.ts` (the test fails when stale).

export type HealthStatus = "Healthy" | "Progressing" | "Degraded" | "Suspended";

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
 * update is in flight (a resize, a power change) shows Progressing until the cloud has followed. Cluster API's
 * Paused condition (a GpuCluster or GpuMachine whose cluster is paused, as `clusterctl move` does) is Suspended,
 * before the generation check: a paused object observes nothing.
 */
export const HEALTH_RULES: readonly HealthRule[] = [
  { when: "deleting", status: "Progressing", message: "Deleting: waiting for the cloud resource to be removed" },
  { when: "conditionTrue", condition: "Paused", status: "Suspended", message: "Paused" },
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

/**
 * The kinds the script is installed for, by API group. GpuMachineTemplate is left out: a template has no
 * conditions, and Argo CD counts a kind without a health check as healthy.
 */
export const HEALTH_KINDS_BY_GROUP = {
  "gpucloud.dev": ["GpuVm", "GpuDisk", "GpuNetwork", "GpuFirewallRule", "GpuVmPool", "GpuBudget"],
  "infrastructure.cluster.x-k8s.io": ["GpuCluster", "GpuMachine"],
} as const;
export const HEALTH_KINDS: readonly string[] = Object.values(HEALTH_KINDS_BY_GROUP).flat();

/** The argocd-cm keys: `resource.customizations.health.<group>_<Kind>`. */
export function healthCustomizationKeys(): string[] {
  return Object.entries(HEALTH_KINDS_BY_GROUP).flatMap(([group, kinds]) =>
    kinds.map((kind) => `resource.customizations.health.${group}_${kind}`),
  );
}

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
  // Entries that are not objects are skipped, like the Lua's `type(condition) == "table"` check.
  return conditions
    .filter((condition) => typeof condition === "object" && condition !== null)
    .map(asRecord)
    .find((condition) => condition.type === type);
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
      // JSON null is Lua's nil: absent and null are the same here, as in the Lua.
      return (
        metadata.generation !== undefined &&
        metadata.generation !== null &&
        (status.observedGeneration ?? null) !== metadata.generation
      );
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
        "if metadata.deletionTimestamp ~= nil then",
        `  return { status = ${luaString(rule.status)}, message = ${luaString(rule.message)} }`,
        "end",
      ];
    case "generationNotObserved":
      return [
        "if metadata.generation ~= nil and status.observedGeneration ~= metadata.generation then",
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
    "-- kstatus for gpucloud.dev kinds and GpuCluster/GpuMachine: deleting and unobserved generations are",
    "-- Progressing, Paused=True is Suspended, Stalled=True is Degraded, Ready=True is Healthy, anything else is",
    "-- Progressing.",
    "-- Any field may be missing or of the wrong type (a hand-edited or half-written object): never fail, read",
    "-- only tables as tables and strings as text.",
    "local function tableOrEmpty(value)",
    '  if type(value) == "table" then',
    "    return value",
    "  end",
    "  return {}",
    "end",
    "local function text(value)",
    '  if type(value) == "string" and value ~= "" then',
    "    return value",
    "  end",
    "  return nil",
    "end",
    "local metadata = tableOrEmpty(obj.metadata)",
    "local status = tableOrEmpty(obj.status)",
    "local function findCondition(conditionType)",
    '  if type(status.conditions) ~= "table" then',
    "    return nil",
    "  end",
    "  for _, condition in ipairs(status.conditions) do",
    '    if type(condition) == "table" and condition.type == conditionType then',
    "      return condition",
    "    end",
    "  end",
    "  return nil",
    "end",
    "local function conditionMessage(condition, fallback)",
    "  if condition == nil then",
    "    return fallback",
    "  end",
    "  local reason = text(condition.reason)",
    "  local message = text(condition.message)",
    "  if reason ~= nil and message ~= nil then",
    '    return reason .. ": " .. message',
    "  end",
    "  return message or reason or fallback",
    "end",
    ...HEALTH_RULES.flatMap(luaRule),
    `return { status = ${luaString(FALLBACK_HEALTH.status)}, message = conditionMessage(findCondition("Ready"), ${luaString(FALLBACK_HEALTH.message)}) }`,
  ];
  return `${lines.join("\n")}\n`;
}

/** The argocd-cm patch that installs the script for every kind of HEALTH_KINDS_BY_GROUP. */
export function renderArgocdConfigMapPatch(): string {
  const script = renderHealthLua()
    .trimEnd()
    .split("\n")
    .map((line) => (line === "" ? "" : `    ${line}`))
    .join("\n");
  const entries = healthCustomizationKeys().map((key) => `  ${key}: |\n${script}`);
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
