// What the parts of the playground agree on: where the repository is (the operator's entry point, the CRDs), the
// credentials Secret the examples rely on, and the operator's own namespace (its claims: not the examples' namespace).
import path from "node:path";

export const REPO_ROOT = path.resolve(import.meta.dirname, "../../..");
export const CREDENTIALS_NAMESPACE = "default";
export const CREDENTIALS_SECRET = "gpucloud-credentials";
/** Where the operator keeps its GpuCloudClaims, as deploy/ installs it: a namespace the examples do not use. */
export const OPERATOR_NAMESPACE = "gpuvm-system";
