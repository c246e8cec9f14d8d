// What the parts of the playground agree on: where the repository is (the operator's entry point, the CRDs), and the
// credentials Secret the examples rely on.
import path from "node:path";

export const REPO_ROOT = path.resolve(import.meta.dirname, "../../..");
export const CREDENTIALS_NAMESPACE = "default";
export const CREDENTIALS_SECRET = "gpucloud-credentials";
