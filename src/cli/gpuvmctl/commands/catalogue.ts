// The catalogue: locations, images, VM types with prices, availability, and `suggest`.
import type { CloudClient } from "../../../cloud/index.ts";
import { type SpecItem, vmFamily, vmTypeInfoOf } from "../../../cloud/wire.ts";
import type { Command } from "../command.ts";
import type { Context } from "../context.ts";
import { UsageError } from "../errors.ts";
import { formatUsd, orDash, paintState } from "../output.ts";

/** A VM type as the server's specs describe it, with the price from the catalogue's price table. */
export interface TypeRow {
  type: string;
  family: string;
  gpus: number;
  gpuModel: string;
  gpuMemoryGb: number | null;
  vcpu: number;
  memoryGb: number;
  localDiskGb: number;
  /** Dollars per hour for the whole VM; null when the type is not in the price table. */
  hourlyPriceUsd: number | null;
}

function typeRowOf(spec: SpecItem): TypeRow {
  const info = vmTypeInfoOf(spec.product_name);
  return {
    type: spec.product_name,
    family: vmFamily(spec.product_name),
    gpus: spec.num_gpu,
    gpuModel: spec.gpu_type,
    gpuMemoryGb: info?.gpuMemoryGb ?? null,
    vcpu: spec.cpu_cores,
    memoryGb: spec.memory_gb,
    localDiskGb: spec.disk_gb,
    hourlyPriceUsd: info?.hourlyPriceUsd ?? null,
  };
}

export async function typeRows(client: CloudClient, projectId: string): Promise<TypeRow[]> {
  const specs = await client.catalogue.specs(projectId);
  return specs.map(typeRowOf).sort((a, b) => a.family.localeCompare(b.family) || a.gpus - b.gpus);
}

const price = (row: { hourlyPriceUsd: number | null }) =>
  row.hourlyPriceUsd === null ? "-" : formatUsd(row.hourlyPriceUsd);

const locations: Command = {
  name: "locations",
  summary: "list the locations (for spec.location / spec.locations)",
  async run(ctx) {
    const list = await (await ctx.client()).catalogue.locations(await ctx.projectId());
    ctx.out.list(list, [{ header: "LOCATION", value: (l) => l }]);
    return 0;
  },
};

const images: Command = {
  name: "images",
  summary: "list the OS images (for spec.image)",
  async run(ctx) {
    const list = await (await ctx.client()).catalogue.images(await ctx.projectId());
    ctx.out.list(list, [
      { header: "NAME", value: (i) => i.name },
      { header: "DESCRIPTION", value: (i) => orDash(i.description) },
      { header: "TAGS", value: (i) => orDash(i.tags.join(",")) },
      { header: "LOCATIONS", value: (i) => orDash(i.locations.join(",")) },
    ]);
    return 0;
  },
};

const types: Command = {
  name: "types",
  summary: "list the VM types: GPUs, memory and price per hour (for spec.type)",
  async run(ctx) {
    const rows = await typeRows(await ctx.client(), await ctx.projectId());
    ctx.out.list(rows, [
      { header: "TYPE", value: (r) => r.type },
      { header: "GPUS", value: (r) => String(r.gpus), align: "right" },
      { header: "GPU", value: (r) => r.gpuModel },
      { header: "GPU-MEMORY", value: (r) => (r.gpuMemoryGb === null ? "-" : `${r.gpuMemoryGb}GB`), align: "right" },
      { header: "VCPU", value: (r) => String(r.vcpu), align: "right" },
      { header: "MEMORY", value: (r) => `${r.memoryGb}GB`, align: "right" },
      { header: "LOCAL-DISK", value: (r) => (r.localDiskGb > 0 ? `${r.localDiskGb}GB` : "none"), align: "right" },
      { header: "$/HOUR", value: price, align: "right" },
    ]);
    return 0;
  },
};

const availability: Command = {
  name: "availability",
  summary: "show which types have capacity in which locations now",
  flags: [
    { name: "type", type: "string", placeholder: "type", description: "only this VM type" },
    { name: "location", type: "string", placeholder: "location", description: "only this location" },
    { name: "available", type: "boolean", description: "only the combinations with capacity" },
  ],
  async run(ctx, input) {
    const client = await ctx.client();
    const query = { product_name: input.string("type"), location: input.string("location") };
    let items = await client.catalogue.availabilities(await ctx.projectId(), query);
    if (input.bool("available")) items = items.filter((i) => i.available);
    ctx.out.list(items, [
      { header: "TYPE", value: (i) => i.type },
      { header: "LOCATION", value: (i) => i.location },
      { header: "AVAILABLE", value: (i) => (i.available ? "yes" : "no"), paint: (v) => paintState(v) },
    ]);
    return 0;
  },
};

