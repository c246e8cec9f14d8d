// A node's `kubeadm join`, checked as kubeadm checks it before a kubelet may register: the join is read from a
// cloud-config (the bootstrap data Cluster API's kubeadm bootstrap provider writes), then token discovery is run
// against the API server it names (cmd/kubeadm/app/discovery/token: the kube-public/cluster-info ConfigMap read
// without trusting the server, its JWS signature for the token's id checked with the token's secret, the CA in
// it checked against the pinned `sha256:` hashes, the ConfigMap read again over TLS trusting that CA), and the
// token is presented to the API server as the kubelet's TLS bootstrap would. Plain HTTPS and YAML, no
// Kubernetes client library: the simulator's node-join emulation is meant to use it.
import { createHash, createHmac, timingSafeEqual, X509Certificate } from "node:crypto";
import { gunzipSync } from "node:zlib";
import { parseAllDocuments } from "yaml";
import { z } from "zod";
import { type KubeTarget, kubeRequest } from "./http.ts";

/** Why a join is refused; each is a state the node (and the Machine waiting for it) stays in. */
export type JoinRefusal =
  /** The bootstrap data is not a cloud-config (no `#cloud-config` line, or not YAML). */
  | "NotCloudConfig"
  /** No `kubeadm join` among its commands. */
  | "NoKubeadmJoin"
  /** The join's configuration (file or flags) is missing or does not parse, or asks for what is not emulated. */
  | "InvalidJoinConfiguration"
  /** The API server endpoint is not one of the clusters the caller knows. */
  | "UnknownEndpoint"
  /** The API server did not answer. */
  | "Unreachable"
  /** No kube-public/cluster-info ConfigMap with a kubeconfig: the cluster is not set up for token bootstrapping. */
  | "NotSetUpForTokenBootstrap"
  /** No JWS signature for the token's id: the token does not exist in kube-system, or it expired. */
  | "TokenInvalidOrExpired"
  /** A signature exists for the token's id, but the token's secret does not verify it. */
  | "SignatureMismatch"
  /** The cluster's CA matches none of the pinned `caCertHashes`. */
  | "CAHashMismatch"
  /** The API server refused the token as credentials (the kubelet's TLS bootstrap would fail). */
  | "TokenRejected";

export class KubeadmJoinError extends Error {
  override name = "KubeadmJoinError";
  readonly reason: JoinRefusal;

  constructor(reason: JoinRefusal, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.reason = reason;
  }
}

export interface BootstrapToken {
  id: string;
  secret: string;
}

/** What a `kubeadm join` asks for, read from a cloud-config. */
export interface KubeadmJoin {
  /** host:port, as kubeadm dials it (https). */
  apiServerEndpoint: string;
  /** The token of discovery (its id names the JWS signature in cluster-info). */
  discoveryToken: BootstrapToken;
  /** The token the kubelet's TLS bootstrap authenticates with (the discovery token unless set apart). */
  tlsBootstrapToken: BootstrapToken;
  /** `sha256:<hex>` of the CA's SubjectPublicKeyInfo, as `kubeadm token create --print-join-command` prints. */
  caCertHashes: string[];
  unsafeSkipCAVerification: boolean;
  /** nodeRegistration.name as written (often a cloud-init template such as `{{ ds.meta_data.local_hostname }}`). */
  nodeName?: string;
  /** Where the join came from: the JoinConfiguration's apiVersion, or "flags". */
  source: string;
}

/** What the API server confirmed: the join would succeed. */
export interface VerifiedJoin {
  /** https://<apiServerEndpoint> */
  serverUrl: string;
  /** The CA the node now trusts (PEM, from cluster-info). */
  caPem: string;
  /** The user the kubelet's bootstrap credentials are (`system:bootstrap:<token id>`), and its groups. */
  username: string;
  groups: string[];
}

