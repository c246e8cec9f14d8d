// A small HTTP(S) client for a Kubernetes API: one request at a time, the answer as status, headers and text,
// and line-by-line watch streams; a kubeconfig read into a target. Speaks to the real API server (TLS, client certificate or bearer token) and
// to the test double (plain HTTP) alike, so that tests can send both the same requests.
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { parse } from "yaml";
import { z } from "zod";

export interface KubeTarget {
  /** https://127.0.0.1:6443 or http://127.0.0.1:8090 */
  url: string;
  /** PEM: the cluster CA (https only). */
  ca?: string;
  /** PEM client certificate and key (https only). */
  cert?: string;
  key?: string;
  token?: string;
  /** https without checking the server's certificate: only for what kubeadm reads before it trusts a CA. */
  insecureSkipTlsVerify?: boolean;
}

export class KubeconfigError extends Error {
  override name = "KubeconfigError";
}

const Kubeconfig = z.object({
  "current-context": z.string().optional(),
  clusters: z.array(
    z.object({
      name: z.string(),
      cluster: z.object({
        server: z.string(),
        "certificate-authority-data": z.string().optional(),
        "insecure-skip-tls-verify": z.boolean().optional(),
      }),
    }),
  ),
  users: z
    .array(
      z.object({
        name: z.string(),
        user: z
          .object({
            token: z.string().optional(),
            "client-certificate-data": z.string().optional(),
            "client-key-data": z.string().optional(),
          })
          .nullable(),
      }),
    )
    .default([]),
  contexts: z.array(z.object({ name: z.string(), context: z.object({ cluster: z.string(), user: z.string() }) })),
});

const fromBase64 = (text: string | undefined): string | undefined =>
  text === undefined ? undefined : Buffer.from(text, "base64").toString("utf8");

/**
 * The target of a kubeconfig's current context, with its credentials inline (the `*-data` fields or a token;
 * files and exec plugins are not read). Throws KubeconfigError saying what is missing.
 */
export function kubeTargetOf(kubeconfigYaml: string): KubeTarget {
  let document: unknown;
  try {
    document = parse(kubeconfigYaml);
  } catch (error) {
    throw new KubeconfigError("the kubeconfig is not YAML", { cause: error });
  }
  const parsed = Kubeconfig.safeParse(document);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new KubeconfigError(`the kubeconfig has no ${issue?.path.join(".") ?? "clusters"} as expected`);
  }
  const config = parsed.data;
  const context = config.contexts.find((candidate) => candidate.name === config["current-context"]);
  if (context === undefined) throw new KubeconfigError(`no context "${config["current-context"] ?? ""}"`);
  const cluster = config.clusters.find((candidate) => candidate.name === context.context.cluster)?.cluster;
  if (cluster === undefined) throw new KubeconfigError(`no cluster "${context.context.cluster}"`);
  const user = config.users.find((candidate) => candidate.name === context.context.user)?.user ?? {};
  if (!URL.canParse(cluster.server)) throw new KubeconfigError(`server "${cluster.server}" is not a URL`);
  const target: KubeTarget = { url: cluster.server };
  const ca = fromBase64(cluster["certificate-authority-data"]);
  if (ca !== undefined) target.ca = ca;
  if (cluster["insecure-skip-tls-verify"] === true) target.insecureSkipTlsVerify = true;
  if (user.token !== undefined) target.token = user.token;
  const cert = fromBase64(user["client-certificate-data"]);
  const key = fromBase64(user["client-key-data"]);
  if (cert !== undefined && key !== undefined) Object.assign(target, { cert, key });
  if (target.token === undefined && target.cert === undefined) {
    throw new KubeconfigError(`user "${context.context.user}" has no token or client certificate data inline`);
  }
  return target;
}

export interface KubeRequest {
  method?: string;
  path: string;
  /** An object is sent as JSON; a string as it is. */
  body?: unknown;
  contentType?: string;
  accept?: string;
  timeoutMs?: number;
}

export interface KubeResponse {
  status: number;
  headers: IncomingMessage["headers"];
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: unknown;
}

export class KubeHttpError extends Error {
  override name = "KubeHttpError";
}

