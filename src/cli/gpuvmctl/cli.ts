// gpuvmctl: resolve the command from argv, run it with a Context, and turn every failure into one line on
// stderr and an exit code (usage 2, auth 3, not found 4, API 5).
import { type Command, checkArgs, closest, describe, helpText, locateCommand, parseInput } from "./command.ts";
import { ROOT } from "./commands/index.ts";
import { Context } from "./context.ts";
import { EXIT, toCliError, UsageError } from "./errors.ts";
import { colorAllowed, type Io } from "./io.ts";

export async function runCli(argv: readonly string[], io: Io): Promise<number> {
  const located = locateCommand(ROOT, argv);
  const path: Command[] = located.path;
  try {
    const resolved = parseInput(located);
    const command = path.at(-1) ?? ROOT;
    if (resolved.help) {
      io.stdout.write(helpText(path));
      return EXIT.ok;
    }
    if (command.run === undefined) {
      const [word] = resolved.input.args;
      if (word !== undefined) {
        const guess = closest(command, word);
        throw new UsageError(
          `${describe(path)}: unknown command '${word}'${guess ? ` (did you mean '${guess}'?)` : ""}`,
        );
      }
      io.stderr.write(helpText(path));
      return EXIT.usage;
    }
    checkArgs(path, resolved.input);
    return (await command.run(new Context(io, resolved.input), resolved.input)) ?? EXIT.ok;
  } catch (error) {
    const failure = toCliError(error);
    const label = colorAllowed(io, io.stderr, argv.includes("--no-color")) ? "\u001b[31merror:\u001b[0m" : "error:";
    io.stderr.write(`${label} ${failure.message}\n`);
    if (failure.exitCode === EXIT.usage) io.stderr.write(`Run '${describe(path)} --help' for usage.\n`);
    return failure.exitCode;
  }
}
