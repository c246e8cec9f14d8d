// Bad command-line input of the gpuvm-operator commands: one error type, Node's flag parser with its complaints
// turned into it, and the exit every command gives for it (the message and the help on stderr, code 2).
import { type ParseArgsConfig, parseArgs } from "node:util";

export class UsageError extends Error {
  override name = "UsageError";
}

/** Node's parseArgs (its defaults: strict, no positionals); an unknown flag or a missing value is a UsageError. */
export function parseFlags<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error), { cause: error });
  }
}

/**
 * A command's parsed flags, or the exit code when there is nothing to run: 0 after printing the help for
 * --help, 2 after printing the UsageError and the help.
 */
export async function flagsOrExitCode<T extends object>(
  command: string,
  help: string,
  parse: () => T | "help" | Promise<T | "help">,
): Promise<T | number> {
  let parsed: T | "help";
  try {
    parsed = await parse();
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`gpuvm-operator ${command}: ${error.message}\n\n${help}`);
    return 2;
  }
  if (parsed === "help") {
    process.stdout.write(help);
    return 0;
  }
  return parsed;
}
