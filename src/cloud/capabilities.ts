// Which of the contract's endpoints beyond the spec this server (this account) has. A route the spec does not
// promise that answers "not supported" (CloudError kind `unsupported`, see errors.ts) is remembered as missing:
// later calls to it fail at once, without a request, until a rare re-probe lets one call through again.
// The client keeps one registry per client (one account); controllers ask it before they plan an action.
import { CloudError, unsupportedEndpoint } from "./errors.ts";

/** One capability per endpoint beyond the spec: a server may have some of them and not others. */
export const CAPABILITIES = {
  "disk-operations-list": {
    description: "listing disk operations",
    endpoint: "GET /projects/:projectId/disks/operations",
  },
  "disk-operations-read": {
    description: "reading a disk operation",
    endpoint: "GET /projects/:projectId/disks/operations/:operationId",
  },
  "network-operations-list": {
    description: "listing network operations",
    endpoint: "GET /projects/:projectId/vpc/networks/operations",
  },
  "network-operations-read": {
    description: "reading a network operation",
    endpoint: "GET /projects/:projectId/vpc/networks/operations/:operationId",
  },
  "firewall-rule-operations-list": {
    description: "listing firewall-rule operations",
    endpoint: "GET /projects/:projectId/vpc/firewall-rules/operations",
  },
  "firewall-rule-operations-read": {
    description: "reading a firewall-rule operation",
    endpoint: "GET /projects/:projectId/vpc/firewall-rules/operations/:operationId",
  },
  "network-list": { description: "listing networks", endpoint: "GET /projects/:projectId/vpc/networks" },
  "network-delete": {
    description: "deleting a network",
    endpoint: "DELETE /projects/:projectId/vpc/networks/:networkId",
  },
  "firewall-rule-read": {
    description: "reading one firewall rule",
    endpoint: "GET /projects/:projectId/vpc/firewall-rules/:ruleId",
  },
  "firewall-rule-change": {
    description: "changing a firewall rule",
    endpoint: "PATCH /projects/:projectId/vpc/firewall-rules/:ruleId",
  },
  "firewall-rule-delete": {
    description: "deleting a firewall rule",
    endpoint: "DELETE /projects/:projectId/vpc/firewall-rules/:ruleId",
  },
} as const satisfies Record<string, { description: string; endpoint: string }>;

export type Capability = keyof typeof CAPABILITIES;
export const CAPABILITY_NAMES = Object.keys(CAPABILITIES) as Capability[];

const byEndpoint = new Map<string, Capability>(CAPABILITY_NAMES.map((name) => [CAPABILITIES[name].endpoint, name]));

/** The capability an endpoint (`GET`, `/projects/:projectId/vpc/networks`) belongs to; undefined for spec routes. */
export function capabilityOf(method: string, route: string): Capability | undefined {
  return byEndpoint.get(`${method} ${route}`);
}

/** The capabilities to list and read a family's operations (undefined for VMs: the spec has those endpoints). */
export function operationsCapabilitiesOf(family: string): { list: Capability; read: Capability } | undefined {
  if (family === "disk") return { list: "disk-operations-list", read: "disk-operations-read" };
  if (family === "network") return { list: "network-operations-list", read: "network-operations-read" };
  if (family === "firewall-rule") {
    return { list: "firewall-rule-operations-list", read: "firewall-rule-operations-read" };
  }
  return undefined;
}

export type CapabilityState = "supported" | "unsupported" | "unknown";

export interface CapabilityReport {
  capability: Capability;
  state: CapabilityState;
  description: string;
  /** When the state was last learned (ms since epoch); absent while unknown. */
  since?: number;
  /** For `unsupported`: the answer that showed it (`answered HTTP 404`). */
  detail?: string;
}

export interface CapabilityRegistryOptions {
  /** How long a missing capability is trusted before one call is let through again. Default 30 minutes. */
  reprobeAfterMs?: number;
  now?: () => number;
  /** Told when a capability's state changes (for a log line): not on every refused call. */
  onChange?: (report: CapabilityReport) => void;
}

