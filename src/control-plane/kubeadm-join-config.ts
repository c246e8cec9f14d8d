// A node's `kubeadm join` as a cloud-config asks for it (the bootstrap data Cluster API's kubeadm bootstrap
// provider writes): the command found among `runcmd` (shell lines split as a shell would), its flags or its
// `--config` file from `write_files` (plain, base64 or gzip), read as kubeadm reads a JoinConfiguration and checked
// as kubeadm checks the discovery settings before it dials anything. Also what a join is, and why one is refused
// (KubeadmJoinError), for the token discovery that checks it next (kubeadm-token-discovery.ts).
import { gunzipSync } from "node:zlib";
import { parseAllDocuments } from "yaml";
import { z } from "zod";

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
export function yamlValue<T>(
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
