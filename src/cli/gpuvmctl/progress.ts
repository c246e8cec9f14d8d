// Following an operation until it ends (`--wait`, `operations wait`): a spinner with the elapsed time and
// state on a terminal, one plain line per state change otherwise. Transient API failures are polled through.
import { isCloudError, isFinalOperation, isOperationGone } from "../../cloud/index.ts";
import type { Operation, OperationFamily } from "../../cloud/wire.ts";
import type { Context } from "./context.ts";
import { ApiError, CliError, EXIT, NotFoundError } from "./errors.ts";

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const SPIN_MS = 100;
/** Consecutive failed polls (network, 5xx, 429) tolerated before giving up. */
const MAX_POLL_FAILURES = 5;

export interface FollowOptions {
  family: OperationFamily;
  /** What the operation is about, for the progress line: `vm trainer`. */
  subject: string;
  timeoutMs?: number;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`;
}

function failureOf(operation: Operation): string {
  const result = operation.result;
  if (typeof result === "object" && result !== null) {
    const { code, message } = result as { code?: unknown; message?: unknown };
    const parts = [code, message].filter((p): p is string => typeof p === "string" && p !== "");
    if (parts.length > 0) return parts.join(": ");
  }
  return "no reason given";
}

/** The progress display: a spinner line redrawn on a terminal, a line per state change otherwise. */
class ProgressDisplay {
  readonly #ctx: Context;
  readonly #name: string;
  readonly #began: number;
  readonly #terminal: boolean;
  #spinner: NodeJS.Timeout | undefined;
  #frame = 0;
  #lastState = "";
  #current: Operation;

  constructor(ctx: Context, operation: Operation, name: string) {
    this.#ctx = ctx;
    this.#name = name;
    this.#current = operation;
    this.#began = ctx.io.now();
    this.#terminal = ctx.io.stderr.isTTY === true;
    if (this.#terminal) this.#spinner = setInterval(() => this.#draw(), SPIN_MS);
    this.#draw();
  }

  get elapsedMs(): number {
    return this.#ctx.io.now() - this.#began;
  }

  update(operation: Operation): void {
    this.#current = operation;
    if (!this.#terminal && !isFinalOperation(operation)) this.#draw();
  }

  /** Clears the spinner line (Ctrl-C, errors). */
  clear(): void {
    if (this.#spinner !== undefined) clearInterval(this.#spinner);
    this.#spinner = undefined;
    if (this.#terminal) this.#ctx.io.stderr.write("\r\u001b[2K");
  }

  finish(succeeded: boolean): void {
    this.clear();
    const { out, io } = this.#ctx;
    const elapsed = seconds(this.elapsedMs);
    if (this.#terminal) {
      const mark = succeeded ? out.paintErr("✓", "green") : out.paintErr("✗", "red");
      io.stderr.write(`${mark} ${this.#name}  ${this.#current.state}  ${elapsed}\n`);
    } else io.stderr.write(`operation ${this.#current.operation_id}: ${this.#current.state} after ${elapsed}\n`);
  }

  #draw(): void {
    const { out, io } = this.#ctx;
    const text = `${this.#name}  ${this.#current.state}  ${seconds(this.elapsedMs)}`;
    if (this.#terminal) {
      const frame = FRAMES[this.#frame++ % FRAMES.length] ?? "";
      io.stderr.write(`\r\u001b[2K${out.paintErr(frame, "cyan")} ${text}`);
    } else if (this.#current.state !== this.#lastState) {
      io.stderr.write(`operation ${this.#current.operation_id}: ${text}\n`);
    }
    this.#lastState = this.#current.state;
  }
}

/** Polls the operation until SUCCEEDED (returned) or FAILED (ApiError, exit 5). */
export async function followOperation(ctx: Context, start: Operation, options: FollowOptions): Promise<Operation> {
  const client = await ctx.client();
  const projectId = await ctx.projectId();
  const pollMs = ctx.io.pollIntervalMs ?? 1000;
  const name = `${start.metadata.operation_name} ${options.subject}`.trim();
  const display = new ProgressDisplay(ctx, start, name);
  const interrupted = () => {
    display.clear();
    ctx.io.stderr.write(`stopped waiting; the operation goes on: gpuvmctl operations wait ${start.operation_id}\n`);
    process.exit(EXIT.interrupted);
  };
  const onTerminal = ctx.io.stderr.isTTY === true;
  if (onTerminal) process.once("SIGINT", interrupted);
  let current = start;
  try {
    let failures = 0;
    while (!isFinalOperation(current)) {
      if (options.timeoutMs !== undefined && display.elapsedMs > options.timeoutMs) {
        throw new CliError(
          `operation ${current.operation_id} is still ${current.state} after ${seconds(display.elapsedMs)}: follow it with 'gpuvmctl operations wait ${current.operation_id}'`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, pollMs));
      try {
        current = await client.operations.get(projectId, options.family, current.operation_id);
        failures = 0;
      } catch (error) {
        if (isOperationGone(error)) {
          throw new NotFoundError(
            `operation ${current.operation_id} is no longer known to the server: read the ${options.family} itself`,
            { cause: error },
          );
        }
        if (!isCloudError(error) || !error.retryable || ++failures > MAX_POLL_FAILURES) throw error;
      }
      display.update(current);
    }
  } catch (error) {
    display.clear();
    throw error;
  } finally {
    if (onTerminal) process.off("SIGINT", interrupted);
  }
  const succeeded = current.state.toUpperCase() === "SUCCEEDED";
  display.finish(succeeded);
  if (!succeeded) throw new ApiError(`operation ${current.operation_id} (${name}) FAILED: ${failureOf(current)}`);
  return current;
}
