// `gpuvm-operator kube-double`: run the Kubernetes API test double alone (for kubectl and local runs).
import { parseArgs } from "node:util";
import { pino } from "pino";
import { startKubeDouble } from "../../kube-double/index.ts";
import { serveUntilSignal } from "../serve-until-signal.ts";

const USAGE = `Usage: gpuvm-operator kube-double [flags]

Runs the Kubernetes API test double (a small HTTP server that speaks enough of the Kubernetes API for
kubectl and @kubernetes/client-node). For development and tests only.

Flags:
  --port <n>              port to listen on (default 0: a free port)
  --host <addr>           address to listen on (default 127.0.0.1)
  --crd-dir <dir>         serve the CustomResourceDefinitions in <dir>/*.yaml
  --state-file <path>     keep objects in <path> across restarts
  --kubeconfig-out <path> write a kubeconfig for the double to <path>
  --help                  show this help
`;

export async function main(argv: string[]): Promise<number> {
  let values: {
    port?: string;
    host?: string;
    "crd-dir"?: string;
    "state-file"?: string;
    "kubeconfig-out"?: string;
    help?: boolean;
  };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        port: { type: "string" },
        host: { type: "string" },
        "crd-dir": { type: "string" },
        "state-file": { type: "string" },
        "kubeconfig-out": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
    }));
  } catch (error) {
    process.stderr.write(`kube-double: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const port = values.port === undefined ? 0 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    process.stderr.write(`kube-double: --port must be an integer between 0 and 65535, got "${values.port}"\n`);
    return 2;
  }
  const logger = pino({ level: "info" }, pino.destination(2));
  const double = await startKubeDouble({
    port,
    ...(values.host === undefined ? {} : { host: values.host }),
    ...(values["crd-dir"] === undefined ? {} : { crdDir: values["crd-dir"] }),
    ...(values["state-file"] === undefined ? {} : { stateFile: values["state-file"] }),
    logger,
  });
  if (values["kubeconfig-out"] !== undefined) await double.writeKubeconfig(values["kubeconfig-out"]);
  process.stdout.write(`${double.url}\n`);
  await serveUntilSignal(double);
  return 0;
}