const TOKEN_PATTERN = /^([a-z0-9]{6})\.([a-z0-9]{16})$/;
const CA_HASH_PATTERN = /^sha256:[0-9a-f]{64}$/;
const JOIN_CONFIGURATION_VERSIONS = ["kubeadm.k8s.io/v1beta3", "kubeadm.k8s.io/v1beta4"];

function bootstrapToken(text: string, what: string): BootstrapToken {
  const match = TOKEN_PATTERN.exec(text);
  if (match?.[1] === undefined || match[2] === undefined) {
    throw new KubeadmJoinError(
      "InvalidJoinConfiguration",
      `${what} "${text.slice(0, 40)}" is not a bootstrap token ([a-z0-9]{6}.[a-z0-9]{16})`,
    );
  }
  return { id: match[1], secret: match[2] };
}

const WriteFile = z.object({
  path: z.string(),
  content: z.string().default(""),
  encoding: z.string().optional(),
});
const CloudConfig = z.object({
  write_files: z.array(z.unknown()).optional(),
  runcmd: z.array(z.union([z.string(), z.array(z.string())])).optional(),
});

const JoinConfiguration = z.object({
  apiVersion: z.string(),
  kind: z.literal("JoinConfiguration"),
  discovery: z.object({
    bootstrapToken: z
      .object({
        apiServerEndpoint: z.string().optional(),
        token: z.string().optional(),
        caCertHashes: z.array(z.string()).optional(),
        unsafeSkipCAVerification: z.boolean().optional(),
      })
      .optional(),
    file: z.unknown().optional(),
    tlsBootstrapToken: z.string().optional(),
  }),
  nodeRegistration: z.object({ name: z.string().optional() }).optional(),
});

function decodeContent(file: z.infer<typeof WriteFile>): string {
  try {
    return decode(file);
  } catch (error) {
    if (error instanceof KubeadmJoinError) throw error;
    throw new KubeadmJoinError("InvalidJoinConfiguration", `write_files ${file.path}: not ${file.encoding}`, {
      cause: error,
    });
  }
}

function decode(file: z.infer<typeof WriteFile>): string {
  switch (file.encoding ?? "text/plain") {
    case "text/plain":
      return file.content;
    case "b64":
    case "base64":
      return Buffer.from(file.content, "base64").toString("utf8");
    case "gz+b64":
    case "gzip+base64":
    case "gz+base64":
    case "gzip+b64":
      return gunzipSync(Buffer.from(file.content, "base64")).toString("utf8");
    default:
      throw new KubeadmJoinError("InvalidJoinConfiguration", `write_files ${file.path}: encoding ${file.encoding}`);
  }
}

/** Splits one shell command line into the words of each simple command (`a && b; c` → [[a], [b], [c]]). */
function simpleCommands(line: string): string[][] {
  const commands: string[][] = [[]];
  let word: string | undefined;
  let quote: string | undefined;
  const endWord = (): void => {
    if (word !== undefined) commands[commands.length - 1]?.push(word);
    word = undefined;
  };
  for (let index = 0; index < line.length; index += 1) {
    const char = line[index] ?? "";
    if (quote !== undefined) {
      if (char === quote) quote = undefined;
      else word = (word ?? "") + char;
    } else if (char === "'" || char === '"') {
      quote = char;
      word = word ?? "";
    } else if (/\s/.test(char)) {
      endWord();
    } else if (char === ";" || char === "&" || char === "|") {
      endWord();
      if (line[index + 1] === char) index += 1;
      commands.push([]);
    } else {
      word = (word ?? "") + char;
    }
  }
  endWord();
  return commands.filter((words) => words.length > 0);
}

/** The words after `kubeadm join` (a path to kubeadm and a `sudo` in front are allowed), if this is one. */
function kubeadmJoinArguments(words: string[]): string[] | undefined {
  const start = words[0] === "sudo" ? 1 : 0;
  const program = words[start];
  if (program === undefined || !/(^|\/)kubeadm$/.test(program) || words[start + 1] !== "join") return undefined;
  return words.slice(start + 2);
}

