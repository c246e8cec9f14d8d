#!/usr/bin/env node
// gpuvmctl: the command line for the GPU cloud account, catalogue, resources, usage and cost (docs/cli.md).
import { runCli } from "./cli.ts";
import { realIo } from "./io.ts";

// A reader that stops early (`gpuvmctl vms list | head -1`) closes the pipe: not a failure, and nothing is left to say.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0);
  throw error;
});

runCli(process.argv.slice(2), realIo()).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`gpuvmctl: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
