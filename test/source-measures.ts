// The measures the architecture test holds src/ to: a file's lines, the lines of each function, and the cycles of
// the import graph. Each is meant to be read as a person reads the code, and says below how it counts.
import { parseAst } from "rolldown/parseAst";

/** Lines as `wc -l` counts them: newline characters, plus one for a last line without its newline. */
export function lineCount(text: string): number {
  if (text === "") return 0;
  const newlines = text.split("\n").length - 1;
  return text.endsWith("\n") ? newlines : newlines + 1;
}

export interface FunctionSpan {
  /** The name it is declared or assigned under (a method's key, a variable's name), or `(anonymous)`. */
  name: string;
  /** Its first line (a method's: the line of its name). */
  line: number;
  /** From its first line to the line of its closing brace (or last expression), both included. */
  lines: number;
}

const FUNCTION_TYPES = new Set(["FunctionDeclaration", "FunctionExpression", "ArrowFunctionExpression"]);
/** Nodes that give the function they hold a name and start where that name starts (methods, getters, fields). */
const NAMING_MEMBERS = new Set(["MethodDefinition", "Property", "PropertyDefinition"]);

function isNode(value: unknown): value is { type: string; start: number; end: number } & Record<string, unknown> {
  return typeof value === "object" && value !== null && typeof (value as { type?: unknown }).type === "string";
}

function nameOf(node: unknown): string | undefined {
  if (!isNode(node)) return undefined;
  if (node.type === "Identifier" || node.type === "PrivateIdentifier") return String(node.name);
  if (node.type === "Literal") return String(node.value);
  return undefined;
}

/**
 * Every function of a TypeScript source, parsed (rolldown's parser, the one vitest's Vite runs on): declarations,
 * expressions, arrows, methods, getters, setters and constructors. A function counts every line it spans, blank
 * lines and comments included; a nested function counts on its own and inside the one that holds it. Type-only
 * signatures (overloads, interfaces, function types) have no body and do not count.
 */
export function functionSpans(source: string, fileName: string): FunctionSpan[] {
  const lineOf = lineIndex(source);
  const spans: FunctionSpan[] = [];
  const visit = (value: unknown, named?: Naming): void => {
    if (Array.isArray(value)) {
      for (const item of value) visit(item);
      return;
    }
    if (!isNode(value)) return;
    if (FUNCTION_TYPES.has(value.type) && value.body !== null && value.body !== undefined) {
      const first = lineOf(named?.start ?? value.start);
      const name = nameOf(value.id) ?? named?.name ?? "(anonymous)";
      spans.push({ name, line: first, lines: lineOf(value.end) - first + 1 });
    }
    for (const [key, child] of Object.entries(value)) {
      if (typeof child === "object" && child !== null) visit(child, namingOf(value, key, child));
    }
  };
  visit(parseAst(source, { lang: "ts" }, fileName));
  return spans;
}

interface Naming {
  name: string;
  start: number;
}

/** The name a node gives the function it holds under `key`: a method's key, a variable's name. */
function namingOf(node: { type: string; start: number } & Record<string, unknown>, key: string, child: unknown) {
  if (key === "value" && NAMING_MEMBERS.has(node.type))
    return { name: nameOf(node.key) ?? "(computed)", start: node.start };
  if (key !== "init" || node.type !== "VariableDeclarator") return undefined;
  const name = nameOf(node.id);
  return name === undefined || !isNode(child) ? undefined : { name, start: child.start };
}

/** The 1-based line of an offset of `source`. */
function lineIndex(source: string): (offset: number) => number {
  const lineStarts = [0];
  for (let index = source.indexOf("\n"); index !== -1; index = source.indexOf("\n", index + 1)) {
    lineStarts.push(index + 1);
  }
  return (offset) => {
    let low = 0;
    let high = lineStarts.length - 1;
    while (low < high) {
      const middle = (low + high + 1) >> 1;
      if ((lineStarts[middle] ?? 0) <= offset) low = middle;
      else high = middle - 1;
    }
    return low + 1;
  };
}

/**
 * The import cycles of a graph (module → the modules it imports): its strongly connected components of more than
 * one module, and a module that imports itself. Each is given as its modules, sorted; the list is sorted too.
 */
export function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  // Tarjan's algorithm: one depth-first walk, each component found when the walk leaves its first module.
  const index = new Map<string, number>();
  const lowest = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const connect = (module: string): void => {
    index.set(module, index.size);
    lowest.set(module, index.get(module) ?? 0);
    stack.push(module);
    onStack.add(module);
    for (const target of graph.get(module) ?? []) {
      if (!index.has(target)) {
        connect(target);
        lowest.set(module, Math.min(lowest.get(module) ?? 0, lowest.get(target) ?? 0));
      } else if (onStack.has(target)) {
        lowest.set(module, Math.min(lowest.get(module) ?? 0, index.get(target) ?? 0));
      }
    }
    if (lowest.get(module) !== index.get(module)) return;
    const component: string[] = [];
    for (let member = stack.pop(); member !== undefined; member = stack.pop()) {
      onStack.delete(member);
      component.push(member);
      if (member === module) break;
    }
    if (component.length > 1 || (graph.get(module) ?? []).includes(module)) cycles.push(component.sort());
  };
  for (const module of [...graph.keys()].sort()) if (!index.has(module)) connect(module);
  return cycles.sort((a, b) => (a[0] ?? "").localeCompare(b[0] ?? ""));
}
