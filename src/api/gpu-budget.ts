// GpuBudget: a limit on what the GpuVms and GpuDisks of a namespace may spend per hour (in US dollars, from the
// price table) and on the GPUs they may hold, with the ledger of what each object holds in its status. Every
// action that raises spend reserves its amount in every budget that selects the object before the cloud call; the
// ledger is written with the budget's resourceVersion as precondition, so replicas, shards and crashes never spend
// more than the limit (docs/budgets.md, docs/adr/0026-budgets-and-capacity-queue.md).
import { z } from "zod";
import { VM_TYPES, vmFamily } from "../cloud/wire.ts";
import { managedStatusShape } from "./common.ts";
import { type CelRule, celString, matching, text, timestamp } from "./fields.ts";
import { MAX_PRIORITY, MIN_PRIORITY } from "./gpu-vm.ts";
import { AGE_COLUMN, defineKind, READY_COLUMN, REASON_COLUMN } from "./kind-info.ts";

/** The GPU models a budget can limit: the families of the VM types (`a100-80gb.8x` → `a100-80gb`). */
export const GPU_MODELS: readonly string[] = [...new Set(VM_TYPES.map(vmFamily))];
/** The kinds whose spend a budget covers: a GpuVmPool and Cluster API machines spend through the GpuVms they make. */
export const BUDGETED_KINDS = ["GpuVm", "GpuDisk"] as const;
export type BudgetedKind = (typeof BUDGETED_KINDS)[number];
/** What an amount in the ledger is for. */
export const SPEND_PURPOSES = ["Create", "Start", "TypeChange", "DiskCreate", "DiskGrow", "Running"] as const;
export type SpendPurpose = (typeof SPEND_PURPOSES)[number];
/** Reserved: held for an action not confirmed yet (the cloud call may be in flight). Used: the resource bills. */
export const ENTRY_STATES = ["Reserved", "Used"] as const;
export type EntryState = (typeof ENTRY_STATES)[number];

/** The ledger and the waiting list are maps keyed by object UID: a merge patch of one entry sends one key. */
export const MAX_LEDGER_ENTRIES = 2000;
export const MAX_WAITERS = 1000;
export const MAX_HOURLY_USD = 10_000_000;
export const MAX_GPUS = 1_000_000;

export const SELECTOR_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist"] as const;
const MAX_SELECTOR_TERMS = 16;
const MAX_SELECTOR_VALUES = 64;

/** Label keys and values, as Kubernetes takes them (prefix/name, 63-character name). */
const LABEL_KEY_PATTERN =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_KEY_EXPECTED = "must be a label key such as team or example.com/team";
const LABEL_VALUE_PATTERN = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const LABEL_VALUE_EXPECTED =
  "must be a label value: at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit";

const labelKey = matching(z.string().min(1).max(317), LABEL_KEY_PATTERN, LABEL_KEY_EXPECTED);
const labelValue = matching(z.string().max(63), LABEL_VALUE_PATTERN, LABEL_VALUE_EXPECTED);

const VALUES_RULE =
  "(self.operator in ['In', 'NotIn']) ? (has(self.values) && size(self.values) > 0) : (!has(self.values) || size(self.values) == 0)";
const VALUES_MESSAGE = "In and NotIn need values; Exists and DoesNotExist take none";

export const LabelSelectorRequirement = z
  .object({
    key: labelKey.meta({ description: "The label key." }),
    operator: z.enum(SELECTOR_OPERATORS).meta({ description: "In, NotIn, Exists or DoesNotExist." }),
    values: z
      .array(labelValue.meta({ description: "A label value." }))
      .max(MAX_SELECTOR_VALUES)
      .optional()
      .meta({ description: "The values for In and NotIn; none for Exists and DoesNotExist." }),
  })
  .superRefine((term, ctx) => {
    const wantsValues = term.operator === "In" || term.operator === "NotIn";
    const count = term.values?.length ?? 0;
    if (wantsValues !== count > 0) ctx.addIssue({ code: "custom", path: ["values"], message: VALUES_MESSAGE });
  })
  .meta({
    description: "A label requirement, as in a Kubernetes label selector.",
    "x-kubernetes-validations": [{ rule: VALUES_RULE, message: VALUES_MESSAGE, fieldPath: ".values" }],
  });

