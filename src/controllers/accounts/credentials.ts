// Credentials: spec.credentialsRef.name (default `gpucloud-credentials`) in the object's namespace, else the
// operator's default Secret (--credentials-secret ns/name, the one documented cross-namespace exception), but only
// for a namespace that has no Secret of the default name at all (labelled or not) and that the operator lets use
// it (--default-credentials-namespaces): a namespace's own Secret is used or its objects stall, never silently
// replaced by the platform's. A Secret the operator itself wrote (connection details) is never credentials.
// A changed Secret (new resourceVersion) builds a new client without a restart when its credentials, project or
// URL changed; a change of its metadata alone (the in-use finalizer) keeps the account, with what it learned
// (list snapshots, operations in flight, the server's capabilities). The last good credentials of
// each Secret are kept in memory, so that an unreadable or deleted Secret never strands deletions; status says
// when they are in use. Secret values never reach a log line. The Secret's apiUrl must be one the operator's own
// configuration allows (--allowed-api-urls): a tenant's Secret cannot send the operator elsewhere.
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import {
  DEFAULT_CREDENTIALS_SECRET,
  GROUP,
  REASONS,
  type Reason,
  SECRET_WATCH_HINT,
  SECRET_WATCH_SELECTOR,
} from "../../api/common.ts";
import type { Credentials } from "../../cloud/auth.ts";
import { DEFAULT_BULKHEAD, sharedBulkheadFor } from "../../cloud/bulkhead.ts";
import { type CloudClient, createCloudClient } from "../../cloud/client.ts";
import { credentialKeyOf } from "../../cloud/rate-limit.ts";
import type { RequestObserver } from "../../cloud/transport.ts";
import type { ApiUrlPolicy } from "../../util/api-url.ts";
import type { Fence } from "../../util/fence.ts";
import { isRecord } from "../../util/is-record.ts";

