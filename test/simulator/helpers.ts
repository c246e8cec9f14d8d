// Plain-HTTP helpers for the simulator tests (deliberately not the project's client).
import type { z } from "zod";
import { ErrorBody, Operation, OperationEnvelope } from "../../src/cloud/wire.ts";
import type { RunningSimulator, SimulatorOptions } from "../../src/simulator/index.ts";
import { startSimulator } from "../../src/simulator/index.ts";

export interface HttpAnswer {
  status: number;
  headers: Headers;
  body: unknown;
}

/** Assert a status and parse the body with a wire schema (which also checks the shape). */
export function parseAnswer<S extends z.ZodType>(answer: HttpAnswer, status: number, schema: S): z.output<S> {
  if (answer.status !== status) {
    throw new Error(`expected HTTP ${status}, got ${answer.status}: ${JSON.stringify(answer.body)}`);
  }
  return schema.parse(answer.body);
}

export const ok = <S extends z.ZodType>(answer: HttpAnswer, schema: S): z.output<S> => parseAnswer(answer, 200, schema);

/** Assert an error answer: status, `code`, and return the message. */
export function errorOf(answer: HttpAnswer, status: number, code: string): string {
  const body = parseAnswer(answer, status, ErrorBody);
  if (body.code !== code) throw new Error(`expected code ${code}, got ${body.code}: ${body.message}`);
  return body.message;
}

/** The operation of a `{ operation }` answer. */
export const opOf = (answer: HttpAnswer): Operation => ok(answer, OperationEnvelope).operation;

export interface Api {
  sim: RunningSimulator;
  /** Project-relative (`/vms`) or absolute from the base (`/projects`) paths, with the API key by default. */
  call(method: string, path: string, body?: unknown, token?: string | null): Promise<HttpAnswer>;
  project(path?: string): string;
  admin(method: string, path: string, body?: unknown): Promise<HttpAnswer>;
  /** Poll one operation until it leaves IN_PROGRESS. */
  settle(family: string, operationId: string): Promise<Operation>;
}

async function request(url: string, method: string, body: unknown, token: string | null): Promise<HttpAnswer> {
  const headers: Record<string, string> = {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(url, {
    method,
    headers,
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = text === "" ? undefined : JSON.parse(text);
  } catch {
    // keep the raw text
  }
  return { status: response.status, headers: response.headers, body: parsed };
}

const FAMILY_PATHS: Record<string, string> = {
  vm: "vms",
  disk: "disks",
  network: "vpc/networks",
  "firewall-rule": "vpc/firewall-rules",
};

export function apiFor(sim: RunningSimulator): Api {
  const api: Api = {
    sim,
    project: (path = "") => `/projects/${sim.projectId}${path}`,
    call: (method, path, body, token) =>
      request(`${sim.url}${path}`, method, body, token === undefined ? sim.apiKey : token),
    admin: (method, path, body) => request(`${sim.adminUrl}${path}`, method, body, null),
    async settle(family, operationId) {
      for (let attempt = 0; attempt < 500; attempt++) {
        const answer = await api.call("GET", api.project(`/${FAMILY_PATHS[family]}/operations/${operationId}`));
        const op = ok(answer, Operation);
        if (op.state !== "IN_PROGRESS") return op;
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      throw new Error(`operation ${operationId} did not settle`);
    },
  };
  return api;
}

/** A fast simulator for tests: operations settle on the next tick, no rate limit. */
export async function startTestSimulator(options: SimulatorOptions = {}): Promise<Api> {
  return apiFor(await startSimulator({ port: 0, latencyMs: 0, rateLimit: false, ...options }));
}

export const SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey test@example";

export function vmBody(name: string, extra: Record<string, unknown> = {}) {
  return { name, type: "a40.1x", location: "us-east1-a", ssh_public_key: SSH_KEY, ...extra };
}

export const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;
