import { execFile } from "node:child_process";
// Shared setup for the Kubernetes API test double's tests.
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { KubeConfig } from "@kubernetes/client-node";
import { type KubeDoubleOptions, type RunningKubeDouble, startKubeDouble } from "../../src/kube-double/index.ts";

export const FIXTURE_CRD_DIR = fileURLToPath(new URL("./fixtures", import.meta.url));
export const GROUP = "example.dev";
export const VERSION = "v1";
export const PLURAL = "widgets";

export async function startWithFixture(
  options: KubeDoubleOptions = {},
): Promise<{ double: RunningKubeDouble; kubeConfig: KubeConfig }> {
  const double = await startKubeDouble({ crdDir: FIXTURE_CRD_DIR, ...options });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromString(double.kubeconfigYaml());
  return { double, kubeConfig };
}

export function widget(
  name: string,
  spec: Record<string, unknown> = { size: 1, color: "red" },
  extra: Record<string, unknown> = {},
) {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: "Widget",
    metadata: { name, namespace: "default", ...extra },
    spec,
  };
}

/** Parse a client-node ApiException body (the raw Status JSON) for assertions. */
export function statusOf(error: unknown): {
  code?: number;
  reason?: string;
  message?: string;
  details?: { causes?: { field?: string; message?: string }[] };
} {
  if (typeof error === "object" && error !== null && "body" in error) {
    const body = (error as { body: unknown }).body;
    return typeof body === "string" ? JSON.parse(body) : (body as ReturnType<typeof statusOf>);
  }
  throw new Error(`not an API exception: ${String(error)}`, { cause: error });
}

export async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the call to fail");
}

export async function waitFor(check: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Runs kubectl from PATH against the kubeconfig at `kubeconfigPath`; resolves with stdout. */
export function kubectlWith(kubeconfigPath: string): (...args: string[]) => Promise<string> {
  const run = promisify(execFile);
  return async (...args) => {
    const { stdout } = await run("kubectl", args, {
      env: { ...process.env, KUBECONFIG: kubeconfigPath },
      timeout: 20_000,
    });
    return stdout;
  };
}
