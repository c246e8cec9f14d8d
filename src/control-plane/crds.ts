// CustomResourceDefinitions installed on a real API server: read from folders of YAML, created (or brought up
// to date when kept from an earlier run) and waited for until every served version answers a list.
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { parseAllDocuments } from "yaml";
import { isRecord } from "../util/is-record.ts";
import { type KubeTarget, kubeExpect, kubeRequest } from "./http.ts";
import { ControlPlaneError } from "./processes.ts";

/** Every CustomResourceDefinition of the YAML files (`*.yaml`, `*.yml`) of these folders. */
export async function readCrds(directories: string[]): Promise<Record<string, unknown>[]> {
  const crds: Record<string, unknown>[] = [];
  for (const directory of directories) {
    for (const file of (await readdir(directory)).filter((name) => /\.ya?ml$/.test(name)).sort()) {
      for (const document of parseAllDocuments(await readFile(path.join(directory, file), "utf8"))) {
        const value: unknown = document.toJSON();
        if (isRecord(value) && value.kind === "CustomResourceDefinition") crds.push(value);
      }
    }
  }
  return crds;
}

function crdName(crd: Record<string, unknown>): string {
  const metadata = crd.metadata;
  return isRecord(metadata) && typeof metadata.name === "string" ? metadata.name : "";
}

function isEstablished(crd: unknown): boolean {
  if (!isRecord(crd) || !isRecord(crd.status) || !Array.isArray(crd.status.conditions)) return false;
  return crd.status.conditions.some(
    (condition) => isRecord(condition) && condition.type === "Established" && condition.status === "True",
  );
}

/**
 * Creates (or updates) the CRDs and waits until the API server serves each of them: a list of every served
 * version answers, or (`readyVersions: "storage"`) of the storage version only, for CRDs whose other versions
 * need a conversion webhook that is not up yet.
 */
export async function installCrds(
  target: KubeTarget,
  crds: Record<string, unknown>[],
  timeoutMs = 60_000,
  readyVersions: "served" | "storage" = "served",
): Promise<void> {
  const base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  for (const crd of crds) {
    const created = await kubeRequest(target, { method: "POST", path: base, body: crd });
    if (created.status === 409) {
      // Kept from an earlier run (the playground's state): bring it up to the current definition.
      await kubeExpect(
        target,
        {
          method: "PATCH",
          path: `${base}/${crdName(crd)}?fieldManager=gpuvm-test&force=true`,
          body: JSON.stringify(crd),
          contentType: "application/apply-patch+yaml",
        },
        [200],
      );
    } else if (created.status !== 201) {
      throw new ControlPlaneError(
        `installing CRD ${crdName(crd)}: HTTP ${created.status} ${created.text.slice(0, 800)}`,
      );
    }
  }
  const deadline = Date.now() + timeoutMs;
  const waitFor = async (what: string, ready: () => Promise<boolean>): Promise<void> => {
    while (!(await ready())) {
      if (Date.now() > deadline) throw new ControlPlaneError(`${what}: not ready within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  for (const crd of crds) {
    await waitFor(`CRD ${crdName(crd)} Established`, async () => {
      const current = await kubeRequest(target, { path: `${base}/${crdName(crd)}` });
      return current.status === 200 && isEstablished(current.json);
    });
    // Established is not serving: after a restart the resource's storage answers 429 "storage is (re)initializing"
    // for a moment. Ready means a list of every served version answers.
    for (const path of servedListPaths(crd, readyVersions)) {
      await waitFor(`GET ${path}`, async () => (await kubeRequest(target, { path })).status === 200);
    }
  }
}

function servedListPaths(crd: Record<string, unknown>, readyVersions: "served" | "storage"): string[] {
  const spec = isRecord(crd.spec) ? crd.spec : {};
  const plural = isRecord(spec.names) ? spec.names.plural : undefined;
  const versions = Array.isArray(spec.versions) ? spec.versions.filter(isRecord) : [];
  return versions
    .filter((version) => version.served === true && typeof version.name === "string")
    .filter((version) => readyVersions === "served" || version.storage === true)
    .map((version) => `/apis/${String(spec.group)}/${String(version.name)}/${String(plural)}?limit=1`);
}
