// ssh <gpuvm>: read the GpuVm's status.sshDestination through the current kubeconfig, then run ssh to it
// (or print the command with --print). Arguments after `--` go to ssh.
import { z } from "zod";
import { shellQuote } from "../../../util/shell-quote.ts";
import type { Command } from "../command.ts";
import type { Context } from "../context.ts";
import { ApiError, AuthError, CliError, NotFoundError } from "../errors.ts";

const GpuVmView = z.looseObject({
  status: z
    .looseObject({
      sshDestination: z.string().optional(),
      state: z.string().optional(),
      conditions: z
        .array(z.looseObject({ type: z.string(), status: z.string(), reason: z.string().optional() }))
        .optional(),
    })
    .optional(),
});

async function readGpuVm(ctx: Context, name: string, namespaceFlag: string | undefined) {
  const k8s = await import("@kubernetes/client-node");
  const { GROUP, VERSION } = await import("../../../api/common.ts");
  const { gpuVmKind } = await import("../../../api/gpu-vm.ts");
  const kubeConfig = new k8s.KubeConfig();
  const file = ctx.io.env.KUBECONFIG;
  try {
    if (file && !file.includes(":")) kubeConfig.loadFromFile(file);
    else kubeConfig.loadFromDefault();
  } catch (error) {
    throw new CliError(`cannot read the kubeconfig ${file ?? ""}: ${(error as Error).message}`, 1, { cause: error });
  }
  const context = kubeConfig.getContextObject(kubeConfig.getCurrentContext());
  const namespace = namespaceFlag ?? (context?.namespace || "default");
  const where = `GpuVm ${namespace}/${name}`;
  let object: unknown;
  try {
    object = await kubeConfig
      .makeApiClient(k8s.CustomObjectsApi)
      .getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: gpuVmKind.plural, name });
  } catch (error) {
    const code = error instanceof k8s.ApiException ? error.code : undefined;
    if (code === 404)
      throw new NotFoundError(`${where} not found: 'kubectl get gvm -n ${namespace}' lists them`, { cause: error });
    if (code === 401 || code === 403) {
      throw new AuthError(`the Kubernetes API refused to read ${where} (HTTP ${code}): check your kubeconfig`, {
        cause: error,
      });
    }
    const server = kubeConfig.getCurrentCluster()?.server ?? "?";
    const reason = code === undefined ? (error as Error).message : `HTTP ${code}`;
    throw new ApiError(`cannot read ${where} from ${server}: ${reason.split("\n")[0]}`, { cause: error });
  }
  const parsed = GpuVmView.safeParse(object);
  if (!parsed.success) throw new ApiError(`${where}: the Kubernetes API answered something that is not a GpuVm`);
  return { where, namespace, status: parsed.data.status ?? {} };
}

const ssh: Command = {
  name: "ssh",
  summary: "ssh into a GpuVm: its status.sshDestination, read through the current kubeconfig",
  args: "<gpuvm>",
  minArgs: 1,
  passThrough: true,
  flags: [
    {
      name: "namespace",
      short: "n",
      type: "string",
      placeholder: "namespace",
      description: "the GpuVm's namespace (default: the context's, else default)",
    },
    { name: "print", type: "boolean", description: "print the ssh command instead of running it" },
  ],
  examples: [
    "gpuvmctl ssh trainer -n ml",
    "gpuvmctl ssh trainer -- -i ~/.ssh/gpu -L 8888:localhost:8888",
    "gpuvmctl ssh trainer --print",
  ],
  async run(ctx, input) {
    const name = input.arg(0);
    const { where, namespace, status } = await readGpuVm(ctx, name, input.string("namespace"));
    const destination = status.sshDestination;
    if (!destination) {
      const ready = status.conditions?.find((c) => c.type === "Ready");
      const state = [
        status.state,
        ready ? `Ready=${ready.status}${ready.reason ? ` (${ready.reason})` : ""}` : undefined,
      ]
        .filter(Boolean)
        .join(", ");
      throw new CliError(
        `${where} has no SSH destination yet${state ? ` (${state})` : ""}: wait with 'kubectl wait --for=condition=Ready gvm/${name} -n ${namespace}'`,
      );
    }
    const args = [destination, ...input.rest];
    if (input.bool("print")) {
      ctx.out.raw(["ssh", ...args].map(shellQuote).join(" "));
      return 0;
    }
    return ctx.io.run("ssh", args);
  },
};

export const SSH_COMMANDS: readonly Command[] = [ssh];
