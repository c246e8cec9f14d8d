// The values the run command's flags take: each parsed, checked, and refused with a ConfigError that names the flag
// and what it expected (the run command prints it and exits 2).
import { normalizeApiUrl } from "../util/api-url.ts";
import { DurationError, parseDuration } from "./time.ts";

export class ConfigError extends Error {
  override name = "ConfigError";
}

export type LogLevel = "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";
export const LOG_LEVELS: readonly LogLevel[] = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];
/** `json`: one JSON object per line (pino); `text`: `time LEVEL message key=value …` for people. */
export type LogFormat = "json" | "text";
export const LOG_FORMATS: readonly LogFormat[] = ["json", "text"];
export type OperationPolling = "batched" | "per-operation";
export const OPERATION_POLLINGS: readonly OperationPolling[] = ["batched", "per-operation"];
/** `epoch`: milliseconds since 1970 (pino's default); `iso8601`: `2025-01-31T12:00:00.000Z`. */
export type LogTimeFormat = "epoch" | "iso8601";
export const LOG_TIME_FORMATS: readonly LogTimeFormat[] = ["epoch", "iso8601"];

export interface BindAddress {
  host: string;
  port: number;
}

/** How the run command reads one flag's value (flag, then environment, then default). */
export type FlagValue = (name: string) => string;

export function oneOf<T extends string>(name: string, text: string, allowed: readonly T[]): T {
  const found = allowed.find((entry) => entry === text);
  if (found === undefined) throw new ConfigError(`--${name}: "${text}" is not one of ${allowed.join(", ")}`);
  return found;
}

/** A duration where `0` means off (or for ever). */
export function durationOrOff(name: string, value: FlagValue): number {
  return value(name).trim() === "0" ? 0 : duration(name, value);
}

export function duration(name: string, value: FlagValue): number {
  try {
    const ms = parseDuration(value(name));
    if (ms <= 0) throw new DurationError(`duration must be positive`);
    return ms;
  } catch (error) {
    if (error instanceof DurationError) throw new ConfigError(`--${name}: ${error.message}`, { cause: error });
    throw error;
  }
}

/** Comma-separated API URLs, each normalised (an unusable one is an error naming why). */
export function apiUrlList(name: string, text: string): string[] {
  const entries = text
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
  return entries.map((entry) => {
    const parsed = normalizeApiUrl(entry);
    if (!parsed.ok) throw new ConfigError(`--${name}: "${entry}" ${parsed.problem}`);
    return parsed.url.href;
  });
}

const BYTE_UNITS: Readonly<Record<string, number>> = { "": 1, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 };

/** `8Mi` → 8388608, `65536` → 65536 (Kubernetes quantity spelling, binary units only). */
export function byteSize(name: string, text: string): number {
  const match = /^\s*(\d+)\s*(Ki|Mi|Gi)?\s*$/.exec(text);
  const bytes = match ? Number(match[1]) * (BYTE_UNITS[match[2] ?? ""] ?? 1) : Number.NaN;
  if (!Number.isSafeInteger(bytes) || bytes < 1024) {
    throw new ConfigError(`--${name}: expected a size of at least 1Ki such as 8Mi or 65536, got "${text}"`);
  }
  return bytes;
}

export function nonNegativeInt(name: string, value: FlagValue): number {
  const text = value(name);
  const parsed = Number(text);
  if (!Number.isInteger(parsed) || parsed < 0)
    throw new ConfigError(`--${name}: expected a whole number (0 or more), got "${text}"`);
  return parsed;
}

export function bool(name: string, value: FlagValue): boolean {
  const text = value(name).toLowerCase();
  if (["true", "1", "yes"].includes(text)) return true;
  if (["false", "0", "no"].includes(text)) return false;
  throw new ConfigError(`--${name}: expected true or false, got "${text}"`);
}

export function positiveInt(name: string, value: FlagValue): number {
  const text = value(name);
  const parsed = Number(text);
  if (!Number.isInteger(parsed) || parsed < 1)
    throw new ConfigError(`--${name}: expected a positive integer, got "${text}"`);
  return parsed;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

export function dnsLabel(name: string, text: string): string {
  if (!DNS_LABEL.test(text)) throw new ConfigError(`--${name}: "${text}" is not a valid namespace name`);
  return text;
}

export function namespaces(text: string): string[] {
  const list = text
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
  for (const namespace of list) dnsLabel("watch-namespace", namespace);
  return [...new Set(list)];
}

export function secretRef(text: string): { namespace: string; name: string } | undefined {
  if (text === "") return undefined;
  const [namespace, name, ...rest] = text.split("/");
  if (!namespace || !name || rest.length > 0) {
    throw new ConfigError(`--credentials-secret: expected <namespace>/<name>, got "${text}"`);
  }
  return { namespace: dnsLabel("credentials-secret", namespace), name };
}

/** ":8080" → all interfaces, "127.0.0.1:9090", "[::1]:8080"; "0" (or empty) disables the server. */
export function parseBindAddress(text: string): BindAddress | undefined {
  if (text === "0" || text === "") return undefined;
  const match = /^(\[[^\]]+\]|[^:]*):(\d{1,5})$/.exec(text);
  const port = Number(match?.[2]);
  if (match === null || port > 65_535) throw new ConfigError(`"${text}" is not host:port, :port or 0`);
  const host = (match[1] ?? "").replace(/^\[|\]$/g, "");
  return { host: host === "" ? "0.0.0.0" : host, port };
}

export function bindAddress(name: string, text: string): BindAddress | undefined {
  try {
    return parseBindAddress(text);
  } catch (error) {
    if (error instanceof ConfigError) throw new ConfigError(`--${name}: ${error.message}`, { cause: error });
    throw error;
  }
}