/** Flags as kubeadm reads them: `--name value` or `--name=value`; a flag may repeat. */
function parseFlags(args: string[]): { positional: string[]; flags: Map<string, string[]> } {
  const positional: string[] = [];
  const flags = new Map<string, string[]>();
  const booleanFlags = new Set(["discovery-token-unsafe-skip-ca-verification", "control-plane", "dry-run"]);
  for (let index = 0; index < args.length; index += 1) {
    const arg = args[index] ?? "";
    if (!arg.startsWith("--")) {
      positional.push(arg);
      continue;
    }
    const [name = "", inline] = arg.slice(2).split(/=(.*)/s, 2);
    let value = inline;
    if (value === undefined) {
      if (booleanFlags.has(name)) value = "true";
      else {
        value = args[index + 1] ?? "";
        index += 1;
      }
    }
    flags.set(name, [...(flags.get(name) ?? []), value]);
  }
  return { positional, flags };
}

function joinFromConfiguration(text: string, configPath: string): KubeadmJoin {
  let documents: unknown[];
  try {
    documents = parseAllDocuments(text).map((document) => {
      if (document.errors.length > 0) throw document.errors[0];
      return document.toJSON() as unknown;
    });
  } catch (error) {
    throw new KubeadmJoinError("InvalidJoinConfiguration", `${configPath} is not YAML`, { cause: error });
  }
  const candidates = documents.map((document) => JoinConfiguration.safeParse(document));
  const parsed = candidates.find((candidate) => candidate.success)?.data;
  if (parsed === undefined) {
    throw new KubeadmJoinError("InvalidJoinConfiguration", `${configPath} holds no JoinConfiguration`);
  }
  if (!JOIN_CONFIGURATION_VERSIONS.includes(parsed.apiVersion)) {
    throw new KubeadmJoinError(
      "InvalidJoinConfiguration",
      `${configPath}: JoinConfiguration ${parsed.apiVersion} (kubeadm reads ${JOIN_CONFIGURATION_VERSIONS.join(", ")})`,
    );
  }
  const discovery = parsed.discovery.bootstrapToken;
  if (discovery === undefined) {
    const what = parsed.discovery.file === undefined ? "no discovery" : "file discovery (not emulated)";
    throw new KubeadmJoinError("InvalidJoinConfiguration", `${configPath}: ${what}; token discovery is checked`);
  }
  const discoveryToken = bootstrapToken(discovery.token ?? "", "discovery.bootstrapToken.token");
  return {
    apiServerEndpoint: discovery.apiServerEndpoint ?? "",
    discoveryToken,
    tlsBootstrapToken: parsed.discovery.tlsBootstrapToken
      ? bootstrapToken(parsed.discovery.tlsBootstrapToken, "discovery.tlsBootstrapToken")
      : discoveryToken,
    caCertHashes: discovery.caCertHashes ?? [],
    unsafeSkipCAVerification: discovery.unsafeSkipCAVerification === true,
    nodeName: parsed.nodeRegistration?.name,
    source: parsed.apiVersion,
  };
}

function joinFromFlags(positional: string[], flags: Map<string, string[]>): KubeadmJoin {
  const last = (name: string): string | undefined => flags.get(name)?.at(-1);
  const token = last("token");
  const discoveryText = last("discovery-token") ?? token;
  if (discoveryText === undefined) {
    throw new KubeadmJoinError(
      "InvalidJoinConfiguration",
      "kubeadm join without --config, --token or --discovery-token",
    );
  }
  const discoveryToken = bootstrapToken(discoveryText, "--discovery-token");
  const tlsText = last("tls-bootstrap-token") ?? token;
  return {
    apiServerEndpoint: positional[0] ?? "",
    discoveryToken,
    tlsBootstrapToken: tlsText === undefined ? discoveryToken : bootstrapToken(tlsText, "--tls-bootstrap-token"),
    caCertHashes: flags.get("discovery-token-ca-cert-hash") ?? [],
    unsafeSkipCAVerification: last("discovery-token-unsafe-skip-ca-verification") === "true",
    nodeName: last("node-name"),
    source: "flags",
  };
}

