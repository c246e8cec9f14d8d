// gpuvmctl: resolve the command from argv, run it with a Context, and turn every failure into one line on
// stderr and an exit code (usage 2, auth 3, not found 4, API 5).
import { checkArgs, describe, helpText, resolveCommand } from "./command.ts";
import { ROOT } from "./commands/index.ts";
import { Context } from "./context.ts";
import { EXIT, toCliError, UsageError } from "./errors.ts";
import { colorAllowed, type Io } from "./io.ts";

export async function runCli(argv: readonly string[], io: Io): Promise<number> {
  let path: ReturnType<typeof resolveCommand>["path"] = [ROOT];
  try {
    const resolved = resolveCommand(ROOT, argv);
    path = resolved.path;
    const command = path.at(-1) ?? ROOT;
    if (resolved.help) {
      io.stdout.write(helpText(path));
      return EXIT.ok;
    }
    if (command.run === undefined) {
      const [word] = resolved.input.args;
      if (word !== undefined) throw new UsageError(`${describe(path)}: unknown command '${word}'`);
      io.stderr.write(helpText(path));
      return EXIT.usage;
    }
    checkArgs(path, resolved.input);
    return (await command.run(new Context(io, resolved.input), resolved.input)) ?? EXIT.ok;
  } catch (error) {
    const failure = toCliError(error);
    const label = colorAllowed(io, io.stderr) ? "\u001b[31merror:\u001b[0m" : "error:";
    io.stderr.write(`${label} ${failure.message}\n`);
    if (failure.exitCode === EXIT.usage) io.stderr.write(`Run '${describe(path)} --help' for usage.\n`);
    return failure.exitCode;
  }
}
