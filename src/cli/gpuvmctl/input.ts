// A command's input as parsed from its command line: positional arguments, arguments after `--`, and flag values
// read by name. Its own module so that the command tree (command.ts) and the context every command gets
// (context.ts) can both use it without importing each other.

export type FlagValue = string | boolean | string[] | undefined;

export class Input {
  readonly args: readonly string[];
  /** Arguments after `--` (only for commands that pass them through). */
  readonly rest: readonly string[];
  readonly #values: Record<string, FlagValue>;

  constructor(args: string[], rest: string[], values: Record<string, FlagValue>) {
    this.args = args;
    this.rest = rest;
    this.#values = values;
  }

  string(name: string): string | undefined {
    const value = this.#values[name];
    return typeof value === "string" ? value : undefined;
  }

  bool(name: string): boolean {
    return this.#values[name] === true;
  }

  /** A repeatable flag; each value may also be comma-separated (`--location a,b`). */
  list(name: string): string[] {
    const value = this.#values[name];
    const values = Array.isArray(value) ? value : typeof value === "string" ? [value] : [];
    return values
      .flatMap((v) => v.split(","))
      .map((v) => v.trim())
      .filter((v) => v !== "");
  }

  has(name: string): boolean {
    return this.#values[name] !== undefined;
  }

  arg(index: number): string {
    return this.args[index] ?? "";
  }
}
