#!/usr/bin/env node
// gpuvmctl: the command line for the GPU cloud account, catalogue, resources, usage and cost (docs/cli.md).
import { runCli } from "./cli.ts";
import { realIo } from "./io.ts";

runCli(process.argv.slice(2), realIo()).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`gpuvmctl: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