/** The fields of a core/v1 Secret the operator reads. */
export interface SecretLike {
  metadata?: {
    namespace?: string;
    name?: string;
    resourceVersion?: string;
    deletionTimestamp?: unknown;
    labels?: Record<string, string>;
    ownerReferences?: { apiVersion?: string; kind?: string; name?: string }[];
  };
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

export interface SecretReader {
  getSecret(namespace: string, name: string): SecretLike | undefined;
}

export interface ParsedCredentials {
  credentials: Credentials;
  projectId: string;
  apiUrl: string;
}

export interface AccountHandle<A> {
  account: A;
  secret: { namespace: string; name: string };
  /** The Secret keys the credentials came from (`key apiKey`, or `keys email and password`), for messages. */
  keys: string;
  usingCached: boolean;
}

export type CredentialsResult<A> =
  | { type: "ok"; handle: AccountHandle<A> }
  | { type: "missing"; message: string; reason?: Reason };

export interface CredentialStoreOptions<A> {
  /** The Secrets the operator reads (labelled gpucloud.dev/watch=true, and the --credentials-secret). */
  secrets: SecretReader;
  /**
   * Secrets of the default credentials name in every watched namespace, labelled or not: whether a namespace has
   * one decides whether it may fall back to --credentials-secret. Without it, only labelled ones count.
   */
  defaultNamed?: SecretReader;
  /** Whether objects of a namespace may use --credentials-secret (--default-credentials-namespaces); default yes. */
  mayUseDefault?(namespace: string): boolean;
  /** --credentials-secret <namespace>/<name> */
  defaultSecret?: { namespace: string; name: string };
  /** --api-url, used when the Secret has no apiUrl. */
  defaultApiUrl?: string;
  /** --allowed-api-urls: a Secret naming another URL gets no client (and no request is ever sent to it). */
  apiUrls?: ApiUrlPolicy;
  /** Build the per-credential state (client, snapshots, trackers) for fresh credentials. */
  build(parsed: ParsedCredentials, credentialKey: string): A;
  /** Release what build() made (stop trackers) when the Secret changed. */
  dispose?(account: A): void;
  logger: Logger;
}

function decode(secret: SecretLike, key: string): string | undefined {
  const plain = secret.stringData?.[key];
  if (plain !== undefined && plain.trim() !== "") return plain.trim();
  const encoded = secret.data?.[key];
  if (encoded === undefined) return undefined;
  const value = Buffer.from(encoded, "base64").toString("utf8").trim();
  return value === "" ? undefined : value;
}

/**
 * Read the credential keys of a Secret; a message naming the missing key (never a value) when incomplete, and
 * reason ApiUrlNotAllowed when `apiUrls` does not allow its URL.
 */
export function parseCredentialsSecret(
  secret: SecretLike,
  defaultApiUrl: string | undefined,
  apiUrls?: ApiUrlPolicy,
): { ok: true; parsed: ParsedCredentials } | { ok: false; message: string; reason?: Reason } {
  const where = `Secret ${secret.metadata?.namespace ?? "?"}/${secret.metadata?.name ?? "?"}`;
  const apiKey = decode(secret, "apiKey");
  const email = decode(secret, "email");
  const password = decode(secret, "password");
  const projectId = decode(secret, "projectId");
  const apiUrl = decode(secret, "apiUrl") ?? defaultApiUrl;
  let credentials: Credentials;
  if (apiKey !== undefined) credentials = { apiKey };
  else if (email !== undefined && password !== undefined) credentials = { email, password };
  else return { ok: false, message: `${where} has neither key apiKey nor both keys email and password` };
  if (projectId === undefined) return { ok: false, message: `${where} has no key projectId` };
  // It goes into every object's status (at most 128 characters there), and into every request path.
  if (projectId.length > 128 || !/^[A-Za-z0-9][-A-Za-z0-9_.]*$/.test(projectId)) {
    return { ok: false, message: `${where}: key projectId is not a project id (letters, digits, -_. ; at most 128)` };
  }
  if (apiUrl === undefined)
    return { ok: false, message: `${where} has no key apiUrl and the operator has no --api-url` };
  if (!/^https?:\/\//.test(apiUrl)) return { ok: false, message: `${where}: apiUrl must be an http(s) URL` };
  if (apiUrls !== undefined) {
    const verdict = apiUrls.check(apiUrl);
    if (!verdict.allowed)
      return { ok: false, message: `${where}: ${verdict.message}`, reason: REASONS.ApiUrlNotAllowed };
  }
  return { ok: true, parsed: { credentials, projectId, apiUrl } };
}

interface CacheEntry<A> {
  resourceVersion: string;
  /** Digest of the parsed credentials, project and URL: the same digest keeps the account. */
  fingerprint: string;
  account: A;
  keys: string;
}

function fingerprintOf(parsed: ParsedCredentials): string {
  return createHash("sha256")
    .update(JSON.stringify([parsed.credentials, parsed.projectId, parsed.apiUrl]))
    .digest("hex");
}

const keysOf = (credentials: Credentials): string =>
  "apiKey" in credentials ? "key apiKey" : "keys email and password";

/** spec.credentialsRef.name of an unparsed object (a hot path: no schema), undefined when absent or empty. */
export function credentialsRefNameOf(object: unknown): string | undefined {
  if (!isRecord(object) || !isRecord(object.spec) || !isRecord(object.spec.credentialsRef)) return undefined;
  const name = object.spec.credentialsRef.name;
  return typeof name === "string" && name !== "" ? name : undefined;
}

/** The command that makes an unlabelled Secret visible to the operator. */
export function unlabelledMessage(namespace: string, name: string): string {
  const [key, value] = SECRET_WATCH_SELECTOR.split("=");
  return `Secret ${namespace}/${name} exists but is not labelled ${SECRET_WATCH_SELECTOR}, so the operator does not read it (and uses no other Secret instead): kubectl label secret -n ${namespace} ${name} ${key}=${value}`;
}

/** The object (`GpuVm ns/name`) that wrote this Secret as its connection details, when the operator did. */
export function connectionDetailsOwner(secret: SecretLike): string | undefined {
  const owner = secret.metadata?.ownerReferences?.find((reference) => reference.apiVersion?.startsWith(`${GROUP}/`));
  if (owner === undefined) return undefined;
  return `${owner.kind ?? "object"} ${secret.metadata?.namespace ?? "?"}/${owner.name ?? "?"}`;
}

export class CredentialStore<A> {
  readonly #options: CredentialStoreOptions<A>;
  readonly #accounts = new Map<string, CacheEntry<A>>();

  constructor(options: CredentialStoreOptions<A>) {
    this.#options = options;
  }

  /**
   * The Secret an object uses: the one it names (or the default name) in its namespace when that Secret exists
   * there (labelled or not) or was used before; else, for the default name only, the operator's default Secret
   * when this namespace may use it.
   */
  secretFor(namespace: string, refName: string | undefined): { namespace: string; name: string } | undefined {
    const name = refName ?? DEFAULT_CREDENTIALS_SECRET;
    if (this.#existsInNamespace(namespace, name) || this.#accounts.has(`${namespace}/${name}`)) {
      return { namespace, name };
    }
    if (name === DEFAULT_CREDENTIALS_SECRET && this.#mayUseDefault(namespace)) return this.#options.defaultSecret;
    return { namespace, name };
  }

  #existsInNamespace(namespace: string, name: string): boolean {
    if (this.#options.secrets.getSecret(namespace, name) !== undefined) return true;
    return name === DEFAULT_CREDENTIALS_SECRET && this.#options.defaultNamed?.getSecret(namespace, name) !== undefined;
  }

  #mayUseDefault(namespace: string): boolean {
    return this.#options.defaultSecret !== undefined && (this.#options.mayUseDefault?.(namespace) ?? true);
  }

  /** Why there is no Secret to use: not there, there without the label, or not offered the default credentials. */
  #missing(namespace: string, name: string): CredentialsResult<A> {
    const where = `${namespace}/${name}`;
    const unlabelled =
      name === DEFAULT_CREDENTIALS_SECRET ? this.#options.defaultNamed?.getSecret(namespace, name) : undefined;
    if (unlabelled !== undefined) return { type: "missing", message: unlabelledMessage(namespace, name) };
    const refused =
      name === DEFAULT_CREDENTIALS_SECRET &&
      this.#options.defaultSecret !== undefined &&
      !this.#mayUseDefault(namespace)
        ? `; the operator's default credentials are not offered to namespace ${namespace} (--default-credentials-namespaces)`
        : "";
    return {
      type: "missing",
      message: `Secret ${where} with the cloud credentials not found: create it with the keys apiKey (or email and password) and projectId (apiUrl optional), labelled ${SECRET_WATCH_SELECTOR} (${SECRET_WATCH_HINT})${refused}`,
    };
  }

  resolve(namespace: string, refName: string | undefined): CredentialsResult<A> {
    const secretRef = this.secretFor(namespace, refName);
    if (secretRef === undefined) return { type: "missing", message: "no credentials Secret" };
    const cacheKey = `${secretRef.namespace}/${secretRef.name}`;
    const cached = this.#accounts.get(cacheKey);
    const secret = this.#options.secrets.getSecret(secretRef.namespace, secretRef.name);
    if (secret === undefined) {
      if (cached !== undefined) return { type: "ok", handle: { ...cached, secret: secretRef, usingCached: true } };
      return this.#missing(secretRef.namespace, secretRef.name);
    }
    const writer = connectionDetailsOwner(secret);
    if (writer !== undefined) {
      // Never credentials, whatever it holds: the operator wrote it (a GpuVm's connection details).
      return {
        type: "missing",
        message: `Secret ${cacheKey} holds the connection details ${writer} wrote, not cloud credentials: give that object another spec.connectionDetails.secretName, delete this Secret, and create the credentials Secret`,
      };
    }
    const resourceVersion = secret.metadata?.resourceVersion ?? "";
    // A Secret being deleted is on its way out: like a gone one, it serves only deletions (usingCached).
    const leaving = secret.metadata?.deletionTimestamp !== undefined && secret.metadata.deletionTimestamp !== null;
    if (cached !== undefined && cached.resourceVersion === resourceVersion) {
      return { type: "ok", handle: { ...cached, secret: secretRef, usingCached: leaving } };
    }
    const parsed = parseCredentialsSecret(secret, this.#options.defaultApiUrl, this.#options.apiUrls);
    if (!parsed.ok) {
      if (cached !== undefined) return { type: "ok", handle: { ...cached, secret: secretRef, usingCached: true } };
      return { type: "missing", message: parsed.message, ...(parsed.reason ? { reason: parsed.reason } : {}) };
    }
    const fingerprint = fingerprintOf(parsed.parsed);
    if (cached !== undefined && cached.fingerprint === fingerprint) {
      cached.resourceVersion = resourceVersion;
      return { type: "ok", handle: { ...cached, secret: secretRef, usingCached: leaving } };
    }
    const credentialKey = credentialKeyOf(parsed.parsed.credentials, parsed.parsed.apiUrl);
    const account = this.#options.build(parsed.parsed, credentialKey);
    if (cached !== undefined) this.#options.dispose?.(cached.account);
    const keys = keysOf(parsed.parsed.credentials);
    this.#accounts.set(cacheKey, { resourceVersion, fingerprint, account, keys });
    this.#options.logger.info({ secret: cacheKey, credentialKey, resourceVersion }, "cloud credentials loaded");
    return { type: "ok", handle: { account, secret: secretRef, keys, usingCached: leaving } };
  }

  accounts(): A[] {
    return [...this.#accounts.values()].map((entry) => entry.account);
  }

  stop(): void {
    for (const entry of this.#accounts.values()) this.#options.dispose?.(entry.account);
    this.#accounts.clear();
  }
}

export interface ClientFactoryOptions {
  /** The server's rate per credential (the adaptive bucket's ceiling) and burst. */
  ratePerSec: number;
  burst?: number;
  /** Reconciles per controller that may talk to one account at once while it is healthy (default 3). */
  accountConcurrency?: number;
  /** The request timeout: deadline of one call, retries included (default 10 s). */
  timeoutMs?: number;
  /** Answer size limit (default 4 MiB). */
  maxResponseBytes?: number;
  observer?: RequestObserver;
  logger?: Logger;
  /** Every write is checked against it as it leaves (the leadership fence); the User-Agent names the replica. */
  fence?: Fence;
  userAgent?: string;
}

/**
 * A cloud client for parsed credentials, sharing the account's bulkhead (token bucket, breaker, admission). The
 * bucket is paced at the server's rate with a tenth of its burst kept as headroom, lowered on 429 and regained
 * gradually (cloud/rate-limit.ts).
 */
export function clientFor(
  parsed: ParsedCredentials,
  credentialKey: string,
  options: ClientFactoryOptions,
): CloudClient {
  const ratePerSec = options.ratePerSec;
  const burst = options.burst ?? Math.max(1, Math.ceil(ratePerSec * 2));
  const bulkhead = sharedBulkheadFor(credentialKey, {
    ...DEFAULT_BULKHEAD,
    laneLimit: options.accountConcurrency ?? 3,
    rateLimit: { ratePerSec, burst, reserve: Math.floor(burst / 10), adaptive: {} },
  });
  return createCloudClient({
    baseUrl: parsed.apiUrl,
    credentials: parsed.credentials,
    bulkhead,
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    ...(options.maxResponseBytes !== undefined ? { maxResponseBytes: options.maxResponseBytes } : {}),
    ...(options.observer ? { observer: options.observer } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.fence ? { fence: options.fence } : {}),
    ...(options.userAgent ? { userAgent: options.userAgent } : {}),
  });
}
