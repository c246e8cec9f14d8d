// operations list|get|wait
import { isOperationGone, isUnsupported } from "../../../cloud/index.ts";
import { OPERATION_FAMILIES, OPERATION_STATES, type Operation, type OperationFamily } from "../../../cloud/wire.ts";
import type { Command, Flag } from "../command.ts";
import type { Context } from "../context.ts";
import { NotFoundError } from "../errors.ts";
import type { Input } from "../input.ts";
import { parseDuration } from "../lookup.ts";
import { orDash, paintState } from "../output.ts";
import { followOperation } from "../progress.ts";

const FAMILY_FLAG: Flag = {
  name: "family",
  type: "string",
  placeholder: "family",
  description: "vm, disk, network or firewall-rule (default: each in turn until found)",
  choices: OPERATION_FAMILIES,
};

/** The operation and its family: the given family, or the first family whose endpoint knows the id. */
async function findOperation(ctx: Context, input: Input): Promise<{ operation: Operation; family: OperationFamily }> {
  const id = input.arg(0);
  const client = await ctx.client();
  const projectId = await ctx.projectId();
  const given = input.string("family") as OperationFamily | undefined;
  for (const family of given === undefined ? OPERATION_FAMILIES : [given]) {
    try {
      return { operation: await client.operations.get(projectId, family, id), family };
    } catch (error) {
      if (!isOperationGone(error) && !isUnsupported(error)) throw error;
    }
  }
  const where = given === undefined ? "any family" : `family ${given}`;
  throw new NotFoundError(`no operation '${id}' in ${where}: it may be too old, or of another project`);
}

function resultText(operation: Operation): string {
  if (operation.result === null || operation.result === undefined) return "-";
  const result = operation.result as { code?: unknown; message?: unknown };
  if (operation.state === "FAILED" && typeof result.code === "string") {
    return `${result.code}${typeof result.message === "string" && result.message ? `: ${result.message}` : ""}`;
  }
  return "set";
}

const list: Command = {
  name: "list",
  summary: "list the operations of one family",
  flags: [
    { ...FAMILY_FLAG, description: "vm (default), disk, network or firewall-rule" },
    {
      name: "state",
      type: "string",
      placeholder: "state",
      description: "IN_PROGRESS, SUCCEEDED or FAILED",
      choices: OPERATION_STATES,
    },
    { name: "resource", type: "string", placeholder: "id", description: "only the operations on this resource id" },
  ],
  async run(ctx, input) {
    const family = (input.string("family") ?? "vm") as OperationFamily;
    const state = input.string("state") as Operation["state"] | undefined;
    const operations = await (await ctx.client()).operations.list(await ctx.projectId(), family, {
      ...(state === undefined ? {} : { state: state as "IN_PROGRESS" }),
      ...(input.string("resource") === undefined ? {} : { resource_id: input.string("resource") }),
    });
    ctx.out.list(operations, [
      { header: "ID", value: (o) => o.operation_id },
      { header: "OPERATION", value: (o) => o.metadata.operation_name },
      { header: "RESOURCE", value: (o) => o.metadata.id },
      { header: "STATE", value: (o) => o.state, paint: (v) => paintState(v) },
      { header: "STARTED", value: (o) => o.started_at },
      { header: "COMPLETED", value: (o) => orDash(o.completed_at) },
    ]);
    return 0;
  },
};

const get: Command = {
  name: "get",
  summary: "show one operation",
  args: "<operation-id>",
  minArgs: 1,
  flags: [FAMILY_FLAG],
  async run(ctx, input) {
    const { operation, family } = await findOperation(ctx, input);
    ctx.out.details(
      [
        ["ID", operation.operation_id],
        ["Operation", operation.metadata.operation_name],
        ["Resource", `${family} ${operation.metadata.id}`],
        ["State", ctx.out.paint(operation.state, paintState(operation.state) ?? "dim")],
        ["Started", operation.started_at],
        ["Completed", orDash(operation.completed_at)],
        ["Result", resultText(operation)],
      ],
      operation,
    );
    return 0;
  },
};

const wait: Command = {
  name: "wait",
  summary: "follow an operation until it ends (exit 5 when it FAILED)",
  args: "<operation-id>",
  minArgs: 1,
  flags: [
    FAMILY_FLAG,
    { name: "timeout", type: "string", placeholder: "duration", description: "give up after this (default 30m)" },
  ],
  async run(ctx, input) {
    const { operation, family } = await findOperation(ctx, input);
    const timeout = input.string("timeout");
    const final = await followOperation(ctx, operation, {
      family,
      subject: `${family} ${operation.metadata.id}`,
      timeoutMs: timeout === undefined ? 30 * 60_000 : parseDuration("timeout", timeout),
    });
    if (ctx.out.structured) ctx.out.data(final);
    return 0;
  },
};

export const OPERATIONS_COMMAND: Command = {
  name: "operations",
  summary: "operations: list, get, wait",
  subcommands: [list, get, wait],
};
