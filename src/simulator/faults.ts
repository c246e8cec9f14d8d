// Fault injection: what the simulator gets wrong on purpose. Configured at start (`faults` option or the
// config file) and at run time through `/_sim/faults`. Routes are Fastify templates relative to `/v0.1`
// (`/projects/:projectId/vms`); a trailing `*` matches a prefix; a missing route or `*` matches every route.
import { z } from "zod";
import { OPERATION_FAMILIES, OPERATION_NAMES } from "../cloud/wire.ts";

const RouteMatch = {
  method: z.string().toUpperCase().optional(),
  route: z.string().optional(),
};
/** Fraction of matching requests affected, 0..1. */
const Rate = z.number().min(0).max(1).default(1);
/** Apply at most this many times, then stop (unset = forever). */
const Count = z.number().int().min(0).optional();

export const ErrorFault = z.strictObject({
  ...RouteMatch,
  status: z.number().int().min(400).max(599),
  code: z.string().optional(),
  message: z.string().optional(),
  retry_after_seconds: z.number().int().min(0).optional(),
  rate: Rate,
  count: Count,
});
export const LatencyFault = z.strictObject({ ...RouteMatch, ms: z.number().int().min(0), rate: Rate, count: Count });
export const LostResponseFault = z.strictObject({ ...RouteMatch, rate: Rate, count: Count });
export const OperationFailureFault = z.strictObject({
  family: z.enum(OPERATION_FAMILIES).optional(),
  operation_name: z.enum(OPERATION_NAMES).optional(),
  code: z.string().default("internal_error"),
  message: z.string().optional(),
  rate: Rate,
  count: Count,
});

export const FaultConfigSchema = z.strictObject({
  errors: z.array(ErrorFault).default([]),
  latency: z.array(LatencyFault).default([]),
  lost_responses: z.array(LostResponseFault).default([]),
  operation_failures: z.array(OperationFailureFault).default([]),
  /** New resources answer 404 (and are missing from lists) for this long after they are created. */
  not_found_after_create_ms: z.number().int().min(0).default(0),
});
export type FaultConfig = z.output<typeof FaultConfigSchema>;
export type FaultConfigInput = z.input<typeof FaultConfigSchema>;
export type ErrorFault = z.output<typeof ErrorFault>;

export function emptyFaults(): FaultConfig {
  return FaultConfigSchema.parse({});
}

function routeMatches(pattern: string | undefined, route: string): boolean {
  if (pattern === undefined || pattern === "*" || pattern === "") return true;
  const normalized = pattern.startsWith("/v0.1/") ? pattern.slice("/v0.1".length) : pattern;
  if (normalized.endsWith("*")) return route.startsWith(normalized.slice(0, -1));
  return normalized === route;
}

interface Countable {
  rate: number;
  count?: number | undefined;
}

export class FaultInjector {
  #config: FaultConfig;
  readonly #random: () => number;
  /** How often each kind of fault fired since start (or the last reset of the counts): `http_503`, `lost_responses`… */
  readonly #fired = new Map<string, number>();

  constructor(initial: FaultConfigInput | undefined, random: () => number = Math.random) {
    this.#config = FaultConfigSchema.parse(initial ?? {});
    this.#random = random;
  }

  get config(): FaultConfig {
    return this.#config;
  }

  replace(config: FaultConfigInput): void {
    this.#config = FaultConfigSchema.parse(config);
  }

  clear(): void {
    this.#config = emptyFaults();
  }

  /** Faults that fired, by kind: `http_<status>`, `latency_spikes`, `lost_responses`, `failed_<code>`. */
  fired(): Record<string, number> {
    return Object.fromEntries([...this.#fired].sort(([a], [b]) => a.localeCompare(b)));
  }

  resetFired(): void {
    this.#fired.clear();
  }

  #count(kind: string): void {
    this.#fired.set(kind, (this.#fired.get(kind) ?? 0) + 1);
  }

  /** Decide whether a fault fires now, using up one of its `count` if it does. */
  #fires(fault: Countable): boolean {
    if (fault.count !== undefined && fault.count <= 0) return false;
    if (fault.rate < 1 && this.#random() >= fault.rate) return false;
    if (fault.count !== undefined) fault.count -= 1;
    return true;
  }

  /** `route` is the template relative to `/v0.1`. */
  errorFor(method: string, route: string): ErrorFault | undefined {
    const fault = this.#config.errors.find(
      (f) => (f.method === undefined || f.method === method) && routeMatches(f.route, route) && this.#fires(f),
    );
    if (fault !== undefined) this.#count(`http_${fault.status}`);
    return fault;
  }

  latencyFor(method: string, route: string): number {
    let total = 0;
    for (const f of this.#config.latency) {
      if ((f.method === undefined || f.method === method) && routeMatches(f.route, route) && this.#fires(f)) {
        total += f.ms;
      }
    }
    if (total > 0) this.#count("latency_spikes");
    return total;
  }

  loseResponse(method: string, route: string): boolean {
    const lost = this.#config.lost_responses.some(
      (f) => (f.method === undefined || f.method === method) && routeMatches(f.route, route) && this.#fires(f),
    );
    if (lost) this.#count("lost_responses");
    return lost;
  }

  operationFailure(family: string, operationName: string): { code: string; message: string } | undefined {
    const fault = this.#config.operation_failures.find(
      (f) =>
        (f.family === undefined || f.family === family) &&
        (f.operation_name === undefined || f.operation_name === operationName) &&
        this.#fires(f),
    );
    if (fault === undefined) return undefined;
    this.#count(`failed_${fault.code}`);
    return { code: fault.code, message: fault.message ?? `injected failure (${fault.code})` };
  }

  notFoundAfterCreateMs(): number {
    return this.#config.not_found_after_create_ms;
  }
}