export interface Suggestion extends TypeRow {
  locations: string[];
}

/** The GPU model a flag names: a family exactly (`a100` is not `a100-80gb`), else the one family it prefixes. */
function familyOf(model: string, families: readonly string[]): string {
  const wanted = model.toLowerCase();
  if (families.includes(wanted)) return wanted;
  const prefixed = families.filter((f) => f.startsWith(`${wanted}-`));
  if (prefixed.length === 1 && prefixed[0] !== undefined) return prefixed[0];
  throw new UsageError(`--gpu-model: '${model}' is none of ${families.join(", ")}`);
}

function positiveNumber(flag: string, text: string | undefined, integer: boolean): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    throw new UsageError(`--${flag}: expected a positive ${integer ? "whole number" : "number"}, got '${text}'`);
  }
  return value;
}

export async function suggestions(
  ctx: Context,
  want: { gpus: number; gpuModel?: string; maxPrice?: number; locations: string[] },
): Promise<Suggestion[]> {
  const client = await ctx.client();
  const projectId = await ctx.projectId();
  const [rows, available] = await Promise.all([
    typeRows(client, projectId),
    client.catalogue.availabilities(projectId),
  ]);
  const family =
    want.gpuModel === undefined ? undefined : familyOf(want.gpuModel, [...new Set(rows.map((r) => r.family))]);
  const result: Suggestion[] = [];
  for (const row of rows) {
    if (row.gpus < want.gpus || (family !== undefined && row.family !== family)) continue;
    if (want.maxPrice !== undefined && (row.hourlyPriceUsd === null || row.hourlyPriceUsd > want.maxPrice)) continue;
    const where = available
      .filter((a) => a.type === row.type && a.available)
      .map((a) => a.location)
      .filter((l) => want.locations.length === 0 || want.locations.includes(l))
      .sort();
    if (where.length > 0) result.push({ ...row, locations: where });
  }
  const cost = (s: Suggestion) => s.hourlyPriceUsd ?? Number.POSITIVE_INFINITY;
  return result.sort((a, b) => cost(a) - cost(b) || a.gpus - b.gpus || a.type.localeCompare(b.type));
}

const suggest: Command = {
  name: "suggest",
  summary: "available types with at least N GPUs and their locations, cheapest first, ready for a GpuVm",
  details:
    "Types come from the server's specs, prices from the catalogue's price table, capacity from the\n" +
    "availability endpoint. The first line is printed as a GpuVm spec fragment to paste, and as the\n" +
    "'gpuvmctl manifest vm' command that writes the whole manifest.",
  flags: [
    { name: "gpus", type: "string", placeholder: "n", description: "at least this many GPUs (required)" },
    {
      name: "gpu-model",
      type: "string",
      placeholder: "model",
      description: "a GPU family: a40, a100, a100-80gb, l40s-48gb",
    },
    { name: "max-price", type: "string", placeholder: "usd", description: "at most this many dollars per hour" },
    { name: "location", type: "string", multiple: true, placeholder: "location", description: "only these locations" },
  ],
  examples: ["gpuvmctl suggest --gpus 8 --gpu-model a100-80gb --max-price 20"],
  async run(ctx, input) {
    const gpus = positiveNumber("gpus", input.string("gpus"), true);
    if (gpus === undefined) throw new UsageError("suggest: --gpus <n> is required");
    const maxPrice = positiveNumber("max-price", input.string("max-price"), false);
    const list = await suggestions(ctx, {
      gpus,
      gpuModel: input.string("gpu-model"),
      maxPrice,
      locations: input.list("location"),
    });
    ctx.out.list(list, [
      { header: "TYPE", value: (s) => s.type },
      { header: "GPUS", value: (s) => String(s.gpus), align: "right" },
      { header: "GPU", value: (s) => s.gpuModel },
      { header: "$/HOUR", value: price, align: "right" },
      { header: "LOCATIONS", value: (s) => s.locations.join(",") },
    ]);
    const [best] = list;
    if (best === undefined) {
      ctx.out.note("nothing available matches: try fewer GPUs, another --gpu-model or a higher --max-price");
    } else if (!ctx.out.structured) {
      ctx.out.note(
        [
          "",
          "# cheapest match, for a GpuVm spec:",
          `type: ${best.type}`,
          `locations: [${best.locations.join(", ")}]`,
          `# or: gpuvmctl manifest vm <name> --type ${best.type} --location ${best.locations.join(",")}`,
        ].join("\n"),
      );
    }
    return 0;
  },
};

export const CATALOGUE_COMMANDS: readonly Command[] = [locations, images, types, availability, suggest];
