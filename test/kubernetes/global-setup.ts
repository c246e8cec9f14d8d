// One real control plane for the whole test run (the `kubernetes` vitest project): builds the binaries (those
// of Cluster API too, which cluster-api.test.ts starts on control planes of its own) when the cache lacks them,
// starts etcd + kube-apiserver + kube-controller-manager with the CRDs of crds/, and
// hands the admin's credentials to the tests through `inject("kube")`. Stopped and removed at the end of the
// run, whatever the tests did.
import { writeFile } from "node:fs/promises";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { ensureCapiBinaries, ensureKubeBinaries, REPO_ROOT } from "../../src/control-plane/binaries.ts";
import { startControlPlane } from "../../src/control-plane/control-plane.ts";
import type { SharedKube } from "./shared.ts";

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const log = (line: string): void => console.log(line);
  const built = await ensureKubeBinaries({ log });
  await ensureCapiBinaries({ kube: built, log });
  const plane = await startControlPlane({
    bin: built.bin,
    crdDirs: [path.join(REPO_ROOT, "crds")],
    log: (line) => log(`kubernetes: ${line}`),
  });
  const kubeconfigPath = path.join(plane.dataDir, "admin.kubeconfig");
  await writeFile(kubeconfigPath, plane.kubeconfigYaml(), { mode: 0o600 });
  const { kubernetes, etcd, go } = built.versions;
  log(
    `kubernetes: real control plane (Kubernetes ${kubernetes}, etcd ${etcd}, ${go}) started in ${plane.startupSeconds} s at ${plane.url}`,
  );
  const shared: SharedKube = {
    url: plane.url,
    ca: plane.admin.ca ?? "",
    cert: plane.admin.cert ?? "",
    key: plane.admin.key ?? "",
    etcdUrl: plane.etcdUrl,
    kubeconfigPath,
    binDir: built.binDir,
    versions: built.versions,
    startupSeconds: plane.startupSeconds,
    dataDir: plane.dataDir,
  };
  project.provide("kube", shared);
  return async () => {
    await plane.close();
  };
}
