// What the `kubernetes` project's global setup hands to its tests, and helpers built on it.
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { inject } from "vitest";
import type { KubeBinary, KubeVersions } from "../../src/control-plane/binaries.ts";
import { type KubeTarget, kubeExpect, kubeRequest } from "../../src/control-plane/http.ts";

export interface SharedKube {
  url: string;
  ca: string;
  cert: string;
  key: string;
  etcdUrl: string;
  /** A kubeconfig file for the admin (client certificate, system:masters). */
  kubeconfigPath: string;
  binDir: string;
  versions: KubeVersions;
  startupSeconds: number;
  dataDir: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    kube: SharedKube;
  }
}

const run = promisify(execFile);

export function sharedKube(): SharedKube {
  return inject("kube");
}

export function adminTarget(): KubeTarget {
  const kube = sharedKube();
  return { url: kube.url, ca: kube.ca, cert: kube.cert, key: kube.key };
}

export function kubeBin(name: KubeBinary): string {
  return path.join(sharedKube().binDir, name);
}

/** kubectl of the control plane's release, as the admin; resolves with stdout, rejects with stderr. */
export async function kubectl(...args: string[]): Promise<string> {
  try {
    const { stdout } = await run(kubeBin("kubectl"), args, {
      env: { ...process.env, KUBECONFIG: sharedKube().kubeconfigPath },
      timeout: 120_000,
    });
    return stdout;
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? "";
    throw new Error(`kubectl ${args.join(" ")} failed: ${stderr}`, { cause: error });
  }
}

let namespaceCounter = 0;

/** A fresh namespace on the real control plane; tests share the control plane, never a namespace. */
export async function createNamespace(prefix: string): Promise<string> {
  namespaceCounter += 1;
  const name = `${prefix}-${process.pid}-${namespaceCounter}`;
  await kubeExpect(
    adminTarget(),
    { method: "POST", path: "/api/v1/namespaces", body: { apiVersion: "v1", kind: "Namespace", metadata: { name } } },
    [201],
  );
  return name;
}

/** Deletes the namespace (kube-controller-manager empties it); does not wait. */
export async function deleteNamespace(name: string): Promise<void> {
  await kubeRequest(adminTarget(), { method: "DELETE", path: `/api/v1/namespaces/${name}` });
}
