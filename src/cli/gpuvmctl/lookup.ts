// Finding a resource by name or id, and what every change command does with the operation it gets back.
import { isNotFound } from "../../cloud/index.ts";
import type { Operation, OperationFamily } from "../../cloud/wire.ts";
import type { Flag } from "./command.ts";
import type { Context } from "./context.ts";
import { CliError, NotFoundError, UsageError } from "./errors.ts";
import type { Input } from "./input.ts";
import { promptLine } from "./io.ts";
import { followOperation } from "./progress.ts";

export const WAIT_FLAGS: readonly Flag[] = [
  { name: "wait", short: "w", type: "boolean", description: "follow the operation until it ends" },
  {
    name: "timeout",
    type: "string",
    placeholder: "duration",
    description: "give up waiting after this (e.g. 10m; default 30m)",
  },
];

export const YES_FLAG: Flag = { name: "yes", short: "y", type: "boolean", description: "do not ask for confirmation" };

/** `90s`, `10m`, `1h`, or plain seconds. */
export function parseDuration(flag: string, text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (match === null) throw new UsageError(`--${flag}: expected a duration such as 90s, 10m or 1h, got '${text}'`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(match[2] ?? "s") as "ms" | "s" | "m" | "h"];
  return Number(match[1]) * unit;
}

/** The one item whose id or name is `ref`; NotFoundError naming the list command otherwise. */
export function pick<T extends { id: string; name: string }>(
  items: readonly T[],
  ref: string,
  what: string,
  list: string,
): T {
  const found = items.find((item) => item.id === ref) ?? items.filter((item) => item.name === ref);
  if (!Array.isArray(found)) return found;
  if (found.length === 1 && found[0] !== undefined) return found[0];
  if (found.length > 1) throw new UsageError(`${found.length} ${what}s are named '${ref}': use the id`);
  throw new NotFoundError(`no ${what} named or with id '${ref}' in this project: '${list}' lists them`);
}

/** A VM by id (one GET) or by name (a filtered list). */
export async function findVm(ctx: Context, ref: string) {
  const client = await ctx.client();
  const projectId = await ctx.projectId();
  const byName = await client.vms.list(projectId, { names: [ref] });
  const named = byName.items.filter((vm) => vm.name === ref);
  if (named.length === 1 && named[0] !== undefined) return named[0];
  if (named.length > 1) throw new UsageError(`${named.length} VMs are named '${ref}': use the id`);
  try {
    return await client.vms.get(projectId, ref);
  } catch (error) {
    if (isNotFound(error)) {
      throw new NotFoundError(`no VM named or with id '${ref}' in this project: 'gpuvmctl vms list' lists them`, {
        cause: error,
      });
    }
    throw error;
  }
}

/** After a change: report the operation, or follow it with --wait. Prints the operation with -o json|yaml. */
export async function reportOperation(
  ctx: Context,
  input: Input,
  operation: Operation,
  family: OperationFamily,
  subject: string,
): Promise<number> {
  let final = operation;
  if (input.bool("wait")) {
    const timeout = input.string("timeout");
    final = await followOperation(ctx, operation, {
      family,
      subject,
      timeoutMs: timeout === undefined ? 30 * 60_000 : parseDuration("timeout", timeout),
    });
  } else {
    ctx.out.line(
      `${operation.metadata.operation_name} ${subject}: operation ${operation.operation_id} ${operation.state} (follow it: gpuvmctl operations wait ${operation.operation_id}${family === "vm" ? "" : ` --family ${family}`})`,
    );
  }
  if (ctx.out.structured) ctx.out.data(final);
  return 0;
}

/** Asks before deleting on a terminal; off a terminal --yes is required. */
export async function confirmDelete(ctx: Context, input: Input, what: string): Promise<void> {
  if (input.bool("yes")) return;
  if (ctx.io.stdin.isTTY !== true) {
    throw new UsageError(`deleting ${what} needs --yes when there is no terminal to ask`);
  }
  const answer = (await promptLine(ctx.io, `Delete ${what}? [y/N] `, "pass --yes")).trim().toLowerCase();
  if (answer !== "y" && answer !== "yes") throw new CliError(`not deleting ${what}`);
}

/** `3m`, `5h`, `12d`: how long ago a timestamp was (kubectl's AGE). */
export function age(timestamp: string, now: number): string {
  const at = Date.parse(timestamp);
  if (Number.isNaN(at)) return "-";
  const s = Math.max(0, Math.floor((now - at) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}
