// A small interpreter for the CEL forms CRD `x-kubernetes-validations` rules use here: literals, `self`,
// `oldSelf`, member access, `has()`, comparisons, `&&`/`||`/`!`, `?:`, arithmetic, `in`, `size()`, string
// methods, `format()`, Kubernetes' IP and CIDR libraries (cel-network.ts) and the `all`/`exists`/`map`/`filter`
// macros. Anything else raises CelUnsupportedError and the caller skips the rule.
import {
  CelCidr,
  CelIp,
  containsCidr,
  containsIp,
  ipMember,
  isCidr,
  isIp,
  masked,
  NetworkParseError,
  parseCidr,
  parseIp,
} from "./cel-network.ts";
import { deepEqual, isRecord } from "./types.ts";

export class CelUnsupportedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CelUnsupportedError";
  }
}

export class CelEvaluationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CelEvaluationError";
  }
}

type Node =
  | { t: "lit"; value: unknown }
  | { t: "ident"; name: string }
  | { t: "member"; target: Node; name: string }
  | { t: "index"; target: Node; index: Node }
  | { t: "call"; name: string; target: Node | undefined; args: Node[] }
  | { t: "unary"; op: string; arg: Node }
  | { t: "binary"; op: string; left: Node; right: Node }
  | { t: "cond"; test: Node; then: Node; otherwise: Node }
  | { t: "list"; items: Node[] };

const TOKEN =
  /\s*(?:(\d+\.\d+|\d+)|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|([A-Za-z_][A-Za-z0-9_]*)|(==|!=|<=|>=|&&|\|\||[-+*/%<>!?:.,()[\]]))/y;

function tokenize(source: string): string[] {
  const tokens: string[] = [];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < source.length) {
    if (/^\s*$/.test(source.slice(TOKEN.lastIndex))) break;
    const match = TOKEN.exec(source);
    if (!match) throw new CelUnsupportedError(`cannot tokenize CEL near "${source.slice(TOKEN.lastIndex)}"`);
    tokens.push(match[1] ?? match[2] ?? match[3] ?? match[4] ?? "");
  }
  return tokens;
}

class Parser {
  #tokens: string[];
  #position = 0;

  constructor(tokens: string[]) {
    this.#tokens = tokens;
  }

  parse(): Node {
    const node = this.#conditional();
    if (this.#position !== this.#tokens.length) throw new CelUnsupportedError(`unexpected "${this.#peek()}"`);
    return node;
  }

  #peek(): string | undefined {
    return this.#tokens[this.#position];
  }

