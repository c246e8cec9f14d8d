// What a command touches outside itself: streams, environment, clock, child processes. `realIo()` is the
// process; tests pass their own (non-terminal streams, a fixed clock, a recording spawn).
import { spawn as spawnChild } from "node:child_process";
import { constants } from "node:os";
import type { Readable, Writable } from "node:stream";
import { CliError, EXIT, UsageError } from "./errors.ts";

export interface OutputStream extends Writable {
  isTTY?: boolean;
  columns?: number;
}

export interface InputStream extends Readable {
  isTTY?: boolean;
  setRawMode?(mode: boolean): unknown;
}

export interface Io {
  stdout: OutputStream;
  stderr: OutputStream;
  stdin: InputStream;
  env: Readonly<Record<string, string | undefined>>;
  /** Wall-clock time in ms (token expiry, usage dates, elapsed times). */
  now(): number;
  /** Between two polls of an operation; default 1000 ms. */
  pollIntervalMs?: number;
  /** Runs a program with the terminal attached and resolves with its exit code (`ssh`). */
  run(command: string, args: string[]): Promise<number>;
}

export function realIo(): Io {
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
    now: Date.now,
    run: (command, args) =>
      new Promise((resolve, reject) => {
        const child = spawnChild(command, args, { stdio: "inherit" });
        child.once("error", (error) =>
          reject(new CliError(`cannot run ${command}: ${error.message}`, EXIT.failure, { cause: error })),
        );
        // Like a shell: a child killed by a signal exits 128 + the signal's number.
        child.once("exit", (code, signal) =>
          resolve(code ?? (signal === null ? EXIT.failure : 128 + (constants.signals[signal] ?? 0))),
        );
      }),
  };
}

/** Colour only on a terminal, never with NO_COLOR set (no-color.org) or TERM=dumb. */
export function colorAllowed(io: Io, stream: OutputStream, flagDisabled = false): boolean {
  if (flagDisabled || stream.isTTY !== true) return false;
  const noColor = io.env.NO_COLOR;
  return (noColor === undefined || noColor === "") && io.env.TERM !== "dumb";
}

/** All of standard input as text. */
export async function readAll(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks).toString("utf8");
}

/** The first line of standard input (`--password-stdin`), without its line ending; empty is an error. */
export async function readSecretFromStdin(io: Io, what: string): Promise<string> {
  if (io.stdin.isTTY === true) throw new UsageError(`--${what}-stdin reads a pipe, but standard input is a terminal`);
  const value = (await readAll(io.stdin)).split(/\r?\n/)[0] ?? "";
  if (value === "") throw new UsageError(`--${what}-stdin: standard input is empty`);
  return value;
}

/** Text typed on the terminal but not yet consumed by a prompt (a fast typist answers two prompts at once). */
const pending = new WeakMap<InputStream, string>();

/**
 * Asks on stderr and reads one line from the terminal with echo (an email address). Off a terminal it fails,
 * saying what to use `instead` (the flag that gives the value).
 */
export async function promptLine(io: Io, question: string, instead: string): Promise<string> {
  return readTerminalLine(io, question, true, instead);
}

/** Asks on stderr and reads one line from the terminal without echo (a password). Ctrl-C exits 130. */
export async function promptSecret(io: Io, question: string, instead: string): Promise<string> {
  return readTerminalLine(io, question, false, instead);
}

function requireTerminal(
  io: Io,
  instead: string,
): asserts io is Io & { stdin: InputStream & { setRawMode(mode: boolean): unknown } } {
  if (io.stdin.isTTY !== true || typeof io.stdin.setRawMode !== "function") {
    throw new UsageError(`standard input is not a terminal, so there is no one to ask: ${instead}`);
  }
}

export type KeysResult = { kind: "more" } | { kind: "enter"; rest: string } | { kind: "interrupt" } | { kind: "eof" };

/** Applies what was typed to the line being edited (`line.typed`); `echo` gets what to show, if anything. */
export function applyKeys(line: { typed: string }, text: string, echo?: (shown: string) => void): KeysResult {
  for (let i = 0; i < text.length; i++) {
    const char = text[i] ?? "";
    // A CRLF pair is one Enter.
    if (char === "\r" || char === "\n")
      return { kind: "enter", rest: text.slice(i + (text.startsWith("\r\n", i) ? 2 : 1)) };
    if (char === "\u0003") return { kind: "interrupt" };
    if (char === "\u0004" && line.typed === "") return { kind: "eof" };
    i = applyKey(line, text, i, echo);
  }
  return { kind: "more" };
}

/** One key at `text[i]`; returns the index of its last character. */
function applyKey(line: { typed: string }, text: string, i: number, echo?: (shown: string) => void): number {
  const char = text[i] ?? "";
  if (char === "\u007f" || char === "\b") {
    if (line.typed.length > 0) {
      line.typed = line.typed.slice(0, -1);
      echo?.("\b \b");
    }
    return i;
  }
  if (char === "\u001b") {
    // An escape sequence (arrow keys): skip it up to its final letter.
    let end = i + 1;
    while (end + 1 < text.length && !/[A-Za-z~]/.test(text[end + 1] ?? "")) end++;
    return end + 1;
  }
  if (char >= " ") {
    line.typed += char;
    echo?.(char);
  }
  return i;
}

async function readTerminalLine(io: Io, question: string, echo: boolean, instead: string): Promise<string> {
  requireTerminal(io, instead);
  const stdin = io.stdin;
  // Echo off before the question shows: an answer typed as soon as it appears must not be echoed by the tty.
  stdin.setRawMode(true);
  io.stderr.write(question);
  const line = { typed: "" };
  const show = echo ? (shown: string) => io.stderr.write(shown) : undefined;
  try {
    return await new Promise<string>((resolve, reject) => {
      const settle = (result: KeysResult): boolean => {
        if (result.kind === "more") return false;
        if (result.kind === "enter") {
          pending.set(stdin, result.rest);
          resolve(line.typed);
        } else if (result.kind === "interrupt") reject(new CliError("interrupted", EXIT.interrupted));
        else reject(new UsageError("no input (Ctrl-D)"));
        return true;
      };
      const onData = (chunk: Buffer | string) => {
        if (settle(applyKeys(line, typeof chunk === "string" ? chunk : chunk.toString("utf8"), show))) cleanup();
      };
      const onEnd = () => {
        cleanup();
        reject(new UsageError("standard input closed before an answer"));
      };
      const cleanup = () => {
        stdin.off("data", onData);
        stdin.off("end", onEnd);
        stdin.pause();
      };
      const leftover = pending.get(stdin) ?? "";
      pending.delete(stdin);
      if (settle(applyKeys(line, leftover, show))) return;
      stdin.on("data", onData);
      stdin.once("end", onEnd);
      stdin.resume();
    });
  } finally {
    stdin.setRawMode(false);
    io.stderr.write("\n");
  }
}
