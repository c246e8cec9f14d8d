// A small interpreter for the CEL forms CRD `x-kubernetes-validations` rules use here: literals, `self`,
// `oldSelf`, member access, `has()`, comparisons, `&&`/`||`/`!`, `?:`, arithmetic, `in`, the functions of
// cel-library.ts (`size()`, string methods, `format()`, Kubernetes' IP and CIDR libraries) and the
// `all`/`exists`/`map`/`filter` macros. This file evaluates the AST of cel-parser.ts and says which rules are in
// the subset; anything else raises CelUnsupportedError and the caller skips the rule.
import { CelEvaluationError, callFunction, LIBRARY_FUNCTIONS } from "./cel-library.ts";
import { type CelNode, CelUnsupportedError, parseCel } from "./cel-parser.ts";
import { deepEqual, isRecord } from "./types.ts";

/** The forms that take their arguments unevaluated. */
const MACROS = ["all", "exists", "exists_one", "map", "filter"];
const KNOWN_FUNCTIONS = new Set(["has", ...MACROS, ...LIBRARY_FUNCTIONS]);

function unknownFunctions(node: CelNode): string[] {
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

function asBoolean(value: unknown): boolean {
  if (typeof value !== "boolean") throw new CelEvaluationError("expected a bool");
  return value;
}

function present(node: CelNode, scope: Scope): boolean {
  if (node.t !== "member") throw new CelUnsupportedError("has() needs a field selection");
  const target = evaluate(node.target, scope);
  return isRecord(target) && target[node.name] !== undefined;
}

function macro(node: Extract<CelNode, { t: "call" }>, scope: Scope): unknown {
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

function call(node: Extract<CelNode, { t: "call" }>, scope: Scope): unknown {
  if (node.name === "has" && node.target === undefined) {
    const [arg] = node.args;
    if (arg === undefined) throw new CelUnsupportedError("has() needs an argument");
    return present(arg, scope);
  }
  if (MACROS.includes(node.name)) return macro(node, scope);
  const target = node.target === undefined ? undefined : evaluate(node.target, scope);
  return callFunction(
    node.name,
    target,
    node.args.map((arg) => evaluate(arg, scope)),
  );
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

function select(node: Extract<CelNode, { t: "member" | "index" }>, scope: Scope): unknown {
  const target = evaluate(node.target, scope);
  const key = node.t === "member" ? node.name : evaluate(node.index, scope);
  let value: unknown;
  if (Array.isArray(target) && typeof key === "number") value = target[key];
  else if (isRecord(target) && typeof key === "string") value = target[key];
  if (value === undefined) throw new CelEvaluationError(`no such key: ${String(key)}`);
  return value;
}

/** `&&` and `||` as CEL defines them: an error on one side is absorbed when the other side decides. */
function logical(node: Extract<CelNode, { t: "binary" }>, scope: Scope): boolean {
  const deciding = node.op === "||";
  const attempt = (side: CelNode): boolean | CelEvaluationError => {
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

function binary(node: Extract<CelNode, { t: "binary" }>, scope: Scope): unknown {
  if (node.op === "&&" || node.op === "||") return logical(node, scope);
  const left = evaluate(node.left, scope);
  const right = evaluate(node.right, scope);
  if (["==", "!=", "<", "<=", ">", ">=", "in"].includes(node.op)) return compare(node.op, left, right);
  return arithmetic(node.op, left, right);
}

function evaluate(node: CelNode, scope: Scope): unknown {
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
