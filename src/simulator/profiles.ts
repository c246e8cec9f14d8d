// Profiles: which API the simulator serves. `contract` (the default) serves the spec plus every endpoint of
// contract-decisions.md; `seed-only` serves exactly the endpoints the spec shows, as a real server that follows
// the spec to the letter might: the contract-only routes answer as unknown routes do, and finished operations
// vanish after a while (and then read 403, as the real cloud answers for an expired operation id).

export const SIMULATOR_PROFILES = ["contract", "seed-only"] as const;
export type SimulatorProfile = (typeof SIMULATOR_PROFILES)[number];

export function isSimulatorProfile(value: string): value is SimulatorProfile {
  return (SIMULATOR_PROFILES as readonly string[]).includes(value);
}

/** Routes (Fastify templates relative to `/v0.1`) that contract-decisions.md adds and the spec does not show. */
export const CONTRACT_ONLY_ROUTES: readonly { method: string; url: string }[] = [
  { method: "GET", url: "/projects/:projectId/disks/operations" },
  { method: "GET", url: "/projects/:projectId/disks/operations/:operationId" },
  { method: "GET", url: "/projects/:projectId/vpc/networks/operations" },
  { method: "GET", url: "/projects/:projectId/vpc/networks/operations/:operationId" },
  { method: "GET", url: "/projects/:projectId/vpc/firewall-rules/operations" },
  { method: "GET", url: "/projects/:projectId/vpc/firewall-rules/operations/:operationId" },
  { method: "GET", url: "/projects/:projectId/vpc/networks" },
  { method: "DELETE", url: "/projects/:projectId/vpc/networks/:networkId" },
  { method: "GET", url: "/projects/:projectId/vpc/firewall-rules/:ruleId" },
  { method: "PATCH", url: "/projects/:projectId/vpc/firewall-rules/:ruleId" },
  { method: "DELETE", url: "/projects/:projectId/vpc/firewall-rules/:ruleId" },
];

const contractOnly = new Set(CONTRACT_ONLY_ROUTES.map((route) => `${route.method} ${route.url}`));

export function isContractOnly(method: string, url: string): boolean {
  return contractOnly.has(`${method} ${url}`);
}

/** Whether the profile serves a route (the others answer as an unknown route). */
export function servesRoute(profile: SimulatorProfile, method: string, url: string): boolean {
  return profile === "contract" || !isContractOnly(method, url);
}

export interface ProfileDefaults {
  /** How long finished operations stay listed and readable; undefined keeps them (pruned after a day). */
  operationRetentionMs: number | undefined;
  unknownOperationStatus: 403 | 404;
  /** Whether availability items carry `available_count` (an extension beyond the spec; docs/api-contract.md). */
  availabilityCounts: boolean;
}

/** The seed-only profile drops a finished operation one minute after it ended. */
export const SEED_ONLY_OPERATION_RETENTION_MS = 60_000;

export function profileDefaults(profile: SimulatorProfile): ProfileDefaults {
  return profile === "seed-only"
    ? { operationRetentionMs: SEED_ONLY_OPERATION_RETENTION_MS, unknownOperationStatus: 403, availabilityCounts: false }
    : { operationRetentionMs: undefined, unknownOperationStatus: 404, availabilityCounts: true };
}
