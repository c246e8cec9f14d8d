// What GPU VMs and disks cost per hour, for budgets (and the $/HOUR columns): the spec's table by type family
// (dollars per GPU per hour) and the disk price per GB-hour, from cloud/wire.ts, overridable because the cloud has
// no price endpoint: a negotiated discount or a new list price is a ConfigMap (or Helm values) away, not a release.
// The override file is YAML (the ConfigMap key `prices.yaml`):
//
//   gpuHourUSD:          # dollars per GPU per hour, by family (the VM type before the dot)
//     a100-80gb: 1.65
//   diskGbHourUSD: 0.0001
//
// A malformed override is refused whole with a message naming the field (PriceConfigError): prices are never
// half-applied.
import { parse } from "yaml";
import { z } from "zod";
import { GPU_MODELS } from "../api/gpu-budget.ts";
import { DISK_PRICE_PER_GB_HOUR, FAMILY_PRICE_PER_GPU_HOUR, vmFamily, vmTypeInfoOf } from "../cloud/wire.ts";
import { toMicros, toMicrosRoundedUp } from "./money.ts";

/**
 * The ConfigMap of overrides, in the operator's own namespace (a fixed name: the Helm chart renders it from its
 * `prices` values; kustomize users create it), and its key.
 */
export const PRICES_CONFIGMAP_NAME = "gpuvm-operator-prices";
export const PRICES_CONFIGMAP_KEY = "prices.yaml";
/** Bytes per GB in the disk price (the spec's "per GB per hour"; the $/HOUR estimate uses the same). */
export const BYTES_PER_GB = 1e9;

export const PriceOverrides = z
  .strictObject({
    gpuHourUSD: z
      .record(z.string(), z.number().min(0).max(10_000))
      .optional()
      .superRefine((families, ctx) => {
        for (const family of Object.keys(families ?? {})) {
          if (!GPU_MODELS.includes(family))
            ctx.addIssue({
              code: "custom",
              path: [family],
              message: `unknown VM type family ${family}: one of ${GPU_MODELS.join(", ")}`,
            });
        }
      }),
    diskGbHourUSD: z.number().min(0).max(1).optional(),
  })
  .meta({ description: "Price overrides: per GPU-hour by family, per GB-hour for disks." });
export type PriceOverrides = z.infer<typeof PriceOverrides>;

export class PriceConfigError extends Error {
  override name = "PriceConfigError";
}

/** What an action adds to the bill: micro-dollars per hour, and the GPUs it holds (of which model). */
export interface Spend {
  micros: number;
  gpus: number;
  gpuModel?: string;
}

export class PriceTable {
  readonly #perGpuHour: Readonly<Record<string, number>>;
  readonly #diskGbHour: number;

  constructor(overrides: PriceOverrides = {}) {
    this.#perGpuHour = { ...FAMILY_PRICE_PER_GPU_HOUR, ...overrides.gpuHourUSD };
    this.#diskGbHour = overrides.diskGbHourUSD ?? DISK_PRICE_PER_GB_HOUR;
  }

  /** Dollars per GPU per hour of a family, or undefined for one the table does not know. */
  perGpuHour(family: string): number | undefined {
    return this.#perGpuHour[family];
  }

  /** A running VM of this type; undefined for a type the catalogue does not know. */
  vm(type: string): Spend | undefined {
    const info = vmTypeInfoOf(type);
    const perGpu = this.perGpuHour(vmFamily(type));
    if (info === undefined || perGpu === undefined) return undefined;
    return { micros: toMicros(perGpu) * info.gpus, gpus: info.gpus, gpuModel: info.family };
  }

  /** Dollars per hour of a VM type (the $/HOUR column), or undefined. */
  vmHourlyUSD(type: string): number | undefined {
    const spend = this.vm(type);
    return spend === undefined ? undefined : spend.micros / 1e6;
  }

  /** A data disk of this size (bytes), billed whether attached or not. */
  disk(sizeBytes: number): Spend {
    return { micros: toMicrosRoundedUp((Math.max(0, sizeBytes) / BYTES_PER_GB) * this.#diskGbHour), gpus: 0 };
  }

  /** The table as one log line's fields. */
  describe(): { gpuHourUSD: Record<string, number>; diskGbHourUSD: number } {
    return { gpuHourUSD: { ...this.#perGpuHour }, diskGbHourUSD: this.#diskGbHour };
  }
}

/** The seed's prices, unchanged. */
export const DEFAULT_PRICES = new PriceTable();

/** The table from an override file's text (`source` names it in errors: the ConfigMap or the file). */
export function parsePriceOverrides(text: string, source: string): PriceTable {
  let document: unknown;
  try {
    document = parse(text, { maxAliasCount: 0 });
  } catch (error) {
    throw new PriceConfigError(`${source}: not YAML: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
  const parsed = PriceOverrides.safeParse(document ?? {});
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => `${issue.path.join(".") || "(top)"}: ${issue.message}`);
    throw new PriceConfigError(`${source}: ${issues.join("; ")}`);
  }
  return new PriceTable(parsed.data);
}
