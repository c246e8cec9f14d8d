// The initial state: one organization, one project with a project API key, one user. Deterministic by
// default so that the playground and docs can print the same credentials every time.
import { randomUUID } from "node:crypto";
import type { Capacity } from "./catalogue.ts";
import { defaultCapacity } from "./catalogue.ts";
import type { SimState } from "./state.ts";

export const DEFAULT_API_KEY = "sim-api-key-0000000000000000000000000001";
export const DEFAULT_PROJECT_ID = "6a3c5d2e-0000-4000-8000-000000000001";
export const DEFAULT_ORGANIZATION_ID = "5f2b4c1d-0000-4000-8000-000000000001";
export const DEFAULT_USER = { email: "admin@example.com", password: "simulator-password" } as const;

export interface TenancyOptions {
  apiKey: string;
  projectId: string;
  user: { email: string; password: string };
  paymentMethodValid: boolean;
  capacity?: Capacity | undefined;
}

export function seedState(options: TenancyOptions): SimState {
  const capacity = defaultCapacity();
  for (const [location, perType] of Object.entries(options.capacity ?? {})) {
    capacity[location] = { ...capacity[location], ...perType };
  }
  return {
    version: 1,
    organizations: [
      {
        id: DEFAULT_ORGANIZATION_ID,
        name: "Simulated Org",
        payment_customer_id: options.paymentMethodValid ? "cus_sim_0001" : "",
        hasValidPaymentMethod: options.paymentMethodValid,
      },
    ],
    projects: [{ id: options.projectId, name: "default", organization_id: DEFAULT_ORGANIZATION_ID }],
    users: [{ email: options.user.email, password: options.user.password, projectIds: [options.projectId] }],
    apiKeys: [{ key: options.apiKey, projectId: options.projectId }],
    vms: [],
    disks: [],
    networks: [],
    firewallRules: [],
    operations: [],
    capacity,
    usage: {},
    addressCounter: 0,
  };
}

/** A further tenant (own organization, project, key and optionally user), e.g. to test 403 across projects. */
export function addTenant(
  state: SimState,
  request: {
    projectName: string;
    apiKey?: string | undefined;
    user?: { email: string; password: string } | undefined;
    paymentMethodValid?: boolean | undefined;
  },
): { organizationId: string; projectId: string; apiKey: string } {
  const organizationId = randomUUID();
  const projectId = randomUUID();
  const apiKey = request.apiKey ?? `sim-api-key-${randomUUID().replaceAll("-", "")}`;
  const valid = request.paymentMethodValid ?? true;
  state.organizations.push({
    id: organizationId,
    name: `${request.projectName} org`,
    payment_customer_id: valid ? `cus_sim_${organizationId.slice(0, 8)}` : "",
    hasValidPaymentMethod: valid,
  });
  state.projects.push({ id: projectId, name: request.projectName, organization_id: organizationId });
  state.apiKeys.push({ key: apiKey, projectId });
  if (request.user !== undefined) {
    const existing = state.users.find((u) => u.email === request.user?.email);
    if (existing === undefined) state.users.push({ ...request.user, projectIds: [projectId] });
    else existing.projectIds.push(projectId);
  }
  return { organizationId, projectId, apiKey };
}
