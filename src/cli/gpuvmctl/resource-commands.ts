// The shape every resource group shares (vms, disks, networks, firewall-rules): `list`, `get <ref>`, the
// group's own changes, and `delete <ref>`; a reference is a name or an id; changes report or follow the
// operation they start (--wait).
import type { CloudClient } from "../../cloud/index.ts";
import type { Operation, OperationFamily } from "../../cloud/wire.ts";
import type { Command, Flag } from "./command.ts";
import type { Context } from "./context.ts";
import { Input } from "./input.ts";
import { confirmDelete, pick, reportOperation, WAIT_FLAGS, YES_FLAG } from "./lookup.ts";
import type { Column } from "./output.ts";

export interface ResourceKind<T extends { id: string; name: string }> {
  /** `disks`, the command group. */
  group: string;
  /** `disk`, in messages. */
  what: string;
  family: OperationFamily;
  summary: string;
  /** Every item of the project (the list command's flags may narrow it). */
  list(ctx: Context, input: Input): Promise<T[]>;
  listFlags?: readonly Flag[];
  /** By name or id; default: the list, then the one whose id or name matches. */
  find?(ctx: Context, ref: string): Promise<T>;
  columns(now: number): Column<T>[];
  details(item: T, ctx: Context): (readonly [string, string])[];
  remove: {
    summary: string;
    details?: string;
    call(client: CloudClient, projectId: string, id: string): Promise<Operation>;
  };
}

export interface ChangeCommand<T> {
  name: string;
  summary: string;
  /** Arguments after the reference, e.g. `<size>`. */
  args?: string;
  extraArgs?: number;
  check?(input: Input): void;
  call(client: CloudClient, projectId: string, item: T, input: Input): Promise<Operation>;
}

function finder<T extends { id: string; name: string }>(kind: ResourceKind<T>) {
  return (ctx: Context, ref: string): Promise<T> =>
    kind.find
      ? kind.find(ctx, ref)
      : kind
          .list(ctx, new Input([], [], {}))
          .then((items) => pick(items, ref, kind.what, `gpuvmctl ${kind.group} list`));
}

/** A change to one item: find it, call, report (or follow) the operation. */
function changeCommand<T extends { id: string; name: string }>(
  kind: ResourceKind<T>,
  change: ChangeCommand<T>,
): Command {
  const find = finder(kind);
  const ref = `<${kind.what.replaceAll(" ", "-")}>`;
  return {
    name: change.name,
    summary: change.summary,
    args: change.args ? `${ref} ${change.args}` : ref,
    minArgs: 1 + (change.extraArgs ?? 0),
    flags: WAIT_FLAGS,
    async run(ctx, input) {
      change.check?.(input);
      const item = await find(ctx, input.arg(0));
      const operation = await change.call(await ctx.client(), await ctx.projectId(), item, input);
      return reportOperation(ctx, input, operation, kind.family, `${kind.family} ${item.name}`);
    },
  };
}

export function resourceGroup<T extends { id: string; name: string }>(
  kind: ResourceKind<T>,
  changes: readonly ChangeCommand<T>[] = [],
): Command {
  const find = finder(kind);
  const ref = `<${kind.what.replaceAll(" ", "-")}>`;
  const list: Command = {
    name: "list",
    summary: `list the ${kind.what}s of the project`,
    ...(kind.listFlags ? { flags: kind.listFlags } : {}),
    async run(ctx, input) {
      ctx.out.list(await kind.list(ctx, input), kind.columns(ctx.io.now()));
      return 0;
    },
  };
  const get: Command = {
    name: "get",
    summary: `show one ${kind.what} (by name or id)`,
    args: ref,
    minArgs: 1,
    async run(ctx, input) {
      const item = await find(ctx, input.arg(0));
      ctx.out.details(kind.details(item, ctx), item);
      return 0;
    },
  };
  const remove: Command = {
    name: "delete",
    summary: kind.remove.summary,
    ...(kind.remove.details ? { details: kind.remove.details } : {}),
    args: ref,
    minArgs: 1,
    flags: [...WAIT_FLAGS, YES_FLAG],
    async run(ctx, input) {
      const item = await find(ctx, input.arg(0));
      await confirmDelete(ctx, input, `${kind.what} ${item.name} (${item.id})`);
      const operation = await kind.remove.call(await ctx.client(), await ctx.projectId(), item.id);
      return reportOperation(ctx, input, operation, kind.family, `${kind.family} ${item.name}`);
    },
  };
  const names = ["list", "get", ...changes.map((c) => c.name), "delete"].join(", ");
  return {
    name: kind.group,
    summary: `${kind.summary}: ${names}`,
    subcommands: [list, get, ...changes.map((change) => changeCommand(kind, change)), remove],
  };
}
