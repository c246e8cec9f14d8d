// A node's `kubeadm join`, checked as kubeadm checks it before a kubelet may register: the join read from a
// cloud-config (kubeadm-join-config.ts), then token discovery and the bootstrap token's authentication against the
// API server it names (kubeadm-token-discovery.ts). Plain HTTPS and YAML, no Kubernetes client library: the
// entry the simulator's node-join emulation imports.
import { type JoinRefusal, type KubeadmJoin, KubeadmJoinError, parseKubeadmJoin } from "./kubeadm-join-config.ts";
import { type VerifiedJoin, verifyKubeadmJoin } from "./kubeadm-token-discovery.ts";

export {
  type BootstrapToken,
  type JoinRefusal,
  type KubeadmJoin,
  KubeadmJoinError,
  parseKubeadmJoin,
} from "./kubeadm-join-config.ts";
export { caCertHash, type VerifiedJoin, verifyKubeadmJoin } from "./kubeadm-token-discovery.ts";

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
