// The functions of the CEL subset, on values already evaluated: `size()`, the string methods, `string()`,
// `int()`, the strings extension's `format()` and Kubernetes' IP and CIDR libraries (cel-network.ts). The
// forms that need their arguments unevaluated (`has()` and the macros) are the evaluator's (cel.ts).
import {
  CelCidr,
  CelIp,
  containsCidr,
  containsIp,
  ipMember,
  isCidr,
  isIp,
  masked,
  NetworkParseError,
  parseCidr,
  parseIp,
} from "./cel-network.ts";
import { CelUnsupportedError } from "./cel-parser.ts";
import { isRecord } from "./types.ts";

/** An expression that is well-formed but fails on its values (a missing field, a bad conversion). */
export class CelEvaluationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CelEvaluationError";
  }
}

/** The functions callFunction knows (the evaluator adds `has()` and the macros). */
export const LIBRARY_FUNCTIONS: readonly string[] = [
  "size",
  "matches",
  "startsWith",
  "endsWith",
  "contains",
  "lowerAscii",
  "upperAscii",
  "substring",
  "indexOf",
  "lastIndexOf",
  "string",
  "int",
  "format",
  "cidr",
  "isCIDR",
  "ip",
  "isIP",
  "masked",
  "prefixLength",
  "containsIP",
  "containsCIDR",
  "family",
  "isUnspecified",
  "isLoopback",
  "isLinkLocalMulticast",
  "isLinkLocalUnicast",
  "isGlobalUnicast",
];

function sizeOf(value: unknown): number {
  if (typeof value === "string" || Array.isArray(value)) return value.length;
  if (isRecord(value)) return Object.keys(value).length;
  throw new CelEvaluationError("size() needs a string, list or map");
}

/**
 * Calls a library function: `target` is the receiver's value (`"abc".size()`), undefined for a global call
 * (`size("abc")`); `args` are the arguments' values.
 */
export function callFunction(name: string, target: unknown, args: unknown[]): unknown {
  const text = (value: unknown): string => {
    if (typeof value !== "string") throw new CelEvaluationError(`${name}() needs a string`);
    return value;
  };
  switch (name) {
    case "size":
      return sizeOf(target === undefined ? args[0] : target);
    case "matches":
      return new RegExp(text(args[0])).test(text(target));
    case "startsWith":
      return text(target).startsWith(text(args[0]));
    case "endsWith":
      return text(target).endsWith(text(args[0]));
    case "contains":
      return text(target).includes(text(args[0]));
    case "lowerAscii":
      return text(target).toLowerCase();
    case "upperAscii":
      return text(target).toUpperCase();
    case "substring": {
      const value = text(target);
      const start = args[0];
      const end = args[1] ?? value.length;
      if (typeof start !== "number" || typeof end !== "number" || start < 0 || end > value.length || start > end) {
        throw new CelEvaluationError("substring() index out of range");
      }
      return value.slice(start, end);
    }
    case "indexOf":
      return text(target).indexOf(text(args[0]));
    case "lastIndexOf":
      return text(target).lastIndexOf(text(args[0]));
    case "string":
      return String(args[0]);
    case "int": {
      const value = args[0];
      if (typeof value === "number") return Math.trunc(value);
      if (typeof value === "string" && /^[-+]?\d+$/.test(value)) return Number.parseInt(value, 10);
      throw new CelEvaluationError(
        `type conversion error from '${typeof value === "string" ? "string" : "dyn"}' to 'int'`,
      );
    }
    case "format":
      return format(text(target), args[0]);
    case "cidr":
    case "isCIDR":
    case "ip":
    case "isIP":
    case "masked":
    case "prefixLength":
    case "containsIP":
    case "containsCIDR":
    case "family":
    case "isUnspecified":
    case "isLoopback":
    case "isLinkLocalMulticast":
    case "isLinkLocalUnicast":
    case "isGlobalUnicast":
      return network(name, target, args, text);
    default:
      throw new CelUnsupportedError(`unsupported CEL function ${name}()`);
  }
}

/** The strings extension's `format()`: `%s` and `%d` (and `%%`); other verbs are outside the subset. */
function format(template: string, args: unknown): string {
  if (!Array.isArray(args)) throw new CelEvaluationError("format() needs a list of arguments");
  let next = 0;
  return template.replace(/%(.)/g, (_, verb: string) => {
    if (verb === "%") return "%";
    if (verb !== "s" && verb !== "d") throw new CelUnsupportedError(`format() verb %${verb}`);
    if (next >= args.length) throw new CelEvaluationError("format: not enough arguments");
    const value = args[next++];
    if (verb === "d" && typeof value !== "number") throw new CelEvaluationError("format: %d needs an integer");
    return Array.isArray(value) ? `[${value.map(String).join(", ")}]` : String(value);
  });
}

/** `cidr()`, `ip()`, `isCIDR()`, `isIP()`: the library's global functions. */
function networkFunction(name: string, arg: unknown, text: (value: unknown) => string): unknown {
  if (name === "cidr") return parseCidr(text(arg));
  if (name === "ip") return parseIp(text(arg));
  if (name === "isCIDR") return isCidr(text(arg));
  if (name === "isIP") return isIp(text(arg));
  return undefined;
}

/** The members of a CIDR: `ip()`, `masked()`, `prefixLength()`, `containsIP()`, `containsCIDR()`. */
function cidrMember(name: string, cidr: CelCidr, arg: unknown, text: (value: unknown) => string): unknown {
  if (name === "ip") return cidr.ip;
  if (name === "masked") return masked(cidr);
  if (name === "prefixLength") return cidr.bits;
  if (name === "containsIP") return containsIp(cidr, arg instanceof CelIp ? arg : parseIp(text(arg)));
  if (name === "containsCIDR") return containsCidr(cidr, arg instanceof CelCidr ? arg : parseCidr(text(arg)));
  return undefined;
}

function network(name: string, target: unknown, args: unknown[], text: (value: unknown) => string): unknown {
  const [arg] = args;
  let value: unknown;
  try {
    if (target === undefined) value = networkFunction(name, arg, text);
    else if (target instanceof CelCidr) value = cidrMember(name, target, arg, text);
    else if (target instanceof CelIp) value = ipMember(name, target);
  } catch (error) {
    if (error instanceof NetworkParseError) throw new CelEvaluationError(error.message);
    throw error;
  }
  if (value === undefined) throw new CelEvaluationError(`no such overload: ${name}`);
  return value;
}
