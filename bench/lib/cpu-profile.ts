// The top entries of a V8 CPU profile (`node --cpu-prof`): self and total (inclusive) share of the samples per
// function, the idle and GC pseudo-frames left in, so that "busy" is read against the whole run.
import { readFileSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT } from "./processes.ts";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
}

export interface ProfileEntry {
  name: string;
  selfPercent: number;
  totalPercent: number;
}

function labelOf(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url.startsWith("file://") ? path.relative(REPO_ROOT, url.slice("file://".length)) : url;
  const where = file === "" ? "" : ` ${file}:${lineNumber + 1}`;
  return `${functionName || "(anonymous)"}${where}`;
}

/** Functions by total share (then self share); at most `limit` entries. */
export function topEntries(file: string, limit: number, sortBy: "total" | "self" = "total"): ProfileEntry[] {
  const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const totalHits = profile.nodes.reduce((sum, node) => sum + (node.hitCount ?? 0), 0);
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0;
    if (hits === 0) continue;
    const label = labelOf(node);
    self.set(label, (self.get(label) ?? 0) + hits);
    // Every distinct function on the stack gets the hits once (recursion counted once).
    const seen = new Set<string>();
    for (let id: number | undefined = node.id; id !== undefined; id = parentOf.get(id)) {
      const frame = byId.get(id);
      if (frame === undefined) break;
      const name = labelOf(frame);
      if (seen.has(name)) continue;
      seen.add(name);
      total.set(name, (total.get(name) ?? 0) + hits);
    }
  }
  const percent = (hits: number): number => (totalHits === 0 ? 0 : (100 * hits) / totalHits);
  return [...total.entries()]
    .filter(([name]) => !name.startsWith("(root)"))
    .map(([name, hits]) => ({ name, selfPercent: percent(self.get(name) ?? 0), totalPercent: percent(hits) }))
    .sort((a, b) => (sortBy === "total" ? b.totalPercent - a.totalPercent : b.selfPercent - a.selfPercent))
    .slice(0, limit);
}

/** Where the self time went, by package (node_modules/<name>), Node internals, our folders and V8 itself. */
export function selfByArea(file: string): { area: string; percent: number }[] {
  const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  const total = profile.nodes.reduce((sum, node) => sum + (node.hitCount ?? 0), 0);
  const areas = new Map<string, number>();
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0;
    if (hits === 0) continue;
    const url = node.callFrame.url;
    const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
    const ours = /\/(src|bench)\/([^/]+)\//.exec(url);
    const area = modules
      ? modules[1]
      : ours
        ? `${ours[1]}/${ours[2]}`
        : url.startsWith("node:")
          ? "node internals"
          : url === ""
            ? node.callFrame.functionName || "(native)"
            : url;
    areas.set(area ?? "?", (areas.get(area ?? "?") ?? 0) + hits);
  }
  return [...areas]
    .map(([area, hits]) => ({ area, percent: (100 * hits) / Math.max(1, total) }))
    .sort((a, b) => b.percent - a.percent);
}

/** `node bench/lib/cpu-profile.ts <file.cpuprofile> [limit] [self|total|areas]` prints the top entries. */
if (import.meta.url === `file://${process.argv[1]}`) {
  const [file, limit, sortBy] = process.argv.slice(2);
  if (file === undefined) {
    process.stderr.write("usage: node bench/lib/cpu-profile.ts <file.cpuprofile> [limit] [self|total]\n");
    process.exit(2);
  }
  if (sortBy === "areas") {
    for (const { area, percent } of selfByArea(file).slice(0, Number(limit ?? 25))) {
      process.stdout.write(`${percent.toFixed(1).padStart(5)} %  ${area}\n`);
    }
    process.exit(0);
  }
  for (const entry of topEntries(file, Number(limit ?? 25), sortBy === "self" ? "self" : "total")) {
    process.stdout.write(
      `${entry.selfPercent.toFixed(1).padStart(5)} % self ${entry.totalPercent.toFixed(1).padStart(5)} % total  ${entry.name}\n`,
    );
  }
}