  #take(expected?: string): string {
    const token = this.#tokens[this.#position++];
    if (token === undefined || (expected !== undefined && token !== expected)) {
      throw new CelUnsupportedError(`expected "${expected ?? "a token"}", found "${token ?? "end"}"`);
    }
    return token;
  }

  #conditional(): Node {
    const test = this.#binary(0);
    if (this.#peek() !== "?") return test;
    this.#take("?");
    const then = this.#conditional();
    this.#take(":");
    return { t: "cond", test, then, otherwise: this.#conditional() };
  }

  static readonly LEVELS = [["||"], ["&&"], ["==", "!=", "<", "<=", ">", ">=", "in"], ["+", "-"], ["*", "/", "%"]];

  #binary(level: number): Node {
    const operators = Parser.LEVELS[level];
    if (operators === undefined) return this.#unary();
    let left = this.#binary(level + 1);
    for (let op = this.#peek(); op !== undefined && operators.includes(op); op = this.#peek()) {
      this.#take();
      left = { t: "binary", op, left, right: this.#binary(level + 1) };
    }
    return left;
  }

  #unary(): Node {
    const op = this.#peek();
    if (op === "!" || op === "-") {
      this.#take();
      return { t: "unary", op, arg: this.#unary() };
    }
    return this.#postfix();
  }

  #args(): Node[] {
    this.#take("(");
    const args: Node[] = [];
    while (this.#peek() !== ")") {
      args.push(this.#conditional());
      if (this.#peek() === ",") this.#take(",");
    }
    this.#take(")");
    return args;
  }

  #postfix(): Node {
    let node = this.#primary();
    for (;;) {
      if (this.#peek() === ".") {
        this.#take(".");
        const name = this.#take();
        node =
          this.#peek() === "("
            ? { t: "call", name, target: node, args: this.#args() }
            : { t: "member", target: node, name };
      } else if (this.#peek() === "[") {
        this.#take("[");
        const index = this.#conditional();
        this.#take("]");
        node = { t: "index", target: node, index };
      } else {
        return node;
      }
    }
  }

  #primary(): Node {
    const token = this.#take();
    if (token === "(") {
      const inner = this.#conditional();
      this.#take(")");
      return inner;
    }
    if (token === "[") {
      const items: Node[] = [];
      while (this.#peek() !== "]") {
        items.push(this.#conditional());
        if (this.#peek() === ",") this.#take(",");
      }
      this.#take("]");
      return { t: "list", items };
    }
    if (/^\d/.test(token)) return { t: "lit", value: Number(token) };
    if (/^["']/.test(token)) return { t: "lit", value: JSON.parse(`"${token.slice(1, -1).replace(/"/g, '\\"')}"`) };
    if (token === "true" || token === "false") return { t: "lit", value: token === "true" };
    if (token === "null") return { t: "lit", value: null };
    if (/^[A-Za-z_]/.test(token)) {
      return this.#peek() === "("
        ? { t: "call", name: token, target: undefined, args: this.#args() }
        : { t: "ident", name: token };
    }
    throw new CelUnsupportedError(`unexpected "${token}"`);
  }
}

export function parseCel(source: string): Node {
  return new Parser(tokenize(source)).parse();
}

const KNOWN_FUNCTIONS = new Set([
  "has",
  "all",
  "exists",
  "exists_one",
  "map",
  "filter",
  "size",
  "matches",
  "startsWith",
  "endsWith",
  "contains",
  "lowerAscii",
  "upperAscii",
  "substring",
  "indexOf",
  "lastIndexOf",
  "string",
  "int",
  "format",
  "cidr",
  "isCIDR",
  "ip",
  "isIP",
  "masked",
  "prefixLength",
  "containsIP",
  "containsCIDR",
  "family",
  "isUnspecified",
  "isLoopback",
  "isLinkLocalMulticast",
  "isLinkLocalUnicast",
  "isGlobalUnicast",
]);

function unknownFunctions(node: Node): string[] {
  switch (node.t) {
    case "call":
      return [
        ...(KNOWN_FUNCTIONS.has(node.name) ? [] : [node.name]),
        ...(node.target ? unknownFunctions(node.target) : []),
        ...node.args.flatMap(unknownFunctions),
      ];
    case "member":
      return unknownFunctions(node.target);
    case "index":
      return [...unknownFunctions(node.target), ...unknownFunctions(node.index)];
    case "unary":
      return unknownFunctions(node.arg);
    case "binary":
      return [...unknownFunctions(node.left), ...unknownFunctions(node.right)];
    case "cond":
      return [...unknownFunctions(node.test), ...unknownFunctions(node.then), ...unknownFunctions(node.otherwise)];
    case "list":
      return node.items.flatMap(unknownFunctions);
    default:
      return [];
  }
}

/** Whether a rule is inside the subset this interpreter evaluates (checked without data). */
export function isSupportedRule(rule: string): boolean {
  try {
    return unknownFunctions(parseCel(rule)).length === 0;
  } catch (error) {
    if (error instanceof CelUnsupportedError || error instanceof SyntaxError) return false;
    throw error;
  }
}

export function referencesOldSelf(source: string): boolean {
  return /\boldSelf\b/.test(source);
}

type Scope = Map<string, unknown>;

function sizeOf(value: unknown): number {
  if (typeof value === "string" || Array.isArray(value)) return value.length;
  if (isRecord(value)) return Object.keys(value).length;
  throw new CelEvaluationError("size() needs a string, list or map");
}

function asBoolean(value: unknown): boolean {
  if (typeof value !== "boolean") throw new CelEvaluationError("expected a bool");
  return value;
}

function present(node: Node, scope: Scope): boolean {
  if (node.t !== "member") throw new CelUnsupportedError("has() needs a field selection");
  const target = evaluate(node.target, scope);
  return isRecord(target) && target[node.name] !== undefined;
}

function macro(node: Extract<Node, { t: "call" }>, scope: Scope): unknown {
  const [variable, body] = node.args;
  if (node.target === undefined || variable?.t !== "ident" || body === undefined) {
    throw new CelUnsupportedError(`unsupported ${node.name}() form`);
  }
  const collection = evaluate(node.target, scope);
  const items = Array.isArray(collection) ? collection : isRecord(collection) ? Object.keys(collection) : undefined;
  if (items === undefined) throw new CelEvaluationError(`${node.name}() needs a list or map`);
  const run = (item: unknown): unknown => evaluate(body, new Map(scope).set(variable.name, item));
  switch (node.name) {
    case "all":
      return items.every((item) => asBoolean(run(item)));
    case "exists":
      return items.some((item) => asBoolean(run(item)));
    case "exists_one":
      return items.filter((item) => asBoolean(run(item))).length === 1;
    case "map":
      return items.map(run);
    default:
      return items.filter((item) => asBoolean(run(item)));
  }
}

function call(node: Extract<Node, { t: "call" }>, scope: Scope): unknown {
  if (node.name === "has" && node.target === undefined) {
    const [arg] = node.args;
    if (arg === undefined) throw new CelUnsupportedError("has() needs an argument");
    return present(arg, scope);
  }
  if (["all", "exists", "exists_one", "map", "filter"].includes(node.name)) return macro(node, scope);
  const target = node.target === undefined ? undefined : evaluate(node.target, scope);
  const args = node.args.map((arg) => evaluate(arg, scope));
  const text = (value: unknown): string => {
    if (typeof value !== "string") throw new CelEvaluationError(`${node.name}() needs a string`);
    return value;
  };
  switch (node.name) {
    case "size":
      return sizeOf(node.target === undefined ? args[0] : target);
    case "matches":
      return new RegExp(text(args[0])).test(text(target));
    case "startsWith":
      return text(target).startsWith(text(args[0]));
    case "endsWith":
      return text(target).endsWith(text(args[0]));
    case "contains":
      return text(target).includes(text(args[0]));
    case "lowerAscii":
      return text(target).toLowerCase();
    case "upperAscii":
      return text(target).toUpperCase();
    case "substring": {
      const value = text(target);
      const start = args[0];
      const end = args[1] ?? value.length;
      if (typeof start !== "number" || typeof end !== "number" || start < 0 || end > value.length || start > end) {
        throw new CelEvaluationError("substring() index out of range");
      }
      return value.slice(start, end);
    }
    case "indexOf":
      return text(target).indexOf(text(args[0]));
    case "lastIndexOf":
      return text(target).lastIndexOf(text(args[0]));
    case "string":
      return String(args[0]);
    case "int": {
      const value = args[0];
      if (typeof value === "number") return Math.trunc(value);
      if (typeof value === "string" && /^[-+]?\d+$/.test(value)) return Number.parseInt(value, 10);
      throw new CelEvaluationError(
        `type conversion error from '${typeof value === "string" ? "string" : "dyn"}' to 'int'`,
      );
    }
    case "format":
      return format(text(target), args[0]);
    case "cidr":
    case "isCIDR":
    case "ip":
    case "isIP":
    case "masked":
    case "prefixLength":
    case "containsIP":
    case "containsCIDR":
    case "family":
    case "isUnspecified":
    case "isLoopback":
    case "isLinkLocalMulticast":
    case "isLinkLocalUnicast":
    case "isGlobalUnicast":
      return network(node.name, target, args, text);
    default:
      throw new CelUnsupportedError(`unsupported CEL function ${node.name}()`);
  }
}

function compare(op: string, left: unknown, right: unknown): boolean {
  if (op === "==") return deepEqual(left, right);
  if (op === "!=") return !deepEqual(left, right);
  if (op === "in") {
    if (Array.isArray(right)) return right.some((item) => deepEqual(item, left));
    if (isRecord(right)) return typeof left === "string" && right[left] !== undefined;
    throw new CelEvaluationError("'in' needs a list or map");
  }
  const comparable =
    (typeof left === "number" && typeof right === "number") || (typeof left === "string" && typeof right === "string");
  if (!comparable) throw new CelEvaluationError(`cannot compare with ${op}`);
  const [a, b] = [left as number | string, right as number | string];
  return op === "<" ? a < b : op === "<=" ? a <= b : op === ">" ? a > b : a >= b;
}

function arithmetic(op: string, left: unknown, right: unknown): unknown {
  if (op === "+" && typeof left === "string" && typeof right === "string") return left + right;
  if (op === "+" && Array.isArray(left) && Array.isArray(right)) return [...left, ...right];
  if (typeof left !== "number" || typeof right !== "number") throw new CelEvaluationError(`bad operands for ${op}`);
  if ((op === "/" || op === "%") && right === 0) throw new CelEvaluationError("division by zero");
  const bothIntegers = Number.isInteger(left) && Number.isInteger(right);
  switch (op) {
    case "+":
      return left + right;
    case "-":
      return left - right;
    case "*":
      return left * right;
    case "/":
      return bothIntegers ? Math.trunc(left / right) : left / right;
    default:
      return left % right;
  }
}

/** The strings extension's `format()`: `%s` and `%d` (and `%%`); other verbs are outside the subset. */
function format(template: string, args: unknown): string {
  if (!Array.isArray(args)) throw new CelEvaluationError("format() needs a list of arguments");
  let next = 0;
  return template.replace(/%(.)/g, (_, verb: string) => {
    if (verb === "%") return "%";
    if (verb !== "s" && verb !== "d") throw new CelUnsupportedError(`format() verb %${verb}`);
    if (next >= args.length) throw new CelEvaluationError("format: not enough arguments");
    const value = args[next++];
    if (verb === "d" && typeof value !== "number") throw new CelEvaluationError("format: %d needs an integer");
    return Array.isArray(value) ? `[${value.map(String).join(", ")}]` : String(value);
  });
}

/** `cidr()`, `ip()`, `isCIDR()`, `isIP()`: the library's global functions. */
function networkFunction(name: string, arg: unknown, text: (value: unknown) => string): unknown {
  if (name === "cidr") return parseCidr(text(arg));
  if (name === "ip") return parseIp(text(arg));
  if (name === "isCIDR") return isCidr(text(arg));
  if (name === "isIP") return isIp(text(arg));
  return undefined;
}

/** The members of a CIDR: `ip()`, `masked()`, `prefixLength()`, `containsIP()`, `containsCIDR()`. */
function cidrMember(name: string, cidr: CelCidr, arg: unknown, text: (value: unknown) => string): unknown {
  if (name === "ip") return cidr.ip;
  if (name === "masked") return masked(cidr);
  if (name === "prefixLength") return cidr.bits;
  if (name === "containsIP") return containsIp(cidr, arg instanceof CelIp ? arg : parseIp(text(arg)));
  if (name === "containsCIDR") return containsCidr(cidr, arg instanceof CelCidr ? arg : parseCidr(text(arg)));
  return undefined;
}

function network(name: string, target: unknown, args: unknown[], text: (value: unknown) => string): unknown {
  const [arg] = args;
  let value: unknown;
  try {
    if (target === undefined) value = networkFunction(name, arg, text);
    else if (target instanceof CelCidr) value = cidrMember(name, target, arg, text);
    else if (target instanceof CelIp) value = ipMember(name, target);
  } catch (error) {
    if (error instanceof NetworkParseError) throw new CelEvaluationError(error.message);
    throw error;
  }
  if (value === undefined) throw new CelEvaluationError(`no such overload: ${name}`);
  return value;
}

function select(node: Extract<Node, { t: "member" | "index" }>, scope: Scope): unknown {
  const target = evaluate(node.target, scope);
  const key = node.t === "member" ? node.name : evaluate(node.index, scope);
  let value: unknown;
  if (Array.isArray(target) && typeof key === "number") value = target[key];
  else if (isRecord(target) && typeof key === "string") value = target[key];
  if (value === undefined) throw new CelEvaluationError(`no such key: ${String(key)}`);
  return value;
}

/** `&&` and `||` as CEL defines them: an error on one side is absorbed when the other side decides. */
function logical(node: Extract<Node, { t: "binary" }>, scope: Scope): boolean {
  const deciding = node.op === "||";
  const attempt = (side: Node): boolean | CelEvaluationError => {
    try {
      return asBoolean(evaluate(side, scope));
    } catch (error) {
      if (error instanceof CelEvaluationError) return error;
      throw error;
    }
  };
  const left = attempt(node.left);
  if (left === deciding) return deciding;
  const right = attempt(node.right);
  if (right === deciding) return deciding;
  if (left instanceof CelEvaluationError) throw left;
  if (right instanceof CelEvaluationError) throw right;
  return !deciding;
}

function binary(node: Extract<Node, { t: "binary" }>, scope: Scope): unknown {
  if (node.op === "&&" || node.op === "||") return logical(node, scope);
  const left = evaluate(node.left, scope);
  const right = evaluate(node.right, scope);
  if (["==", "!=", "<", "<=", ">", ">=", "in"].includes(node.op)) return compare(node.op, left, right);
  return arithmetic(node.op, left, right);
}

function evaluate(node: Node, scope: Scope): unknown {
  switch (node.t) {
    case "lit":
      return node.value;
    case "ident":
      if (!scope.has(node.name)) throw new CelUnsupportedError(`unknown identifier ${node.name}`);
      return scope.get(node.name);
    case "member":
    case "index":
      return select(node, scope);
    case "call":
      return call(node, scope);
    case "unary": {
      const value = evaluate(node.arg, scope);
      if (node.op === "!") return !asBoolean(value);
      if (typeof value !== "number") throw new CelEvaluationError("unary minus needs a number");
      return -value;
    }
    case "binary":
      return binary(node, scope);
    case "cond":
      return asBoolean(evaluate(node.test, scope)) ? evaluate(node.then, scope) : evaluate(node.otherwise, scope);
    case "list":
      return node.items.map((item) => evaluate(item, scope));
  }
}

/** What evaluating an expression gave: its value, an evaluation error (its text), or "outside the subset". */
export type CelResult = { value: unknown } | { error: string } | "unsupported";

/** Evaluate an expression (a rule or a messageExpression) with `self` and, when given, `oldSelf`. */
export function evaluateExpression(source: string, self: unknown, oldSelf?: unknown): CelResult {
  try {
    const scope: Scope = new Map<string, unknown>([["self", self]]);
    if (oldSelf !== undefined) scope.set("oldSelf", oldSelf);
    return { value: evaluate(parseCel(source), scope) };
  } catch (error) {
    if (error instanceof CelUnsupportedError || error instanceof SyntaxError) return "unsupported";
    if (error instanceof CelEvaluationError) return { error: error.message };
    throw error;
  }
}

/**
 * Evaluate one rule. Returns true/false, "unsupported" when the expression is outside the subset (the caller
 * skips it), or the evaluation error (a missing field, a failed conversion), which the API server reports as
 * "<error> evaluating rule: <message>".
 */
export function evaluateRule(
  rule: string,
  self: unknown,
  oldSelf?: unknown,
): boolean | "unsupported" | { error: string } {
  const result = evaluateExpression(rule, self, oldSelf);
  if (result === "unsupported" || "error" in result) return result;
  return result.value === true;
}
