// The operator's logger: pino, JSON lines by default or a text line per record for people
// (--log-format text), timestamps as epoch milliseconds or ISO 8601 (--log-time-format), secrets redacted.
import { type DestinationStream, type Logger, pino } from "pino";
import type { LogFormat, LogLevel, LogTimeFormat } from "./config-values.ts";

export interface LoggerOptions {
  level: LogLevel;
  format?: LogFormat;
  timeFormat?: LogTimeFormat;
}

const SECRET_FIELDS = ["apiKey", "password", "token", "authorization"];
/** Field paths that may carry credentials, at the top of a record or one level down: never written in clear. */
export const REDACTED_PATHS = [...SECRET_FIELDS, ...SECRET_FIELDS.map((field) => `*.${field}`)];

const LEVEL_NAMES: Record<number, string> = {
  10: "TRACE",
  20: "DEBUG",
  30: "INFO",
  40: "WARN",
  50: "ERROR",
  60: "FATAL",
};
const HIDDEN_FIELDS = new Set(["level", "time", "msg", "pid", "hostname", "v"]);

function timeOf(value: unknown, clock: boolean): string {
  const date = typeof value === "number" || typeof value === "string" ? new Date(value) : undefined;
  if (date === undefined || Number.isNaN(date.getTime())) return "";
  const iso = date.toISOString();
  return clock ? iso.slice(11, 19) : iso;
}

function fieldText(key: string, value: unknown): string {
  if (typeof value === "string") return value;
  // An error reads as its message; the stack stays in the JSON format.
  if (key === "err" && typeof value === "object" && value !== null && "message" in value) {
    return String(value.message);
  }
  return JSON.stringify(value);
}

/**
 * One pino JSON line as `<time> LEVEL message key=value …` (time as ISO 8601, or `HH:MM:SS` with `clock`);
 * a line that is not a JSON object (a stack trace, a warning from Node) is returned unchanged.
 */
export function formatLogLine(line: string, options: { clock?: boolean } = {}): string {
  let record: unknown;
  try {
    record = JSON.parse(line);
  } catch {
    return line;
  }
  if (typeof record !== "object" || record === null || Array.isArray(record)) return line;
  const fields = record as Record<string, unknown>;
  const time = timeOf(fields.time, options.clock === true);
  const level = typeof fields.level === "number" ? (LEVEL_NAMES[fields.level] ?? String(fields.level)) : "";
  const message = typeof fields.msg === "string" ? fields.msg : "";
  const extras = Object.entries(fields)
    .filter(([key]) => !HIDDEN_FIELDS.has(key))
    .map(([key, value]) => `${key}=${fieldText(key, value)}`);
  return [time, level.padEnd(5), message, ...extras].filter((part) => part !== "").join(" ");
}

/** A pino destination that writes each record as a text line to `target`. */
export function textDestination(target: { write(text: string): unknown }): DestinationStream {
  return {
    write(chunk: string) {
      for (const line of chunk.split("\n")) if (line !== "") target.write(`${formatLogLine(line)}\n`);
    },
  };
}

/** The operator's logger; writes to `target` (default: pino's synchronous stdout). */
export function createLogger(options: LoggerOptions, target?: DestinationStream): Logger {
  const settings = {
    level: options.level,
    redact: { paths: REDACTED_PATHS, censor: "[redacted]" },
    ...(options.timeFormat === "iso8601" ? { timestamp: pino.stdTimeFunctions.isoTime } : {}),
  };
  if (options.format === "text") return pino(settings, textDestination(target ?? pino.destination(1)));
  return target === undefined ? pino(settings) : pino(settings, target);
}

const LEVEL_METHODS: ReadonlySet<string> = new Set(["trace", "debug", "info", "warn", "error", "fatal"]);
const ignore = (): void => undefined;

/**
 * `parent.child(bindings)`, made only when something is logged through it. A pass of the work queue gets its own
 * logger (namespace, name, reconcileID) and most passes log nothing at the configured level; a pino child builds
 * its bindings' JSON (redaction included) up front, ~10 % of the allocations of a burst. A call of a level the
 * parent does not log is a no-op without the child.
 */
export function lazyChildLogger(parent: Logger, bindings: Record<string, unknown>): Logger {
  let child: Logger | undefined;
  return new Proxy(parent, {
    get(target, property) {
      if (child === undefined && typeof property === "string" && LEVEL_METHODS.has(property)) {
        if (!target.isLevelEnabled(property)) return ignore;
      }
      child ??= target.child(bindings);
      const value: unknown = Reflect.get(child, property, child);
      return typeof value === "function" ? value.bind(child) : value;
    },
  });
}