/** kubeadm's own validation of a join's discovery settings (before it dials anything). */
function validateJoin(join: KubeadmJoin): KubeadmJoin {
  if (!/^[^\s/]+:\d+$/.test(join.apiServerEndpoint)) {
    throw new KubeadmJoinError(
      "InvalidJoinConfiguration",
      `API server endpoint "${join.apiServerEndpoint}" is not host:port`,
    );
  }
  for (const hash of join.caCertHashes) {
    if (!CA_HASH_PATTERN.test(hash)) {
      throw new KubeadmJoinError("InvalidJoinConfiguration", `CA certificate hash "${hash}" is not sha256:<64 hex>`);
    }
  }
  if (join.caCertHashes.length === 0 && !join.unsafeSkipCAVerification) {
    throw new KubeadmJoinError(
      "InvalidJoinConfiguration",
      "token discovery without caCertHashes needs unsafeSkipCAVerification (kubeadm refuses it otherwise)",
    );
  }
  return join;
}

/** The first YAML document of `text` checked against `schema`; a YAML error (or an alias bomb) is a failure too. */
function yamlValue<T>(
  text: string,
  schema: z.ZodType<T>,
): { success: true; data: T } | { success: false; error: unknown } {
  const [document] = parseAllDocuments(text);
  if (document === undefined || document.errors.length > 0) return { success: false, error: document?.errors[0] };
  let value: unknown;
  try {
    value = document.toJSON(); // throws on too many aliases
  } catch (error) {
    return { success: false, error };
  }
  const checked = schema.safeParse(value);
  return checked.success ? { success: true, data: checked.data } : { success: false, error: checked.error };
}

/** Reads the `kubeadm join` out of a cloud-config; throws KubeadmJoinError (never anything else) when it cannot. */
export function parseKubeadmJoin(cloudConfig: string): KubeadmJoin {
  const header = cloudConfig.split("\n", 3).map((line) => line.trim());
  if (!header.includes("#cloud-config")) {
    throw new KubeadmJoinError("NotCloudConfig", "the bootstrap data has no #cloud-config line at its start");
  }
  const parsed = yamlValue(cloudConfig, CloudConfig);
  if (!parsed.success) {
    throw new KubeadmJoinError("NotCloudConfig", "the cloud-config is not a YAML map of cloud-init keys", {
      cause: parsed.error,
    });
  }
  const files = new Map<string, z.infer<typeof WriteFile>>();
  for (const entry of parsed.data.write_files ?? []) {
    const file = WriteFile.safeParse(entry);
    if (file.success) files.set(file.data.path, file.data);
  }
  for (const command of parsed.data.runcmd ?? []) {
    const lines = Array.isArray(command) ? [command] : simpleCommands(command);
    for (const words of lines) {
      const args = kubeadmJoinArguments(words);
      if (args === undefined) continue;
      const { positional, flags } = parseFlags(args);
      const configPath = flags.get("config")?.at(-1);
      if (configPath === undefined) return validateJoin(joinFromFlags(positional, flags));
      const file = files.get(configPath);
      if (file === undefined) {
        throw new KubeadmJoinError("InvalidJoinConfiguration", `kubeadm join --config ${configPath}: no such file`);
      }
      return validateJoin(joinFromConfiguration(decodeContent(file), configPath));
    }
  }
  throw new KubeadmJoinError("NoKubeadmJoin", "no `kubeadm join` among the cloud-config's runcmd commands");
}

/** `sha256:<hex>` of a certificate's SubjectPublicKeyInfo: the pin kubeadm compares `caCertHashes` with. */
export function caCertHash(certificatePem: string): string {
  const spki = new X509Certificate(certificatePem).publicKey.export({ type: "spki", format: "der" });
  return `sha256:${createHash("sha256").update(spki).digest("hex")}`;
}

