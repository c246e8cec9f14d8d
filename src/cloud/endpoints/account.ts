// The account's endpoints: sign-in (password and refresh grants, password change), organizations (and their
// billing link), projects, and what a project was billed (usage).
import { type PasswordAuthenticator, requestToken } from "../auth.ts";
import type { Transport } from "../transport.ts";
import {
  BillingLink,
  ChangePasswordRequest,
  MessageResponse,
  Organization,
  Project,
  ProjectListItem,
  type TokenResponse,
  UsageItem,
  type UsageQuery,
} from "../wire.ts";
import {
  type Call,
  type CallOptions,
  csv,
  invalidRequest,
  listOf,
  projectGet,
  projectRoute,
  requireId,
  validateBody,
} from "./shared.ts";

type SignIn = { email: string; password: string };

/** `passwordAuth`: the client's own sign-in, when its credentials are an email and password. */
export function authEndpoints(call: Call, transport: Transport, passwordAuth: PasswordAuthenticator | undefined) {
  return {
    /** Password grant. Defaults to the client's own user. */
    async token(signIn?: SignIn, opts: CallOptions = {}): Promise<TokenResponse> {
      const user = signIn ?? passwordAuth?.signIn();
      if (!user) throw invalidRequest("POST", "/auth/token", "email and password are needed for a password grant");
      const grant = { grant_type: "password" as const, email: user.email, password: user.password };
      return requestToken(transport, grant, opts.signal);
    },
    async refresh(refreshToken: string, opts: CallOptions = {}): Promise<TokenResponse> {
      if (!refreshToken) throw invalidRequest("POST", "/auth/token", "refresh token must be non-empty");
      return requestToken(transport, { grant_type: "refresh_token", refresh_token: refreshToken }, opts.signal);
    },
    async changePassword(request: ChangePasswordRequest, opts: CallOptions = {}): Promise<{ message: string }> {
      const route = "/auth/change-password";
      const body = validateBody(ChangePasswordRequest, request, "POST", route);
      const answer = await call({
        method: "POST",
        route,
        path: "auth/change-password",
        body,
        schema: MessageResponse,
        sensitive: true,
        signal: opts.signal,
      });
      passwordAuth?.passwordChanged(body.new_password);
      return answer;
    },
  };
}

const Organizations = listOf(Organization);
const Projects = listOf(ProjectListItem);
const Usage = listOf(UsageItem);

export function organizationEndpoints(call: Call) {
  return {
    list: async (opts: CallOptions = {}) =>
      call({
        method: "GET",
        route: "/organizations",
        path: "organizations",
        schema: Organizations,
        signal: opts.signal,
      }),
    billingLink: async (organizationId: string, opts: CallOptions = {}) => {
      const route = "/organizations/:organizationId/billing";
      const org = requireId(organizationId, "organizationId", "GET", route);
      return call({
        method: "GET",
        route,
        path: `organizations/${org}/billing`,
        schema: BillingLink,
        signal: opts.signal,
      });
    },
  };
}

export function projectEndpoints(call: Call) {
  return {
    list: async (opts: CallOptions = {}) =>
      call({ method: "GET", route: "/projects", path: "projects", schema: Projects, signal: opts.signal }),
    get: async (projectId: string, opts: CallOptions = {}) => {
      const route = projectRoute("");
      const p = requireId(projectId, "projectId", "GET", route);
      return call({ method: "GET", route, path: `projects/${p}`, schema: Project, signal: opts.signal });
    },
  };
}

export function usageEndpoints(call: Call) {
  return {
    async list(projectId: string, query: UsageQuery = {}, opts: CallOptions = {}): Promise<UsageItem[]> {
      const { p, route, endpoint } = projectGet(projectId, "/usage", Usage, opts);
      for (const key of ["start_date", "end_date"] as const) {
        const value = query[key];
        if (value !== undefined && !/^\d{4}-\d{2}-\d{2}$/.test(value)) {
          throw invalidRequest("GET", route, `${key} must be YYYY-MM-DD`, key);
        }
      }
      const q = {
        resource_types: csv(query.resource_types),
        regions: csv(query.regions),
        start_date: query.start_date,
        end_date: query.end_date,
      };
      return call({ ...endpoint, path: `projects/${p}/usage`, query: q });
    },
  };
}
