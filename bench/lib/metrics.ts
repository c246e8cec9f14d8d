// Reading the operator's /metrics (Prometheus text format) and the simulator's request counts.

export type Samples = Map<string, number>;

/** `name{labels} value` lines into a map keyed by the series as written (`name{a="b"}`). */
export function parsePrometheus(text: string): Samples {
  const samples: Samples = new Map();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const space = line.lastIndexOf(" ");
    samples.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return samples;
}

/** The operator's /metrics, or only the families named (`?name=`: a sampler's scrape costs the operator little). */
export async function scrape(url: string, names: readonly string[] = []): Promise<Samples> {
  const query = names.map((name) => `name=${encodeURIComponent(name)}`).join("&");
  const response = await fetch(query === "" ? url : `${url}?${query}`);
  return parsePrometheus(await response.text());
}

/** Sum of the series of `name` whose labels match every `labels` regex. */
export function sumOf(samples: Samples, name: string, labels: Record<string, RegExp> = {}): number {
  let total = 0;
  for (const [series, value] of samples) {
    const brace = series.indexOf("{");
    const seriesName = brace < 0 ? series : series.slice(0, brace);
    if (seriesName !== name) continue;
    const labelText = brace < 0 ? "" : series.slice(brace);
    const matches = Object.entries(labels).every(([label, pattern]) => {
      const found = new RegExp(`${label}="([^"]*)"`).exec(labelText);
      return found !== null && pattern.test(found[1] ?? "");
    });
    if (matches) total += value;
  }
  return total;
}

/** Kubernetes write requests the operator made (client-go's rest_client_requests_total). */
export function kubeWrites(samples: Samples): number {
  return sumOf(samples, "rest_client_requests_total", { method: /^(POST|PUT|PATCH|DELETE)$/ });
}

export type RequestCounts = Record<string, number>;

export async function simulatorCounts(adminUrl: string): Promise<RequestCounts> {
  const answer = (await (await fetch(`${adminUrl}/requests`)).json()) as { counts: RequestCounts };
  return answer.counts;
}

export async function resetSimulatorCounts(adminUrl: string): Promise<void> {
  await (await fetch(`${adminUrl}/requests`, { method: "DELETE" })).text();
}

/** API calls (the admin API left out). */
export function apiCalls(counts: RequestCounts): [string, number][] {
  return Object.entries(counts).filter(([route]) => !route.includes("/_sim"));
}

export function totalCalls(counts: RequestCounts): number {
  return apiCalls(counts).reduce((sum, [, n]) => sum + n, 0);
}

export function callsMatching(counts: RequestCounts, pattern: RegExp): number {
  return apiCalls(counts)
    .filter(([route]) => pattern.test(route))
    .reduce((sum, [, n]) => sum + n, 0);
}

export function difference(after: RequestCounts, before: RequestCounts): RequestCounts {
  const result: RequestCounts = {};
  for (const [route, n] of Object.entries(after)) {
    const delta = n - (before[route] ?? 0);
    if (delta !== 0) result[route] = delta;
  }
  return result;
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] as number;
}
