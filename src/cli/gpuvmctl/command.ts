// The command tree: every command declares its name, flags and arguments once; parsing, `--help` and the
// shell completion scripts are all derived from these declarations.
import { parseArgs } from "node:util";
import type { Context } from "./context.ts";
import { UsageError } from "./errors.ts";
import { type FlagValue, Input } from "./input.ts";
import { OUTPUT_FORMATS } from "./output.ts";

export interface Flag {
  name: string;
  short?: string;
  type: "string" | "boolean";
  multiple?: boolean;
  /** Shown in help: `--type <type>`. */
  placeholder?: string;
  description: string;
  /** Allowed values (checked, and offered by shell completion). */
  choices?: readonly string[];
}

export interface Command {
  name: string;
  summary: string;
  /** Positional arguments as shown in help, e.g. `<vm>`. */
  args?: string;
  minArgs?: number;
  maxArgs?: number;
  /** The values the first argument can take (checked, and offered by shell completion). */
  argChoices?: readonly string[];
  flags?: readonly Flag[];
  /** More help text after the summary. */
  details?: string;
  examples?: readonly string[];
  /** Arguments after `--` are passed through (ssh). */
  passThrough?: boolean;
  run?(ctx: Context, input: Input): Promise<number | undefined>;
  subcommands?: readonly Command[];
}

export const GLOBAL_FLAGS: readonly Flag[] = [
  {
    name: "output",
    short: "o",
    type: "string",
    placeholder: "format",
    description: "table (default), json or yaml",
    choices: OUTPUT_FORMATS,
  },
  { name: "no-headers", type: "boolean", description: "tables without the header line" },
  { name: "no-color", type: "boolean", description: "no colour even on a terminal (NO_COLOR does the same)" },
  {
    name: "project",
    short: "p",
    type: "string",
    placeholder: "id",
    description: "project to use (default: GPUCLOUD_PROJECT_ID, then 'projects use', then the only one)",
  },
  {
    name: "api-url",
    type: "string",
    placeholder: "url",
    description: "API base URL ending in /v0.1 (default: GPUCLOUD_API_URL, then the login's)",
  },
  {
    name: "api-key",
    type: "string",
    placeholder: "key",
    description: "project API key instead of the login (prefer GPUCLOUD_API_KEY: flags show in ps)",
  },
  { name: "debug", type: "boolean", description: "log every API request on stderr (secrets redacted)" },
  { name: "help", short: "h", type: "boolean", description: "show help" },
];

export interface Resolved {
  path: Command[];
  input: Input;
  help: boolean;
}

function flagsFor(path: readonly Command[]): Flag[] {
  return [...GLOBAL_FLAGS, ...(path.at(-1)?.flags ?? [])];
}

export interface Located {
  path: Command[];
  /** The words that are not the command path: flags, their values, positional arguments. */
  remaining: string[];
  /** The words after `--`. */
  rest: string[];
}

/** Finds the command named by the leading words (flags may come anywhere, also before the command). */
export function locateCommand(root: Command, argv: readonly string[]): Located {
  const dash = argv.indexOf("--");
  const before = dash < 0 ? [...argv] : argv.slice(0, dash);
  const rest = dash < 0 ? [] : argv.slice(dash + 1);
  const path: Command[] = [root];
  const remaining: string[] = [];
  let positionals = 0;
  for (let i = 0; i < before.length; i++) {
    const token = before[i] ?? "";
    if (token.startsWith("-") && token !== "-") {
      remaining.push(token);
      if (takesValue(flagsFor(path), token) && i + 1 < before.length) remaining.push(before[++i] ?? "");
      continue;
    }
    const child = positionals === 0 ? path.at(-1)?.subcommands?.find((c) => c.name === token) : undefined;
    if (child !== undefined) path.push(child);
    else {
      positionals++;
      remaining.push(token);
    }
  }
  return { path, remaining, rest };
}

/** Node's parseArgs messages, said shortly. */
function flagError(error: unknown): string {
  const message = (error as Error).message.split("\n")[0] ?? "";
  const unknown = /^Unknown option '([^']+)'/.exec(message);
  if (unknown) return `unknown flag ${unknown[1]}`;
  const missing = /^Option '(?:-\w, )?(--[^ ]+) <value>' argument missing/.exec(message);
  if (missing) return `${missing[1]} needs a value`;
  return message;
}

