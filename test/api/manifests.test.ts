import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crdOf } from "../../src/api/crd.ts";
import { KINDS } from "../../src/api/kinds.ts";
import { createManifestValidator, ManifestParseError, parseManifests } from "../../src/api/validate.ts";
import { main as generate } from "../../src/cli/commands/generate.ts";

const ROOT = join(import.meta.dirname, "../..");
const validator = createManifestValidator();

async function yamlFiles(directory: string): Promise<string[]> {
  return (await readdir(directory)).filter((name) => /\.ya?ml$/.test(name)).sort();
}

async function load(path: string) {
  return parseManifests(await readFile(path, "utf8"), path);
}

describe("examples/", () => {
  it("holds the expected set, all in namespace default, and no Secret", async () => {
    const objects = [];
    for (const file of await yamlFiles(join(ROOT, "examples")))
      objects.push(...(await load(join(ROOT, "examples", file))));
    const summary = objects.map(({ object }) => {
      const { kind, metadata } = object as { kind: string; metadata: { name: string; namespace: string } };
      return `${kind}/${metadata.namespace}/${metadata.name}`;
    });
    expect(summary.sort()).toEqual([
      "GpuDisk/default/datasets",
      "GpuFirewallRule/default/allow-ssh",
      "GpuNetwork/default/training-net",
      "GpuVm/default/trainer",
      "GpuVmPool/default/workers",
    ]);
  });

  it("every example is valid against the generated schemas and the zod rules", async () => {
    const files = await yamlFiles(join(ROOT, "examples"));
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) {
      for (const { object } of await load(join(ROOT, "examples", file))) {
        const result = validator.check(object);
        expect(result.kind, file).toBeDefined();
        expect(result.problems, file).toEqual([]);
      }
    }
  });

  it("examples/cluster-api/ holds the playground cluster's GPU workers: a MachineDeployment and its two templates", async () => {
    const directory = join(ROOT, "examples/cluster-api");
    const objects = [];
    for (const file of await yamlFiles(directory)) objects.push(...(await load(join(directory, file))));
    const kinds = objects.map(({ object }) => (object as { kind: string }).kind);
    expect(kinds).toEqual(["GpuMachineTemplate", "KubeadmConfigTemplate", "MachineDeployment"]);
    const [template] = objects;
    expect(validator.check(template?.object)).toEqual({ kind: "GpuMachineTemplate", problems: [] });
    expect(objects[2]?.object).toMatchObject({ spec: { clusterName: "playground", replicas: 3 } });
  });

  it("the trainer is an 8-GPU a100-80gb in us-east1-a first, mounting the datasets disk", async () => {
    const [vm] = await load(join(ROOT, "examples/04-gpu-vm.yaml"));
    expect(vm?.object).toMatchObject({
      spec: {
        type: "a100-80gb.8x",
        locations: ["us-east1-a", "us-southcentral1-a"],
        disks: [{ diskRef: { name: "datasets" } }],
      },
    });
  });
});