export const LabelSelector = z
  .object({
    matchLabels: z
      .record(labelKey, labelValue.meta({ description: "The value." }))
      .optional()
      .meta({
        description: "Labels an object must carry with these values.",
        maxProperties: MAX_SELECTOR_TERMS,
        "x-kubernetes-validations": [
          {
            rule: `self.all(key, key.matches(${celString(LABEL_KEY_PATTERN.source)}))`,
            message: `keys ${LABEL_KEY_EXPECTED}`,
          },
        ],
      }),
    matchExpressions: z
      .array(LabelSelectorRequirement)
      .max(MAX_SELECTOR_TERMS)
      .optional()
      .meta({ description: "Requirements an object's labels must all meet." }),
  })
  .meta({ description: "A Kubernetes label selector; empty selects every object." });
export type LabelSelector = z.infer<typeof LabelSelector>;

const modelsRule: CelRule = {
  rule: `self.all(model, model in [${GPU_MODELS.map(celString).join(", ")}])`,
  message: `keys must be GPU models (VM type families): ${GPU_MODELS.join(", ")}`,
};

export const GpuLimits = z
  .object({
    total: z.int().min(0).max(MAX_GPUS).optional().meta({ description: "GPUs in all, whatever their model." }),
    byModel: z
      .record(
        z.string().min(1).max(63),
        z.int().min(0).max(MAX_GPUS).meta({ description: "GPUs of this model at most." }),
      )
      .optional()
      .meta({
        description: `GPUs per model (the VM type's family: ${GPU_MODELS.join(", ")}).`,
        maxProperties: GPU_MODELS.length,
        "x-kubernetes-validations": [modelsRule],
      }),
  })
  .superRefine((limits, ctx) => {
    for (const model of Object.keys(limits.byModel ?? {})) {
      if (!GPU_MODELS.includes(model))
        ctx.addIssue({ code: "custom", path: ["byModel", model], message: modelsRule.message });
    }
  })
  .meta({ description: "Limits on the GPUs the covered VMs hold (running, or reserved for a create or a START)." });
export type GpuLimits = z.infer<typeof GpuLimits>;

export const GpuBudgetSpec = z
  .object({
    maxHourlyUSD: z
      .number()
      .min(0)
      .max(MAX_HOURLY_USD)
      .meta({
        description:
          "The most the covered objects may cost per hour, in US dollars, by the operator's price table: running " +
          "VMs by their type, disks by their size, and what is reserved for creates, STARTs, type changes and " +
          "disk growth in flight. Lowering it below the current use deletes nothing: new spend waits until the " +
          "use is below the limit again.",
      }),
    maxGpus: GpuLimits.optional(),
    selector: LabelSelector.optional().meta({
      description:
        "The GpuVms and GpuDisks of this namespace the budget covers, by label (a GpuVmPool's replicas carry its " +
        "template's labels). Empty or left out: every one of the namespace. Several budgets may cover one " +
        "object: it must fit all of them.",
    }),
    maxPriority: z
      .int()
      .min(MIN_PRIORITY)
      .max(MAX_PRIORITY)
      .optional()
      .meta({
        description:
          "The highest priority an object this budget covers counts with (in this budget's waiting line and in the " +
          "capacity queues): a higher spec.priority is taken as this value. Left out: no cap.",
      }),
  })
  .meta({ description: "The limits and which objects they cover." });
export type GpuBudgetSpec = z.infer<typeof GpuBudgetSpec>;

const uidKey = z.string().min(1).max(128);
const amount = (description: string) => z.number().min(0).max(MAX_HOURLY_USD).meta({ description });
/** Sums of entries: as many entries as the ledger holds, each up to MAX_HOURLY_USD. */
const total = (description: string) =>
  z
    .number()
    .min(0)
    .max(MAX_HOURLY_USD * (MAX_LEDGER_ENTRIES + MAX_WAITERS))
    .meta({ description });
const gpuCount = (description: string) => z.int().min(0).max(MAX_GPUS).meta({ description });
const objectKind = z.enum(BUDGETED_KINDS).meta({ description: "GpuVm or GpuDisk." });
const objectName = text("Name of the object (in the budget's namespace).");
const gpuModel = text("GPU model (the VM type's family); empty for disks.", 63).optional();

