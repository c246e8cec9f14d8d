// The JSONPath subset CRD printer columns use: `.a.b`, `.a[0]`, `.a[*]`, `.a['b']` and
// `[?(@.type=="Ready")].status`.
import { isRecord } from "./types.ts";

type Step =
  | { kind: "field"; name: string }
  | { kind: "index"; index: number }
  | { kind: "all" }
  | { kind: "filter"; path: string[]; value: string | number | boolean };

export class JsonPathError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "JsonPathError";
  }
}

function parseLiteral(text: string): string | number | boolean {
  const trimmed = text.trim();
  const quoted = /^(["'])(.*)\1$/.exec(trimmed);
  if (quoted) return quoted[2] ?? "";
  if (trimmed === "true" || trimmed === "false") return trimmed === "true";
  const number = Number(trimmed);
  if (trimmed !== "" && !Number.isNaN(number)) return number;
  throw new JsonPathError(`unsupported JSONPath literal ${text}`);
}

export function parseJsonPath(expression: string): Step[] {
  const text = expression.replace(/^\{(.*)\}$/, "$1").replace(/^\$/, "");
  const steps: Step[] = [];
  let rest = text;
  const patterns: [RegExp, (match: RegExpExecArray) => Step][] = [
    [/^\.([A-Za-z0-9_-]+)/, (match) => ({ kind: "field", name: match[1] ?? "" })],
    [/^\[(\d+)\]/, (match) => ({ kind: "index", index: Number(match[1]) })],
    [/^\[\*\]/, () => ({ kind: "all" })],
    // A key in brackets is read as a path by client-go: its dots are escaped (`['cluster\.x-k8s\.io/name']`).
    [/^\[(["'])([^"']*)\1\]/, (match) => ({ kind: "field", name: (match[2] ?? "").replaceAll("\\.", ".") })],
    [
      /^\[\?\(@((?:\.[A-Za-z0-9_-]+)+)\s*==\s*([^)]+)\)\]/,
      (match) => ({ kind: "filter", path: (match[1] ?? "").slice(1).split("."), value: parseLiteral(match[2] ?? "") }),
    ],
  ];
  while (rest !== "") {
    let consumed = 0;
    for (const [pattern, toStep] of patterns) {
      const match = pattern.exec(rest);
      if (match) {
        steps.push(toStep(match));
        consumed = match[0].length;
        break;
      }
    }
    if (consumed === 0) throw new JsonPathError(`unsupported JSONPath expression ${expression}`);
    rest = rest.slice(consumed);
  }
  return steps;
}

function walk(value: unknown, path: string[]): unknown {
  let current = value;
  for (const name of path) current = isRecord(current) ? current[name] : undefined;
  return current;
}

/** Every value the path selects (a filter may select several). */
export function evaluateJsonPath(root: unknown, expression: string): unknown[] {
  let current: unknown[] = [root];
  for (const step of parseJsonPath(expression)) {
    const next: unknown[] = [];
    for (const value of current) {
      if (step.kind === "field" && isRecord(value) && value[step.name] !== undefined) next.push(value[step.name]);
      if (step.kind === "index" && Array.isArray(value) && step.index < value.length) next.push(value[step.index]);
      if (step.kind === "all" && Array.isArray(value)) next.push(...value);
      if (step.kind === "all" && isRecord(value)) next.push(...Object.values(value));
      if (step.kind === "filter" && Array.isArray(value)) {
        next.push(...value.filter((item) => walk(item, step.path) === step.value));
      }
    }
    current = next;
  }
  return current;
}
