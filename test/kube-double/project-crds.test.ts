import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { isSupportedRule } from "../../src/kube-double/cel.ts";
import { type RunningKubeDouble, startKubeDouble } from "../../src/kube-double/index.ts";
import { rulesOf } from "../../src/kube-double/resources.ts";
import { errorsOf, invalidFixtures } from "../fixtures/invalid-fixtures.ts";
import { kubectlWith } from "./helpers.ts";

const CRD_DIR = fileURLToPath(new URL("../../crds", import.meta.url));
const EXAMPLES_DIR = fileURLToPath(new URL("../../examples", import.meta.url));
let double: RunningKubeDouble;
let directory: string;

const kubectl = (...args: string[]): Promise<string> => kubectlWith(join(directory, "kubeconfig"))(...args);

beforeAll(async () => {
  double = await startKubeDouble({ crdDir: CRD_DIR });
  directory = await mkdtemp(join(tmpdir(), "kube-double-crds-"));
  await double.writeKubeconfig(join(directory, "kubeconfig"));
});
afterAll(async () => {
  await double.close();
  await rm(directory, { recursive: true, force: true });
});

describe("crds/ in the double", () => {
  it("serves every generated CRD with its names", async () => {
    const files = (await readdir(CRD_DIR)).filter((file) => file.endsWith(".yaml"));
    expect(files.length).toBeGreaterThan(0);
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromString(double.kubeconfigYaml());
    for (const file of files) {
      const [document] = parseAllDocuments(await readFile(`${CRD_DIR}/${file}`, "utf8"));
      const crd = document?.toJSON() as {
        spec: { group: string; names: { plural: string }; versions: { name: string }[] };
      };
      const version = crd.spec.versions[0]?.name ?? "";
      const response = await fetch(`${double.url}/apis/${crd.spec.group}/${version}`);
      const list = (await response.json()) as { resources: { name: string }[] };
      expect(list.resources.map((resource) => resource.name)).toContain(crd.spec.names.plural);
    }
  });

  it("understands every CEL rule the CRDs use", async () => {
    const rules: string[] = [];
    for (const file of (await readdir(CRD_DIR)).filter((name) => name.endsWith(".yaml"))) {
      for (const document of parseAllDocuments(await readFile(`${CRD_DIR}/${file}`, "utf8")))
        rules.push(...rulesOf(document.toJSON()));
    }
    expect(rules.filter((rule) => !isSupportedRule(rule))).toEqual([]);
  });

  it("takes the examples with kubectl apply and lists them by short name and category", async () => {
    expect(await kubectl("apply", "-f", EXAMPLES_DIR)).toMatch(/gpuvm\.gpucloud\.dev\/\S+ created/);
    expect((await kubectl("get", "gvm")).split("\n")[0]).toMatch(/^NAME\s+TYPE\s+LOCATION\s+STATE/);
    const all = await kubectl("get", "gpucloud", "-o", "name");
    for (const kind of ["gpuvm", "gpudisk", "gpunetwork", "gpufirewallrule"])
      expect(all).toContain(`${kind}.gpucloud.dev/`);
  });

  it("kubectl explain says what the operator does (a type change restarts a running VM; the label a Secret needs)", async () => {
    const type = (await kubectl("explain", "gvm.spec.type")).replace(/\s+/g, " ");
    expect(type).toContain("a running VM is stopped, updated and started again automatically");
    const credentials = (await kubectl("explain", "gdisk.spec.credentialsRef")).replace(/\s+/g, " ");
    expect(credentials).toContain("must carry the label gpucloud.dev/watch=true");
    const state = (await kubectl("explain", "gvm.status.printableState")).replace(/\s+/g, " ");
    expect(state).toContain("without its STATE_ prefix");
  });

  it("an update with a malformed size gets one error, its format (not also growth or range)", async () => {
    const disks = `${double.url}/apis/gpucloud.dev/v1alpha1/namespaces/default/gpudisks`;
    const disk = {
      apiVersion: "gpucloud.dev/v1alpha1",
      kind: "GpuDisk",
      metadata: { name: "resized", namespace: "default" },
      spec: { size: "2TiB", location: "us-east1-a", type: "persistent-ssd" },
    };
    const created = await fetch(disks, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(disk),
    });
    expect(created.status).toBe(201);
    const resize = async (size: string): Promise<string[]> => {
      const response = await fetch(`${disks}/resized`, {
        method: "PATCH",
        headers: { "content-type": "application/merge-patch+json" },
        body: JSON.stringify({ spec: { size } }),
      });
      const status = (await response.json()) as { details?: { causes?: { field?: string; message: string }[] } };
      expect(response.status, size).toBe(422);
      return (status.details?.causes ?? []).map((cause) => `${cause.field}: ${cause.message}`);
    };
    // "20TB" is smaller-looking, larger and malformed at once: the format is the one mistake.
    expect(await resize("20TB")).toEqual([
      'spec.size: Invalid value: "20TB": must be a whole number followed by GiB or TiB, such as 512GiB or 1TiB',
    ]);
    // Well-formed values get the rules about their meaning, each alone.
    expect(await resize("1TiB")).toEqual(["spec.size: Invalid value: size can only grow"]);
    expect(await resize("20TiB")).toEqual(["spec.size: Invalid value: a persistent-ssd disk is at most 10TiB"]);
  });

  it("rejects every invalid fixture with exactly the errors its header lists, none of them a raw regular expression", async () => {
    // Each `# expect:` line is an error as kubectl prints it, recorded from kube-apiserver (v1.37) with `kubectl
    // create -f`: one error per mistake, in words (a CEL rule's message), never "should match '^…$'".
    const fixtures = await invalidFixtures();
    expect(fixtures.length).toBeGreaterThan(15);
    for (const { file, object, collectionPath, expected } of fixtures) {
      expect(expected, `${file} needs '# expect:' lines`).not.toEqual([]);
      const response = await fetch(`${double.url}${collectionPath(object.metadata.namespace)}?fieldValidation=Strict`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(object),
      });
      const status = (await response.json()) as { code: number; message: string };
      expect(status.code, file).toBeGreaterThanOrEqual(400);
      expect(errorsOf(status).sort(), file).toEqual([...expected].sort());
      expect(status.message, file).not.toMatch(/should match '/);
    }
  });
});