export const LedgerEntry = z
  .object({
    kind: objectKind,
    name: objectName,
    amountUSD: amount("Dollars per hour the object holds (its whole amount, not a difference)."),
    gpus: gpuCount("GPUs the object holds."),
    gpuModel,
    purpose: z.enum(SPEND_PURPOSES).meta({
      description:
        "What the amount is for: Create, Start, TypeChange (the larger of the two types until the change is " +
        "done), DiskCreate, DiskGrow, or Running (a resource found billing, counted as it is).",
    }),
    state: z.enum(ENTRY_STATES).meta({
      description: "Reserved: held before the cloud call, not confirmed yet. Used: the resource bills.",
    }),
    since: timestamp("When the amount was reserved or last changed."),
  })
  .meta({ description: "What one object holds in the budget." });
export type LedgerEntry = z.infer<typeof LedgerEntry>;

export const Waiter = z
  .object({
    kind: objectKind,
    name: objectName,
    amountUSD: amount("Dollars per hour the object asks for beyond what it holds."),
    gpus: gpuCount("GPUs it asks for beyond what it holds."),
    gpuModel,
    purpose: z.enum(SPEND_PURPOSES).meta({ description: "What the amount is for." }),
    priority: z
      .int()
      .min(MIN_PRIORITY)
      .max(MAX_PRIORITY)
      .meta({ description: "Its priority (capped by maxPriority)." }),
    since: timestamp("When it started waiting: among equal priorities, the earlier goes first."),
  })
  .meta({ description: "An object waiting for room in the budget." });
export type Waiter = z.infer<typeof Waiter>;

export const GpuBudgetStatus = z
  .object({
    observedGeneration: managedStatusShape.observedGeneration,
    conditions: managedStatusShape.conditions,
    usedUSD: total("Dollars per hour of the entries in state Used.").optional(),
    reservedUSD: total("Dollars per hour of the entries in state Reserved.").optional(),
    overLimitUSD: total(
      "By how much used + reserved exceeds maxHourlyUSD (after the limit was lowered, or resources found billing); " +
        "0 within the limit.",
    ).optional(),
    gpus: gpuCount("GPUs held by the entries (used and reserved).").optional(),
    waitingCount: z.int().min(0).max(MAX_WAITERS).optional().meta({ description: "Objects waiting for room." }),
    waitingUSD: total("Dollars per hour the waiting objects ask for.").optional(),
    entries: z
      .record(uidKey, LedgerEntry)
      .optional()
      .meta({
        description:
          "The ledger: what each covered object holds, by object UID. Written by the operator only, with the " +
          "budget's resourceVersion as precondition.",
        maxProperties: MAX_LEDGER_ENTRIES,
      }),
    waiting: z.record(uidKey, Waiter).optional().meta({
      description: "Objects waiting for room, by object UID; they proceed by priority, then by since.",
      maxProperties: MAX_WAITERS,
    }),
    lastSweepTime: timestamp(
      "When the ledger was last checked against the objects and their cloud resources.",
    ).optional(),
  })
  .meta({ description: "The ledger and its totals." });
export type GpuBudgetStatus = z.infer<typeof GpuBudgetStatus>;

export const gpuBudgetKind = defineKind({
  kind: "GpuBudget",
  shortNames: ["gbudget"],
  description:
    "GpuBudget limits what the GpuVms and GpuDisks of its namespace (those its selector picks) may spend per hour " +
    "and the GPUs they may hold. An action that raises spend (a create, a START, a larger type, a disk create or " +
    "growth) reserves its amount first; one that does not fit waits, by priority then age, until room frees.",
  spec: GpuBudgetSpec,
  status: GpuBudgetStatus,
  printerColumns: [
    { name: "Limit", type: "number", jsonPath: ".spec.maxHourlyUSD", description: "Dollars per hour at most." },
    { name: "Used", type: "number", jsonPath: ".status.usedUSD", description: "Dollars per hour billing now." },
    {
      name: "Reserved",
      type: "number",
      jsonPath: ".status.reservedUSD",
      description: "Dollars per hour reserved for actions in flight.",
    },
    { name: "Waiting", type: "integer", jsonPath: ".status.waitingCount", description: "Objects waiting for room." },
    READY_COLUMN,
    REASON_COLUMN,
    {
      name: "Over",
      type: "number",
      jsonPath: ".status.overLimitUSD",
      description: "Dollars per hour above the limit.",
      priority: 1,
    },
    { name: "GPUs", type: "integer", jsonPath: ".status.gpus", description: "GPUs held.", priority: 1 },
    AGE_COLUMN,
  ],
});
export const GpuBudget = gpuBudgetKind.schema;
export type GpuBudget = z.infer<typeof GpuBudget>;
