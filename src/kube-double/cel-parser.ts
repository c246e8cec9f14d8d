// The syntax of the CEL subset the double evaluates (cel.ts): the tokenizer, the AST and a recursive-descent
// parser with CEL's operator precedence. Anything it cannot read raises CelUnsupportedError: the caller then
// skips the rule, as outside the subset.

export class CelUnsupportedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CelUnsupportedError";
  }
}

export type CelNode =
  | { t: "lit"; value: unknown }
  | { t: "ident"; name: string }
  | { t: "member"; target: CelNode; name: string }
  | { t: "index"; target: CelNode; index: CelNode }
  | { t: "call"; name: string; target: CelNode | undefined; args: CelNode[] }
  | { t: "unary"; op: string; arg: CelNode }
  | { t: "binary"; op: string; left: CelNode; right: CelNode }
  | { t: "cond"; test: CelNode; then: CelNode; otherwise: CelNode }
  | { t: "list"; items: CelNode[] };

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

  parse(): CelNode {
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

  #conditional(): CelNode {
    const test = this.#binary(0);
    if (this.#peek() !== "?") return test;
    this.#take("?");
    const then = this.#conditional();
    this.#take(":");
    return { t: "cond", test, then, otherwise: this.#conditional() };
  }

  static readonly LEVELS = [["||"], ["&&"], ["==", "!=", "<", "<=", ">", ">=", "in"], ["+", "-"], ["*", "/", "%"]];

  #binary(level: number): CelNode {
    const operators = Parser.LEVELS[level];
    if (operators === undefined) return this.#unary();
    let left = this.#binary(level + 1);
    for (let op = this.#peek(); op !== undefined && operators.includes(op); op = this.#peek()) {
      this.#take();
      left = { t: "binary", op, left, right: this.#binary(level + 1) };
    }
    return left;
  }

  #unary(): CelNode {
    const op = this.#peek();
    if (op === "!" || op === "-") {
      this.#take();
      return { t: "unary", op, arg: this.#unary() };
    }
    return this.#postfix();
  }

  #args(): CelNode[] {
    this.#take("(");
    const args: CelNode[] = [];
    while (this.#peek() !== ")") {
      args.push(this.#conditional());
      if (this.#peek() === ",") this.#take(",");
    }
    this.#take(")");
    return args;
  }

  #postfix(): CelNode {
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

  #primary(): CelNode {
    const token = this.#take();
    if (token === "(") {
      const inner = this.#conditional();
      this.#take(")");
      return inner;
    }
    if (token === "[") {
      const items: CelNode[] = [];
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

export function parseCel(source: string): CelNode {
  return new Parser(tokenize(source)).parse();
}
