// What the monitoring tests need of PromQL and of the Prometheus exposition format: the metric names an
// expression reads, and the metric families a scrape exposes.

const FUNCTIONS_AND_KEYWORDS = new Set([
  // aggregations and keywords
  ...["sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values"],
  ...["group", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless"],
  ...["offset", "inf", "nan"],
]);

/** Metric names an expression selects (label matchers, ranges, grouping labels and functions left out). */
export function metricNamesOf(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, " ")
    .replace(/\[[^\]]*\]/g, " ")
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ")
    .replace(/\$\{?\w+\}?/g, " ");
  const names = new Set<string>();
  for (const match of stripped.matchAll(/(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    const [, name, call] = match;
    if (name === undefined || call !== undefined || FUNCTIONS_AND_KEYWORDS.has(name.toLowerCase())) continue;
    names.add(name);
  }
  return [...names].sort();
}

/** Metric families of an exposition (`# TYPE name type`), with the sample names each allows. */
export function exposedSampleNames(exposition: string): Set<string> {
  const names = new Set<string>();
  for (const match of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, family, type] = match;
    if (family === undefined) continue;
    names.add(family);
    if (type === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) names.add(`${family}${suffix}`);
    if (type === "summary") for (const suffix of ["_sum", "_count"]) names.add(`${family}${suffix}`);
  }
  return names;
}