/** Parses the flags and arguments of a located command. */
export function parseInput({ path, remaining, rest }: Located): Resolved {
  const command = path.at(-1);
  const flags = flagsFor(path);
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: remaining,
      strict: true,
      allowPositionals: true,
      options: Object.fromEntries(
        flags.map((flag) => [
          flag.name,
          {
            type: flag.type,
            ...(flag.short ? { short: flag.short } : {}),
            ...(flag.multiple ? { multiple: true } : {}),
          },
        ]),
      ),
    });
  } catch (error) {
    throw new UsageError(`${describe(path)}: ${flagError(error)}`, { cause: error });
  }
  const values = parsed.values as Record<string, FlagValue>;
  const help = values.help === true;
  if (!help) {
    for (const flag of flags) checkChoices(path, flag, values[flag.name]);
    if (rest.length > 0 && command?.passThrough !== true) {
      throw new UsageError(`${describe(path)} takes no arguments after --`);
    }
  }
  return { path, input: new Input(parsed.positionals, rest, values), help };
}

/** A subcommand the mistyped word probably meant. */
export function closest(command: Command, word: string): string | undefined {
  const names = (command.subcommands ?? []).map((c) => c.name);
  return names.find((n) => n.startsWith(word) || word.startsWith(n));
}

function takesValue(flags: readonly Flag[], token: string): boolean {
  if (token.includes("=")) return false;
  if (token.startsWith("--")) return flags.find((f) => `--${f.name}` === token)?.type === "string";
  // `-o json` takes the next word; `-ojson` carries its value.
  return token.length === 2 && flags.find((f) => f.short !== undefined && `-${f.short}` === token)?.type === "string";
}

function checkChoices(path: readonly Command[], flag: Flag, value: FlagValue): void {
  if (flag.choices === undefined || value === undefined || typeof value === "boolean") return;
  for (const one of Array.isArray(value) ? value.flatMap((v) => v.split(",")) : [value]) {
    if (!flag.choices.includes(one)) {
      throw new UsageError(`${describe(path)}: --${flag.name} must be one of ${flag.choices.join(", ")}, not '${one}'`);
    }
  }
}

/** `gpuvmctl vms stop` */
export function describe(path: readonly Command[]): string {
  return path.map((c) => c.name).join(" ");
}

/** The positional-argument count checks of a command. */
export function checkArgs(path: readonly Command[], input: Input): void {
  const command = path.at(-1);
  if (command === undefined) return;
  const min = command.minArgs ?? 0;
  const max = command.maxArgs ?? min;
  const count = input.args.length;
  const first = input.args[0];
  if (command.argChoices !== undefined && first !== undefined && !command.argChoices.includes(first)) {
    throw new UsageError(`${describe(path)}: expected ${command.argChoices.join(" or ")}, not '${first}'`);
  }
  if (count < min) throw new UsageError(`${describe(path)}: expected ${command.args ?? "arguments"}`);
  if (count > max) {
    const extra = input.args[max] ?? "";
    const hint = command.subcommands?.length ? ` (commands: ${command.subcommands.map((c) => c.name).join(", ")})` : "";
    throw new UsageError(`${describe(path)}: unexpected argument '${extra}'${hint}`);
  }
}

function flagLines(flags: readonly Flag[]): string[] {
  const label = (flag: Flag) =>
    `${flag.short ? `-${flag.short}, ` : "    "}--${flag.name}${flag.type === "string" ? ` <${flag.placeholder ?? "value"}>` : ""}`;
  const width = Math.max(...flags.map((f) => label(f).length));
  return flags.map((flag) => {
    const repeat = flag.multiple ? " (repeatable)" : "";
    return `  ${label(flag).padEnd(width)}  ${flag.description}${repeat}`;
  });
}

export function helpText(path: readonly Command[]): string {
  const command = path.at(-1);
  if (command === undefined) return "";
  const name = describe(path);
  const subcommands = command.subcommands ?? [];
  const usage: string[] = [];
  if (command.run !== undefined || subcommands.length === 0) {
    usage.push(
      `Usage: ${name}${command.args ? ` ${command.args}` : ""} [flags]${command.passThrough ? " [-- args]" : ""}`,
    );
  }
  if (subcommands.length > 0) usage.push(`${usage.length > 0 ? "       " : "Usage: "}${name} <command> [flags]`);
  const parts = [usage.join("\n"), "", command.summary];
  if (command.details) parts.push("", command.details);
  if (subcommands.length > 0) {
    const width = Math.max(...subcommands.map((c) => c.name.length));
    parts.push("", "Commands:", ...subcommands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`));
  }
  if (command.flags && command.flags.length > 0) parts.push("", "Flags:", ...flagLines(command.flags));
  parts.push("", "Global flags:", ...flagLines(GLOBAL_FLAGS));
  if (command.examples && command.examples.length > 0) {
    parts.push("", "Examples:", ...command.examples.map((e) => `  ${e}`));
  }
  if (subcommands.length > 0) parts.push("", `Run '${name} <command> --help' for more about a command.`);
  return `${parts.join("\n")}\n`;
}