interface Known {
  state: "supported" | "unsupported";
  since: number;
  detail?: string;
  /** A re-probe is under way: other callers are still refused until it answers. */
  probing: boolean;
}

export const DEFAULT_REPROBE_AFTER_MS = 30 * 60_000;

export class CapabilityRegistry {
  readonly #reprobeAfterMs: number;
  readonly #now: () => number;
  readonly #known = new Map<Capability, Known>();
  readonly #onChange: ((report: CapabilityReport) => void) | undefined;

  constructor(options: CapabilityRegistryOptions = {}) {
    this.#onChange = options.onChange;
    const reprobeAfterMs = options.reprobeAfterMs ?? DEFAULT_REPROBE_AFTER_MS;
    if (!(reprobeAfterMs > 0)) throw new RangeError(`reprobeAfterMs must be positive, got ${reprobeAfterMs}`);
    this.#reprobeAfterMs = reprobeAfterMs;
    this.#now = options.now ?? Date.now;
  }

  state(capability: Capability): CapabilityState {
    return this.#known.get(capability)?.state ?? "unknown";
  }

  /** true or false when known, undefined when this account has not met the capability yet. */
  supports(capability: Capability): boolean | undefined {
    const state = this.state(capability);
    return state === "unknown" ? undefined : state === "supported";
  }

  /**
   * Before a call: the error to fail with at once when the capability is known missing, or undefined to send
   * the call. Once `reprobeAfterMs` has passed, one call is let through (the others keep failing at once).
   */
  refusal(capability: Capability, method: string, route: string): CloudError | undefined {
    const known = this.#known.get(capability);
    if (known?.state !== "unsupported") return undefined;
    const now = this.#now();
    if (!known.probing && now - known.since >= this.#reprobeAfterMs) {
      known.probing = true;
      return undefined;
    }
    const retryAt = new Date(known.since + this.#reprobeAfterMs).toISOString();
    return unsupportedEndpoint(
      method,
      route,
      `${CAPABILITIES[capability].description}: ${known.detail ?? "missing"}; checked again after ${retryAt}`,
    );
  }

  /** After a call: `"supported"` (it answered 2xx); an `unsupported` CloudError; anything else shows neither. */
  record(capability: Capability, outcome: unknown): void {
    const known = this.#known.get(capability);
    if (outcome === "supported") {
      this.#known.set(capability, { state: "supported", since: this.#now(), probing: false });
      if (known?.state !== "supported") this.#changed(capability);
      return;
    }
    if (outcome instanceof CloudError && outcome.kind === "unsupported") {
      this.#known.set(capability, {
        state: "unsupported",
        since: this.#now(),
        detail: outcome.detail ?? outcome.message,
        probing: false,
      });
      if (known?.state !== "unsupported") this.#changed(capability);
      return;
    }
    // Inconclusive (a timeout, a 404 for a resource): a re-probe under way counts as done; ask again later.
    if (known?.probing) {
      known.probing = false;
      known.since = this.#now();
    }
  }

  /** Every capability with what is known of it (for logs, status and the CLI). */
  report(): CapabilityReport[] {
    return CAPABILITY_NAMES.map((capability) => this.#reportOf(capability));
  }

  #reportOf(capability: Capability): CapabilityReport {
    const known = this.#known.get(capability);
    const description = CAPABILITIES[capability].description;
    if (known === undefined) return { capability, state: "unknown", description };
    return {
      capability,
      state: known.state,
      description,
      since: known.since,
      ...(known.detail === undefined ? {} : { detail: known.detail }),
    };
  }

  #changed(capability: Capability): void {
    try {
      this.#onChange?.(this.#reportOf(capability));
    } catch {
      // A broken listener must not break the call that taught us.
    }
  }
}
