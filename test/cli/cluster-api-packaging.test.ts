// clusterctl's components of the provider, as `npm run generate` makes them from deploy/ and crds/ (the real
// clusterctl reads them in test/kubernetes/cluster-api-provider.test.ts).
import { readdir } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import {
  canonicalImage,
  clusterctlVariable,
  infrastructureComponents,
  PROVIDER_LABEL,
} from "../../src/cli/cluster-api-packaging.ts";
import { isRecord } from "../../src/util/is-record.ts";

const ROOT = path.resolve(import.meta.dirname, "../..");

describe("infrastructure-components.yaml", () => {
  it("holds every CRD and deploy/'s objects, labelled for clusterctl, the container named manager with GPUCLOUD_API_URL", async () => {
    const objects = parseAllDocuments(await infrastructureComponents(ROOT))
      .map((document) => document.toJS() as unknown)
      .filter(isRecord);
    const crds = objects.filter((object) => object.kind === "CustomResourceDefinition");
    expect(crds).toHaveLength((await readdir(path.join(ROOT, "crds"))).filter((file) => file.endsWith(".yaml")).length);
    expect(objects.filter((object) => object.kind === "Namespace")).toHaveLength(1);
    for (const object of objects) {
      expect((object.metadata as { labels?: Record<string, string> }).labels).toMatchObject(PROVIDER_LABEL);
    }
    const kinds = objects.filter((object) => object.kind !== "CustomResourceDefinition").map((object) => object.kind);
    expect(kinds).toEqual(
      expect.arrayContaining(["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service"]),
    );
    const deployment = objects.find((object) => object.kind === "Deployment") as {
      spec: { template: { spec: { containers: { name: string; image: string; args: string[] }[] } } };
    };
    const [container] = deployment.spec.template.spec.containers;
    expect(container?.name).toBe("manager");
    expect(container?.image).toBe("localhost/gpuvm-operator:0.1.0");
    expect(container?.args.slice(-2)).toEqual(["--api-url", `\${GPUCLOUD_API_URL}`]);
  });

  it("names images canonically and writes clusterctl's variables", () => {
    expect(canonicalImage("gpuvm-operator:0.1.0")).toBe("localhost/gpuvm-operator:0.1.0");
    expect(canonicalImage("team/gpuvm-operator:0.1.0")).toBe("localhost/team/gpuvm-operator:0.1.0");
    expect(canonicalImage("ghcr.io/team/gpuvm-operator:0.1.0")).toBe("ghcr.io/team/gpuvm-operator:0.1.0");
    expect(canonicalImage("registry:5000/gpuvm-operator")).toBe("registry:5000/gpuvm-operator");
    expect(canonicalImage("localhost/gpuvm-operator")).toBe("localhost/gpuvm-operator");
    expect(clusterctlVariable("GPUCLOUD_API_URL")).toBe(`\${GPUCLOUD_API_URL}`);
    expect(clusterctlVariable("WORKERS", "2")).toBe(`\${WORKERS:=2}`);
  });
});