/** Every certificate of a PEM bundle. */
function certificates(pem: string): string[] {
  return pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}

function base64Url(data: string): string {
  return Buffer.from(data).toString("base64url");
}

/** The detached JWS (HS256, kid = token id) the bootstrap signer writes, checked as kubeadm checks it. */
function detachedSignatureValid(detached: string, content: string, token: BootstrapToken): boolean {
  const [protectedHeader = "", payload, signature = ""] = detached.split(".");
  if (payload !== "") return false;
  let header: unknown;
  try {
    header = JSON.parse(Buffer.from(protectedHeader, "base64url").toString("utf8"));
  } catch {
    return false;
  }
  const fields = z.object({ alg: z.literal("HS256"), kid: z.string() }).safeParse(header);
  if (!fields.success || fields.data.kid !== token.id) return false;
  const expected = createHmac("sha256", token.secret)
    .update(`${protectedHeader}.${base64Url(content)}`)
    .digest();
  const given = Buffer.from(signature, "base64url");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

const ConfigMap = z.object({ data: z.record(z.string(), z.string()).optional() });
const ClusterInfoKubeconfig = z.object({
  clusters: z
    .array(
      z.object({
        cluster: z.object({ server: z.string().optional(), "certificate-authority-data": z.string().optional() }),
      }),
    )
    .min(1),
});
const SelfSubjectReview = z.object({
  status: z.object({ userInfo: z.object({ username: z.string(), groups: z.array(z.string()).optional() }) }),
});

const CLUSTER_INFO = "/api/v1/namespaces/kube-public/configmaps/cluster-info";

async function readClusterInfo(target: KubeTarget, timeoutMs: number): Promise<Record<string, string>> {
  let response: Awaited<ReturnType<typeof kubeRequest>>;
  try {
    response = await kubeRequest(target, { path: CLUSTER_INFO, timeoutMs });
  } catch (error) {
    throw new KubeadmJoinError("Unreachable", `${target.url}: ${(error as Error).message}`, { cause: error });
  }
  const configMap = ConfigMap.safeParse(response.json);
  if (response.status !== 200 || !configMap.success) {
    throw new KubeadmJoinError(
      "NotSetUpForTokenBootstrap",
      `${target.url}: the kube-public/cluster-info ConfigMap cannot be read anonymously (HTTP ${response.status})`,
    );
  }
  return configMap.data.data ?? {};
}

/**
 * Runs kubeadm's token discovery and the kubelet's bootstrap authentication for `join` against its API server.
 * `knownEndpoints` (host:port) are the clusters a node may join: any other endpoint is refused before a
 * request is made. Resolves when the join would succeed; throws KubeadmJoinError saying why it would not.
 */
export async function verifyKubeadmJoin(
  join: KubeadmJoin,
  options: { knownEndpoints: string[]; timeoutMs?: number },
): Promise<VerifiedJoin> {
  const timeoutMs = options.timeoutMs ?? 5000;
  if (!options.knownEndpoints.includes(join.apiServerEndpoint)) {
    throw new KubeadmJoinError(
      "UnknownEndpoint",
      `API server endpoint ${join.apiServerEndpoint} is not a known cluster's (${options.knownEndpoints.join(", ")})`,
    );
  }
  const serverUrl = `https://${join.apiServerEndpoint}`;
  const insecure = await readClusterInfo({ url: serverUrl, insecureSkipTlsVerify: true }, timeoutMs);
  const kubeconfigText = insecure.kubeconfig;
  if (kubeconfigText === undefined || kubeconfigText === "") {
    throw new KubeadmJoinError("NotSetUpForTokenBootstrap", `${serverUrl}: cluster-info has no kubeconfig`);
  }
  const token = join.discoveryToken;
  const signature = insecure[`jws-kubeconfig-${token.id}`];
  if (signature === undefined || signature === "") {
    throw new KubeadmJoinError(
      "TokenInvalidOrExpired",
      `token id "${token.id}" is invalid for this cluster or it has expired (no signature in cluster-info)`,
    );
  }
  if (!detachedSignatureValid(signature, kubeconfigText, token)) {
    throw new KubeadmJoinError("SignatureMismatch", `the token's secret does not verify cluster-info's signature`);
  }
  const parsed = yamlValue(kubeconfigText, ClusterInfoKubeconfig);
  if (!parsed.success) {
    throw new KubeadmJoinError("NotSetUpForTokenBootstrap", `${serverUrl}: malformed kubeconfig in cluster-info`, {
      cause: parsed.error,
    });
  }
  const caData = parsed.data.clusters[0]?.cluster["certificate-authority-data"] ?? "";
  const caPem = Buffer.from(caData, "base64").toString("utf8");
  let hashes: string[];
  try {
    hashes = certificates(caPem).map(caCertHash);
  } catch (error) {
    throw new KubeadmJoinError("NotSetUpForTokenBootstrap", `${serverUrl}: cluster-info's CA does not parse`, {
      cause: error,
    });
  }
  if (hashes.length === 0) {
    throw new KubeadmJoinError("NotSetUpForTokenBootstrap", `${serverUrl}: cluster-info's kubeconfig has no CA`);
  }
  if (join.caCertHashes.length > 0 && !hashes.some((hash) => join.caCertHashes.includes(hash))) {
    throw new KubeadmJoinError(
      "CAHashMismatch",
      `the cluster CA (${hashes.join(", ")}) matches none of the pinned hashes (${join.caCertHashes.join(", ")})`,
    );
  }
  // Again over TLS that trusts the CA just pinned: the same kubeconfig, or an impostor answered the first time.
  const secure = await readClusterInfo({ url: serverUrl, ca: caPem }, timeoutMs);
  if (secure.kubeconfig !== kubeconfigText) {
    throw new KubeadmJoinError(
      "SignatureMismatch",
      "cluster-info read over validated TLS differs from the one read before the CA was trusted",
    );
  }
  const tls = join.tlsBootstrapToken;
  let review: Awaited<ReturnType<typeof kubeRequest>>;
  try {
    review = await kubeRequest(
      { url: serverUrl, ca: caPem, token: `${tls.id}.${tls.secret}` },
      {
        method: "POST",
        path: "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
        timeoutMs,
      },
    );
  } catch (error) {
    throw new KubeadmJoinError("Unreachable", `${serverUrl}: ${(error as Error).message}`, { cause: error });
  }
  const identity = SelfSubjectReview.safeParse(review.json);
  if (review.status !== 201 || !identity.success) {
    throw new KubeadmJoinError(
      "TokenRejected",
      `${serverUrl} refused token id "${tls.id}" as credentials (HTTP ${review.status})`,
    );
  }
  const { username, groups = [] } = identity.data.status.userInfo;
  if (username !== `system:bootstrap:${tls.id}` || !groups.includes("system:bootstrappers")) {
    throw new KubeadmJoinError(
      "TokenRejected",
      `token id "${tls.id}" authenticates as ${username}, not a bootstrapper`,
    );
  }
  return { serverUrl, caPem, username, groups };
}

export type JoinCheck =
  | { ok: true; join: KubeadmJoin; verified: VerifiedJoin }
  | { ok: false; reason: JoinRefusal; message: string };

/** parseKubeadmJoin then verifyKubeadmJoin, as one answer that never throws for a refused join. */
export async function checkKubeadmJoin(
  cloudConfig: string,
  options: { knownEndpoints: string[]; timeoutMs?: number },
): Promise<JoinCheck> {
  try {
    const join = parseKubeadmJoin(cloudConfig);
    return { ok: true, join, verified: await verifyKubeadmJoin(join, options) };
  } catch (error) {
    if (!(error instanceof KubeadmJoinError)) throw error;
    return { ok: false, reason: error.reason, message: error.message };
  }
}
