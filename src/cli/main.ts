#!/usr/bin/env node
// gpuvm-operator command-line entry point. Each subcommand lives in ./commands/<name>.ts and exports
// `main(argv): Promise<number>`; it is imported lazily so that `simulator` does not load the Kubernetes client.
const COMMANDS: Record<string, { file: string; summary: string }> = {
  run: { file: "./commands/run.ts", summary: "run the operator (controllers) against a Kubernetes API" },
  simulator: { file: "./commands/simulator.ts", summary: "run the GPU cloud API simulator" },
  playground: {
    file: "./commands/playground.ts",
    summary: "start the simulator, the Kubernetes API test double and the operator together",
  },
  "kube-double": { file: "./commands/kube-double.ts", summary: "run the Kubernetes API test double alone" },
  generate: { file: "./commands/generate.ts", summary: "write crds/*.yaml (and derived files) from src/api" },
  "kube-build": {
    file: "./commands/kube-build.ts",
    summary: "build the real Kubernetes control plane for the tests and `playground --kube real` (needs Go)",
  },
  chaos: {
    file: "./commands/chaos.ts",
    summary: "run the operator under faults, SIGKILLs and hostile tenants, and check its invariants",
  },
};

function usage(): string {
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(12)} ${c.summary}`);
  return `Usage: gpuvm-operator <command> [flags]\n\nCommands:\n${lines.join("\n")}\n\nRun 'gpuvm-operator <command> --help' for the flags of a command.\n`;
}

async function dispatch(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(usage());
    return name === undefined ? 2 : 0;
  }
  const command = COMMANDS[name];
  if (command === undefined) {
    process.stderr.write(`gpuvm-operator: unknown command '${name}'\n\n${usage()}`);
    return 2;
  }
  // The operator loads only the parts of the Kubernetes client it uses (see runtime/kube-client-loading.ts).
  if (name === "run") (await import("../runtime/kube-client-loading.ts")).loadSlimKubeClient();
  const module = (await import(command.file)) as { main: (argv: string[]) => Promise<number> };
  return module.main(rest);
}

dispatch(process.argv.slice(2)).then(
  (code) => {
    // Long-running commands resolve only when they have shut down; exit with their code.
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(
      `gpuvm-operator: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exitCode = 1;
  },
);