describe("test/fixtures/invalid/", () => {
  const directory = join(ROOT, "test/fixtures/invalid");

  it("has fixtures for every case the issue names", async () => {
    const files = await yamlFiles(directory);
    for (const name of [
      "disk-bad-size",
      "vm-unknown-type",
      "network-bad-cidr",
      "vm-disk-ref-and-id",
      "vm-location-and-locations",
    ]) {
      expect(files).toContain(`${name}.yaml`);
    }
  });

  it("every fixture is refused by the offline check too, and the zod mirror says what the CRD rules say", async () => {
    // The `# expect:` lines are the API server's errors (test/kube-double/project-crds.test.ts checks them against
    // the double). Offline, each fixture must be refused, and an error in words from a CEL rule must be said by
    // the zod mirror as well (kubectl's wording around it aside).
    const crdRuleMessages = new Set<string>();
    for (const info of KINDS) {
      JSON.stringify(crdOf(info), (key, value: unknown) => {
        if (key === "message" && typeof value === "string") crdRuleMessages.add(value);
        return value;
      });
    }
    for (const file of await yamlFiles(directory)) {
      const text = await readFile(join(directory, file), "utf8");
      const expected = [...text.matchAll(/^# expect: (.+)$/gm)].map((match) => match[1] ?? "");
      expect(expected, `${file} needs '# expect:' lines`).not.toEqual([]);
      const [manifest] = parseManifests(text, file);
      const { problems } = validator.check(manifest?.object);
      expect(problems, `${file} passed the offline check`).not.toEqual([]);
      for (const line of expected) {
        const detail = /Invalid value: (?:"[^"]*": )?(.+)$/.exec(line)?.[1];
        if (detail === undefined || !(crdRuleMessages.has(detail) || detail.startsWith("host bits are set"))) continue;
        expect(
          problems.some((problem) => problem.endsWith(detail)),
          `${file}: the zod mirror does not say '${detail}': ${problems.join("; ")}`,
        ).toBe(true);
      }
    }
  });

  it("reports unknown fields by name and ignores objects of other groups", () => {
    const result = validator.check({
      apiVersion: "gpucloud.dev/v1alpha1",
      kind: "GpuNetwork",
      metadata: { name: "n", namespace: "default" },
      spec: { cidr: "10.0.0.0/16", subnetCount: 2 },
    });
    expect(result.problems).toContain("schema: /spec must NOT have additional properties 'subnetCount'");
    expect(validator.check({ apiVersion: "v1", kind: "Secret", metadata: { name: "s" } })).toEqual({
      kind: undefined,
      problems: [],
    });
    expect(validator.check({ apiVersion: "gpucloud.dev/v1alpha1", kind: "GpuThing" }).problems).toEqual([
      "kind GpuThing is not served by gpucloud.dev/v1alpha1",
    ]);
  });

  it("a YAML syntax error names the file", () => {
    expect(() => parseManifests("a: [1,\n", "broken.yaml")).toThrow(ManifestParseError);
    expect(() => parseManifests("a: [1,\n", "broken.yaml")).toThrow(/broken\.yaml/);
  });
});

describe("generate command", () => {
  let root = "";
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "gpuvm-generate-"));
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("--check fails on a fresh tree, generate writes, then --check passes; an edit or a leftover makes it stale", async () => {
    const quiet = { stdout: process.stdout.write, stderr: process.stderr.write };
    const captured: string[] = [];
    const capture = (chunk: string | Uint8Array) => {
      captured.push(String(chunk));
      return true;
    };
    process.stdout.write = capture as typeof process.stdout.write;
    process.stderr.write = capture as typeof process.stderr.write;
    try {
      expect(await generate(["--check", "--root", root])).toBe(1);
      expect(await generate(["--root", root])).toBe(0);
      expect((await readdir(join(root, "crds"))).sort()).toEqual([
        "gpucloud.dev_gpubudgets.yaml",
        "gpucloud.dev_gpucloudclaims.yaml",
        "gpucloud.dev_gpudisks.yaml",
        "gpucloud.dev_gpufirewallrules.yaml",
        "gpucloud.dev_gpunetworks.yaml",
        "gpucloud.dev_gpuvmpools.yaml",
        "gpucloud.dev_gpuvms.yaml",
        "infrastructure.cluster.x-k8s.io_gpuclusters.yaml",
        "infrastructure.cluster.x-k8s.io_gpumachines.yaml",
        "infrastructure.cluster.x-k8s.io_gpumachinetemplates.yaml",
      ]);
      expect(await generate(["--check", "--root", root])).toBe(0);

      await writeFile(join(root, "docs/crd-reference.md"), "edited by hand\n");
      await writeFile(join(root, "crds/gpucloud.dev_gpuoldthings.yaml"), "kind: CustomResourceDefinition\n");
      // A leftover of the second group counts too; a file of another project's group is left alone.
      await writeFile(
        join(root, "deploy/crds/infrastructure.cluster.x-k8s.io_gpuoldmachines.yaml"),
        "kind: CustomResourceDefinition\n",
      );
      await writeFile(join(root, "crds/example.com_widgets.yaml"), "kind: CustomResourceDefinition\n");
      captured.length = 0;
      expect(await generate(["--check", "--root", root])).toBe(1);
      expect(captured.join("")).toContain("docs/crd-reference.md (out of date)");
      expect(captured.join("")).toContain("crds/gpucloud.dev_gpuoldthings.yaml (not generated any more)");
      expect(captured.join("")).toContain(
        "deploy/crds/infrastructure.cluster.x-k8s.io_gpuoldmachines.yaml (not generated any more)",
      );
      expect(captured.join("")).not.toContain("example.com_widgets");

      expect(await generate(["--root", root])).toBe(0);
      expect(await generate(["--check", "--root", root])).toBe(0);
      expect(await generate(["--bogus"])).toBe(2);
    } finally {
      process.stdout.write = quiet.stdout;
      process.stderr.write = quiet.stderr;
    }
  });
});

describe(".ci/check-manifests.ts", () => {
  it("passes on this tree and prints one line per area", async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [join(ROOT, ".ci/check-manifests.ts")], {
      cwd: ROOT,
    });
    expect(stdout).toMatch(/^ok {3}crds: 10 checked$/m);
    expect(stdout).toMatch(/^ok {3}examples: 6 checked$/m);
    expect(stdout).toMatch(/^ok {3}invalid fixtures: \d+ checked$/m);
    expect(stdout).toContain("manifests: all checks passed");
  });
});