function open(target: KubeTarget, request: KubeRequest, onResponse: (response: IncomingMessage) => void) {
  const url = new URL(request.path, target.url);
  const headers: Record<string, string> = { accept: request.accept ?? "application/json" };
  if (target.token !== undefined) headers.authorization = `Bearer ${target.token}`;
  let payload: string | undefined;
  if (request.body !== undefined) {
    payload = typeof request.body === "string" ? request.body : JSON.stringify(request.body);
    headers["content-type"] = request.contentType ?? "application/json";
  }
  const options = { method: request.method ?? "GET", headers, timeout: request.timeoutMs ?? 30_000 };
  const outgoing =
    url.protocol === "https:"
      ? httpsRequest(
          url,
          {
            ...options,
            ca: target.ca,
            cert: target.cert,
            key: target.key,
            rejectUnauthorized: target.insecureSkipTlsVerify !== true,
          },
          onResponse,
        )
      : httpRequest(url, options, onResponse);
  outgoing.on("timeout", () => outgoing.destroy(new KubeHttpError(`${options.method} ${request.path}: timed out`)));
  outgoing.end(payload);
  return outgoing;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Sends one request and reads the whole answer. Network errors reject; HTTP errors resolve with their status. */
export function kubeRequest(target: KubeTarget, request: KubeRequest): Promise<KubeResponse> {
  return new Promise((resolve, reject) => {
    const outgoing = open(target, request, (response) => {
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.on("error", reject);
      response.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        resolve({ status: response.statusCode ?? 0, headers: response.headers, text, json: parseJson(text) });
      });
    });
    outgoing.on("error", reject);
  });
}

/** Sends a request and throws unless the status is one of `expected`. */
export async function kubeExpect(target: KubeTarget, request: KubeRequest, expected: number[]): Promise<KubeResponse> {
  const response = await kubeRequest(target, request);
  if (!expected.includes(response.status)) {
    throw new KubeHttpError(
      `${request.method ?? "GET"} ${request.path}: HTTP ${response.status} ${response.text.slice(0, 500)}`,
    );
  }
  return response;
}

export interface KubeWatch {
  status: number;
  /** Resolves with the next parsed line, or undefined when the stream has ended or the time is up. */
  next(timeoutMs: number): Promise<unknown>;
  close(): void;
}

/** Opens a watch (or any streamed answer) and hands out its newline-delimited JSON lines one by one. */
export function kubeWatch(target: KubeTarget, request: KubeRequest): Promise<KubeWatch> {
  return new Promise((resolve, reject) => {
    const outgoing = open(target, { timeoutMs: 120_000, ...request }, (response) => {
      const lines: unknown[] = [];
      const waiters: ((line: unknown) => void)[] = [];
      let buffered = "";
      let ended = false;
      const deliver = (line: unknown): void => {
        const waiter = waiters.shift();
        if (waiter === undefined) lines.push(line);
        else waiter(line);
      };
      response.on("data", (chunk: Buffer) => {
        buffered += chunk.toString("utf8");
        let newline = buffered.indexOf("\n");
        while (newline >= 0) {
          const line = buffered.slice(0, newline).trim();
          buffered = buffered.slice(newline + 1);
          if (line !== "") deliver(parseJson(line) ?? line);
          newline = buffered.indexOf("\n");
        }
      });
      const end = (): void => {
        ended = true;
        const rest = buffered.trim();
        buffered = "";
        if (rest !== "") deliver(parseJson(rest) ?? rest);
        for (const waiter of waiters.splice(0)) waiter(undefined);
      };
      response.on("end", end);
      response.on("error", end);
      response.on("close", end);
      resolve({
        status: response.statusCode ?? 0,
        next(timeoutMs) {
          if (lines.length > 0) return Promise.resolve(lines.shift());
          if (ended) return Promise.resolve(undefined);
          return new Promise((resolveLine) => {
            const timer = setTimeout(() => {
              const index = waiters.indexOf(waiter);
              if (index >= 0) waiters.splice(index, 1);
              resolveLine(undefined);
            }, timeoutMs);
            const waiter = (line: unknown): void => {
              clearTimeout(timer);
              resolveLine(line);
            };
            waiters.push(waiter);
          });
        },
        close() {
          outgoing.destroy();
        },
      });
    });
    outgoing.on("error", (error) => reject(error));
  });
}
