// kubeadm's token discovery and the kubelet's TLS bootstrap, run for a join against the API server it names
// (cmd/kubeadm/app/discovery/token): the kube-public/cluster-info ConfigMap read without trusting the server, its
// JWS signature for the token's id checked with the token's secret, the CA in it checked against the pinned
// `sha256:` hashes, the ConfigMap read again over TLS trusting that CA, and the token presented to the API server
// as the kubelet's bootstrap credentials. Plain HTTPS, no Kubernetes client library.
import { createHash, createHmac, timingSafeEqual, X509Certificate } from "node:crypto";
import { z } from "zod";
import { type KubeTarget, kubeRequest } from "./http.ts";
import { type BootstrapToken, type KubeadmJoin, KubeadmJoinError, yamlValue } from "./kubeadm-join-config.ts";

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
