import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { ensureHelm } from "../../.ci/helm.ts";
import { PRICES_CONFIGMAP_KEY, PRICES_CONFIGMAP_NAME, parsePriceOverrides } from "../../src/admission/prices.ts";
import { KINDS, USER_KINDS } from "../../src/api/kinds.ts";

// Renders the Helm chart with the helm 4 binary shipped inside an npm package (no download; `npm run helm`)
// and the kustomize tree with `kubectl kustomize` (offline), and checks what comes out.

const run = promisify(execFile);
const REPO_ROOT = path.resolve(import.meta.dirname, "../..");
const CHART_DIR = path.join(REPO_ROOT, "charts/gpuvm-operator");
let HELM = "";
const CRD_COPY_DIRS = [path.join(CHART_DIR, "files/crds"), path.join(REPO_ROOT, "deploy/crds")];
const MONITORING_APIS = [
  "--api-versions",
  "monitoring.coreos.com/v1/ServiceMonitor",
  "--api-versions",
  "monitoring.coreos.com/v1/PodMonitor",
  "--api-versions",
  "monitoring.coreos.com/v1/PrometheusRule",
];
/** Every object the chart can render besides the defaults (the ServiceMonitor and PodMonitor are alternatives). */
const ALL_OPTIONAL_OBJECTS = [
  ...MONITORING_APIS,
  ...["replicaCount=2", "serviceMonitor.enabled=true", "prometheusRule.enabled=true"].flatMap((v) => ["--set", v]),
  ...["grafanaDashboard.enabled=true", "networkPolicy.enabled=true"].flatMap((v) => ["--set", v]),
  ...["sharding.shards=2"].flatMap((v) => ["--set", v]),
];
const EXPECTED_CRDS = [
  ...["gpuvms", "gpudisks", "gpunetworks", "gpufirewallrules", "gpuvmpools", "gpubudgets", "gpucloudclaims"].map(
    (plural) => `${plural}.gpucloud.dev`,
  ),
  ...["gpuclusters", "gpumachines", "gpumachinetemplates"].map((plural) => `${plural}.infrastructure.cluster.x-k8s.io`),
];
/** The label that aggregates a ClusterRole into Cluster API's core manager role. */
const AGGREGATE_TO_CAPI_MANAGER = "cluster.x-k8s.io/aggregate-to-manager";

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

/** The operator's ClusterRole (not the one aggregated to Cluster API's manager). */
function operatorClusterRole(manifests: Manifest[]): Manifest {
  return only(
    manifests.filter((manifest) => manifest.metadata.labels?.[AGGREGATE_TO_CAPI_MANAGER] === undefined),
    "ClusterRole",
  );
}

function capiManagerRoles(manifests: Manifest[]): Manifest[] {
  return manifests.filter(
    (manifest) => manifest.kind === "ClusterRole" && manifest.metadata.labels?.[AGGREGATE_TO_CAPI_MANAGER] === "true",
  );
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

/** Every file below a folder of the repository, as paths relative to its root. */
async function filesUnder(folder: string): Promise<string[]> {
  const entries = await readdir(path.join(REPO_ROOT, folder), { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(REPO_ROOT, path.join(entry.parentPath, entry.name)));
}

async function topLevelCrdFiles(): Promise<string[]> {
  return (await readdir(path.join(REPO_ROOT, "crds"))).filter((file) => file.endsWith(".yaml")).sort();
}

beforeAll(async () => {
  HELM = await ensureHelm();
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
      const copies = (await readdir(copyDir))
        .filter((file) => /^(gpucloud\.dev|infrastructure\.cluster\.x-k8s\.io)_/.test(file))
        .sort();
      expect(copies).toEqual(files);
    },
  );
});

describe("Helm chart", () => {
  it("passes helm lint --strict, with defaults and with every optional object switched on", async () => {
    const { stdout } = await run(HELM, ["lint", "--strict", CHART_DIR]);
    expect(stdout).toContain("0 chart(s) failed");
    // helm lint cannot pretend CRDs are served (no --api-versions): the monitoring objects are checked by
    // rendering them below and in test/deploy/monitoring.test.ts.
    const everything = await run(HELM, [
      "lint",
      "--strict",
      CHART_DIR,
      ...ALL_OPTIONAL_OBJECTS.filter(
        (arg, index, all) => arg !== "--api-versions" && all[index - 1] !== "--api-versions",
      ),
    ]);
    expect(everything.stdout).toContain("0 chart(s) failed");
  });

  it("renders the CRDs, RBAC, a hardened Deployment with probes and a metrics Service by default", async () => {
    const manifests = await helmTemplate();
    expect(manifests.map((manifest) => manifest.kind).sort()).toEqual(
      [
        ...Array(EXPECTED_CRDS.length).fill("CustomResourceDefinition"),
        "ClusterRole",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        ...["Role", "Role", "RoleBinding", "RoleBinding"],
        "Service",
        "ServiceAccount",
      ].sort(),
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
    expect(flagValue(container.args, "--claims-namespace")).toBe("gpuvm-system");
    expect(flagValue(container.args, "--health-probe-bind-address")).toBe(":8081");
    expect(container.ports.find((port) => port.name === "metrics")?.containerPort).toBe(8080);
    const service = only(manifests, "Service");
    expect(service.spec).toMatchObject({ selector: (deployment.spec as DeploymentSpec).selector.matchLabels });
    const clusterScoped = new Set(["ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"]);
    for (const manifest of manifests.filter((m) => !clusterScoped.has(m.kind))) {
      expect(manifest.metadata.namespace, manifest.kind).toBe("gpuvm-system");
    }
    const pod = (deployment.spec as DeploymentSpec).template.spec as unknown as Record<string, unknown>;
    expect(pod.nodeSelector).toEqual({ "kubernetes.io/os": "linux" });
  });

  it("renders the CRDs of crds/ as templates, kept on uninstall (crds.enabled, crds.keep)", async () => {
    const crds = (await helmTemplate()).filter((manifest) => manifest.kind === "CustomResourceDefinition");
    expect(crds.map((crd) => crd.metadata.name).sort()).toEqual([...EXPECTED_CRDS].sort());
    for (const file of await topLevelCrdFiles()) {
      const original = parse(await readFile(path.join(REPO_ROOT, "crds", file), "utf8")) as Manifest;
      const rendered = crds.find((crd) => crd.metadata.name === original.metadata.name);
      // Unchanged but for the release's labels and the keep annotation.
      expect(rendered?.spec, file).toEqual(original.spec);
      expect(rendered?.metadata.labels).toMatchObject({
        ...original.metadata.labels,
        "app.kubernetes.io/instance": "demo",
      });
      expect((rendered?.metadata as { annotations?: Record<string, string> } | undefined)?.annotations).toEqual({
        "helm.sh/resource-policy": "keep",
      });
    }
    const notKept = (await helmTemplate("--set", "crds.keep=false")).filter(
      (m) => m.kind === "CustomResourceDefinition",
    );
    expect(notKept.map((crd) => (crd.metadata as { annotations?: unknown }).annotations)).toEqual(
      Array(EXPECTED_CRDS.length).fill(undefined),
    );
    const none = await helmTemplate("--set", "crds.enabled=false");
    expect(none.filter((manifest) => manifest.kind === "CustomResourceDefinition")).toEqual([]);
  });

  it("turns values into flags and renders the optional ServiceMonitor", async () => {
    const manifests = await helmTemplate(
      ...MONITORING_APIS,
      "--set",
      "serviceMonitor.enabled=true",
      "--set",
      "apiUrl=https://cloud.example/v0.1",
      "--set",
      "allowedApiUrls={https://eu.cloud.example/v0.1,https://us.cloud.example/v0.1}",
      "--set",
      "watchNamespaces={team-a,team-b}",
      "--set",
      "leaderElection.enabled=false",
      "--set",
      "credentialsSecret.namespace=secrets",
    );
    const args = operatorContainer(only(manifests, "Deployment")).args;
    expect(flagValue(args, "--api-url")).toBe("https://cloud.example/v0.1");
    expect(flagValue(args, "--allowed-api-urls")).toBe("https://eu.cloud.example/v0.1,https://us.cloud.example/v0.1");
    expect(flagValue(args, "--watch-namespace")).toBe("team-a,team-b");
    expect(flagValue(args, "--credentials-secret")).toBe("secrets/gpucloud-credentials");
    expect(args).not.toContain("--leader-elect");
    const monitor = only(manifests, "ServiceMonitor");
    const service = only(manifests, "Service");
    const selector = (monitor.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
    expect(service.metadata.labels).toMatchObject(selector);
  });

  it("installScope namespace: a Role per watched namespace (and its own), no cluster-wide permission", async () => {
    const scoped = await helmTemplate("--set", "installScope=namespace", "--set", "watchNamespaces={team-a,team-b}");
    expect(scoped.filter((m) => m.kind === "ClusterRole" || m.kind === "ClusterRoleBinding")).toEqual([]);
    const roles = scoped.filter((m) => m.kind === "Role" && m.metadata.name === "demo-gpuvm-operator");
    expect(roles.map((role) => role.metadata.namespace).sort()).toEqual(["gpuvm-system", "team-a", "team-b"]);
    for (const role of roles) expect(grants(role)).toEqual(LEAST_PRIVILEGE);
    const bindings = scoped.filter((m) => m.kind === "RoleBinding" && m.metadata.name === "demo-gpuvm-operator");
    expect(bindings.map((binding) => binding.metadata.namespace).sort()).toEqual(["gpuvm-system", "team-a", "team-b"]);
    expect(flagValue(operatorContainer(only(scoped, "Deployment")).args, "--watch-namespace")).toBe("team-a,team-b");
    // Without watchNamespaces: its own namespace only.
    const own = await helmTemplate("--set", "installScope=namespace");
    expect(flagValue(operatorContainer(only(own, "Deployment")).args, "--watch-namespace")).toBe("gpuvm-system");
    expect(
      own
        .filter((m) => m.kind === "Role")
        .map((role) => role.metadata.name)
        .sort(),
    ).toEqual(["demo-gpuvm-operator", "demo-gpuvm-operator-claims", "demo-gpuvm-operator-leader-election"]);
    // The default stays cluster-wide, with the same rules.
    expect(grants(operatorClusterRole(await helmTemplate()))).toEqual(LEAST_PRIVILEGE);
  });

  it("names everything by nameOverride or fullnameOverride", async () => {
    const byName = await helmTemplate("--set", "nameOverride=gpus");
    const deployment = only(byName, "Deployment");
    expect(deployment.metadata.name).toBe("demo-gpus");
    expect((deployment.spec as DeploymentSpec).selector.matchLabels["app.kubernetes.io/name"]).toBe("gpus");
    expect(operatorClusterRole(byName).metadata.name).toBe("demo-gpus");
    const byFullName = await helmTemplate("--set", "fullnameOverride=gpu-operator");
    for (const kind of ["Deployment", "ServiceAccount", "ClusterRoleBinding"]) {
      expect(only(byFullName, kind).metadata.name, kind).toBe("gpu-operator");
    }
    expect(operatorClusterRole(byFullName).metadata.name).toBe("gpu-operator");
    expect(capiManagerRoles(byFullName).map((role) => role.metadata.name)).toEqual([
      "gpu-operator-cluster-api-manager",
    ]);
    expect(
      byFullName
        .filter((m) => m.kind === "Role")
        .map((role) => role.metadata.name)
        .sort(),
    ).toEqual(["gpu-operator-claims", "gpu-operator-leader-election"]);
  });

  it("pins the image by digest (image.digest), with or without a tag", async () => {
    const digest = `sha256:${"ab".repeat(32)}`;
    const image = async (...args: string[]) =>
      (operatorContainer(only(await helmTemplate(...args), "Deployment")) as unknown as { image: string }).image;
    expect(await image()).toBe("gpuvm-operator:0.1.0");
    expect(await image("--set", `image.digest=${digest}`)).toBe(`gpuvm-operator@${digest}`);
    expect(await image("--set", `image.digest=${digest}`, "--set", "image.tag=1.2.3")).toBe(
      `gpuvm-operator:1.2.3@${digest}`,
    );
  });

  it("renders one Deployment per shard with --shard-count, --shard-index and a selector of its own", async () => {
    const manifests = await helmTemplate("--set", "sharding.shards=3", "--set", "replicaCount=2");
    const deployments = manifests.filter((manifest) => manifest.kind === "Deployment");
    expect(deployments.map((deployment) => deployment.metadata.name)).toEqual([
      "demo-gpuvm-operator-shard-0",
      "demo-gpuvm-operator-shard-1",
      "demo-gpuvm-operator-shard-2",
    ]);
    deployments.forEach((deployment, index) => {
      const args = operatorContainer(deployment).args;
      expect(flagValue(args, "--shard-count")).toBe("3");
      expect(flagValue(args, "--shard-index")).toBe(String(index));
      expect(args).toContain("--leader-elect"); // each shard campaigns for its own Lease
      const spec = deployment.spec as DeploymentSpec & { replicas: number };
      expect(spec.replicas).toBe(2);
      expect(spec.selector.matchLabels["gpucloud.dev/shard"]).toBe(String(index));
      expect(spec.template.metadata.labels).toMatchObject(spec.selector.matchLabels);
    });
    // One metrics Service for every shard's pods.
    const service = only(manifests, "Service").spec as { selector: Record<string, string> };
    expect(service.selector["gpucloud.dev/shard"]).toBeUndefined();
    // Without sharding: one Deployment under its usual name, no shard flags.
    const single = only(await helmTemplate(), "Deployment");
    expect(single.metadata.name).toBe("demo-gpuvm-operator");
    expect(operatorContainer(single).args).not.toContain("--shard-count");
    await expect(helmTemplate("--set", "sharding.shards=0")).rejects.toThrow(/shards/);
  });

  it("renders the Pod options: strategy, priority class, spread, env, volumes, annotations, labels, node selector, log flags", async () => {
    const valuesFile = path.join(REPO_ROOT, "test/deploy/fixtures/helm-pod-options.yaml");
    const deployment = only(await helmTemplate("--values", valuesFile), "Deployment");
    const spec = deployment.spec as {
      strategy: unknown;
      template: {
        metadata: { labels: Record<string, string>; annotations: Record<string, string> };
        spec: Record<string, unknown>;
      };
    };
    expect(spec.strategy).toEqual({ type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } });
    expect(spec.template.metadata.labels).toMatchObject({ team: "ml", "app.kubernetes.io/name": "gpuvm-operator" });
    expect(spec.template.metadata.annotations).toEqual({ "example.com/owner": "ml-platform" });
    const pod = spec.template.spec;
    expect(pod.priorityClassName).toBe("system-cluster-critical");
    expect(pod.nodeSelector).toEqual({ "kubernetes.io/os": "linux", pool: "system" });
    expect(pod.topologySpreadConstraints).toEqual([
      {
        maxSkew: 1,
        topologyKey: "topology.kubernetes.io/zone",
        whenUnsatisfiable: "ScheduleAnyway",
        labelSelector: {
          matchLabels: { "app.kubernetes.io/name": "gpuvm-operator", "app.kubernetes.io/instance": "demo" },
        },
      },
      {
        maxSkew: 2,
        topologyKey: "kubernetes.io/hostname",
        whenUnsatisfiable: "DoNotSchedule",
        labelSelector: { matchLabels: { custom: "yes" } },
      },
    ]);
    expect(pod.volumes).toEqual([
      { name: "tmp", emptyDir: {} },
      { name: "ca", configMap: { name: "corporate-ca" } },
    ]);
    const container = operatorContainer(deployment) as unknown as Container & {
      env: unknown[];
      volumeMounts: unknown[];
    };
    expect(container.env).toEqual([
      { name: "NODE_EXTRA_CA_CERTS", value: "/etc/ssl/corporate/ca.crt" },
      { name: "GPUVM_API_RATE_LIMIT", valueFrom: { configMapKeyRef: { name: "limits", key: "rate" } } },
    ]);
    expect(container.volumeMounts).toEqual([
      { name: "tmp", mountPath: "/tmp" },
      { name: "ca", mountPath: "/etc/ssl/corporate", readOnly: true },
    ]);
    expect(flagValue(container.args, "--log-format")).toBe("text");
    expect(flagValue(container.args, "--log-time-format")).toBe("iso8601");
    const defaults = operatorContainer(only(await helmTemplate(), "Deployment"));
    expect(defaults.args).not.toContain("--log-format");
    expect(defaults.args).not.toContain("--log-time-format");
  });

  it("renders a PodDisruptionBudget only for more than one replica, unless switched off", async () => {
    expect((await helmTemplate()).filter((m) => m.kind === "PodDisruptionBudget")).toEqual([]);
    const two = await helmTemplate("--set", "replicaCount=2");
    const pdb = only(two, "PodDisruptionBudget");
    expect(pdb.spec).toEqual({
      minAvailable: 1,
      selector: { matchLabels: (only(two, "Deployment").spec as DeploymentSpec).selector.matchLabels },
    });
    const byPercent = only(
      await helmTemplate("--set", "replicaCount=3", "--set", "podDisruptionBudget.maxUnavailable=50%"),
      "PodDisruptionBudget",
    );
    expect(byPercent.spec).toMatchObject({ maxUnavailable: "50%" });
    expect(byPercent.spec).not.toHaveProperty("minAvailable");
    const off = await helmTemplate("--set", "replicaCount=2", "--set", "podDisruptionBudget.enabled=false");
    expect(off.filter((m) => m.kind === "PodDisruptionBudget")).toEqual([]);
  });

  it("renders a NetworkPolicy that admits only the metrics and probe ports (networkPolicy)", async () => {
    expect((await helmTemplate()).filter((m) => m.kind === "NetworkPolicy")).toEqual([]);
    const open = only(await helmTemplate("--set", "networkPolicy.enabled=true"), "NetworkPolicy");
    expect(open.spec).toEqual({
      podSelector: {
        matchLabels: { "app.kubernetes.io/name": "gpuvm-operator", "app.kubernetes.io/instance": "demo" },
      },
      policyTypes: ["Ingress"],
      ingress: [{ ports: [{ port: "metrics", protocol: "TCP" }] }, { ports: [{ port: "health", protocol: "TCP" }] }],
    });
    const valuesFile = path.join(REPO_ROOT, "test/deploy/fixtures/helm-network-policy.yaml");
    const strict = only(await helmTemplate("--values", valuesFile), "NetworkPolicy");
    expect(strict.spec).toMatchObject({
      policyTypes: ["Ingress", "Egress"],
      ingress: [
        {
          ports: [{ port: "metrics", protocol: "TCP" }],
          from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } }],
        },
        { ports: [{ port: "health", protocol: "TCP" }] },
      ],
      egress: [{ to: [{ ipBlock: { cidr: "0.0.0.0/0" } }], ports: [{ port: 443, protocol: "TCP" }] }],
    });
  });

  it.each([
    ["a replica count that is not a number", ["--set", "replicaCount=many"], "/replicaCount"],
    ["an unknown top-level value", ["--set", "replicas=2"], "replicas"],
    ["an unknown log level", ["--set", "logLevel=loud"], "/logLevel"],
    ["a port out of range", ["--set", "metrics.port=70000"], "/metrics/port"],
    [
      "more than one replica without leader election",
      ["--set", "replicaCount=2", "--set", "leaderElection.enabled=false"],
      "/leaderElection/enabled': value must be true",
    ],
    [
      "sharding without leader election (no safe change of the shard count)",
      ["--set", "sharding.shards=2", "--set", "leaderElection.enabled=false"],
      "/leaderElection/enabled': value must be true",
    ],
    ["a name override that is no DNS label", ["--set", "nameOverride=Big_Name"], "/nameOverride"],
    ["a full name override that is no DNS label", ["--set", "fullnameOverride=a.b"], "/fullnameOverride"],
    ["an image digest that is not sha256", ["--set", "image.digest=latest"], "/image/digest"],
    ["an unknown log format", ["--set", "logFormat=yaml"], "/logFormat"],
    ["an unknown log time format", ["--set", "logTimeFormat=rfc"], "/logTimeFormat"],
    ["an unknown strategy type", ["--set", "strategy.type=Blue"], "/strategy/type"],
    [
      "a PDB minAvailable that is neither a number nor a percentage",
      ["--set", "podDisruptionBudget.minAvailable=x"],
      "/podDisruptionBudget/minAvailable",
    ],
    ["an env entry without a name", ["--set", "extraEnv[0].value=x"], "/extraEnv/0"],
    ["a volume mount without a path", ["--set", "extraVolumeMounts[0].name=x"], "/extraVolumeMounts/0"],
    ["a volume without a name", ["--set", "extraVolumes[0].emptyDir=null"], "/extraVolumes/0"],
    ["a pod label value over 63 characters", ["--set", `podLabels.team=${"x".repeat(64)}`], "/podLabels/team"],
    ["a priority class name that is no DNS name", ["--set", "priorityClassName=High_Priority"], "/priorityClassName"],
    [
      "a spread constraint without topologyKey",
      [
        "--set",
        "topologySpreadConstraints[0].maxSkew=1",
        "--set",
        "topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
      ],
      "/topologySpreadConstraints/0",
    ],
    ["a crds switch that is not a boolean", ["--set", "crds.enabled=maybe"], "/crds/enabled"],
    ["an unknown key under crds", ["--set", "crds.upgrade=true"], "/crds"],
    ["a monitor interval that is no duration", ["--set", "podMonitor.interval=soon"], "/podMonitor/interval"],
    [
      "a runbook base URL that is not http(s)",
      ["--set", "prometheusRule.runbookBaseUrl=ftp://x"],
      "/prometheusRule/runbookBaseUrl",
    ],
    [
      "a dashboard namespace that is no DNS label",
      ["--set", "grafanaDashboard.namespace=Mon"],
      "/grafanaDashboard/namespace",
    ],
    [
      "NetworkPolicy peers that are not a list",
      ["--set", "networkPolicy.metricsFrom=all"],
      "/networkPolicy/metricsFrom",
    ],
    ["NetworkPolicy egress rules that are not a list", ["--set", "networkPolicy.egress=open"], "/networkPolicy/egress"],
    ["a networkPolicy switch that is not a boolean", ["--set", "networkPolicy.enabled=yes"], "/networkPolicy/enabled"],
    [
      "a PDB maxUnavailable that is no number or percentage",
      ["--set", "podDisruptionBudget.maxUnavailable=half"],
      "/podDisruptionBudget/maxUnavailable",
    ],
    [
      "a PDB switch that is not a boolean",
      ["--set", "podDisruptionBudget.enabled=auto"],
      "/podDisruptionBudget/enabled",
    ],
    ["a pod annotation that is not a string", ["--set-json", 'podAnnotations={"a":1}'], "/podAnnotations/a"],
    ["a node selector value that is not a string", ["--set-json", 'nodeSelector={"pool":true}'], "/nodeSelector/pool"],
    [
      "a PrometheusRule label value over 63 characters",
      ["--set", `prometheusRule.labels.x=${"y".repeat(64)}`],
      "/prometheusRule/labels/x",
    ],
    [
      "a dashboard annotation that is not a string",
      ["--set-json", 'grafanaDashboard.annotations={"a":[1]}'],
      "/grafanaDashboard/annotations/a",
    ],
    ["an unknown key under podMonitor", ["--set", "podMonitor.scrapeTimeout=10s"], "/podMonitor"],
    ["an installScope that is neither cluster nor namespace", ["--set", "installScope=everywhere"], "/installScope"],
    ["an allowed API URL with a query", ["--set", "allowedApiUrls={https://x.example/v0.1?a=b}"], "/allowedApiUrls/0"],
    ["an apiUrl with a fragment", ["--set", "apiUrl=https://x.example/v0.1#f"], "/apiUrl"],
    ["a price for a family the cloud does not have", ["--set-json", "prices.gpuHourUSD.h100=3"], "/prices/gpuHourUSD"],
    ["a negative disk price", ["--set-json", "prices.diskGbHourUSD=-1"], "/prices/diskGbHourUSD"],
  ])("rejects %s through values.schema.json", async (_label, args, where) => {
    const failure = await run(HELM, ["template", "demo", CHART_DIR, ...args]).then(
      () => undefined,
      (error: unknown) => error as { stderr: string },
    );
    expect(failure?.stderr).toContain(where);
  });
});

describe("what the chart and the docs tell a user", () => {
  it("Helm's NOTES name every kind and suggest only kubectl commands kubectl accepts", async () => {
    const { stdout } = await run(HELM, [
      "install",
      "demo",
      CHART_DIR,
      "--namespace",
      "gpuvm-system",
      "--dry-run=client",
    ]);
    const notes = stdout.slice(stdout.indexOf("NOTES:"));
    for (const { kind } of KINDS) expect(notes).toMatch(new RegExp(`\\b${kind}\\b`));
    const categories = new Set<string>();
    for (const file of await topLevelCrdFiles()) {
      const crd = parse(await readFile(path.join(REPO_ROOT, "crds", file), "utf8")) as {
        spec: { names: { categories?: string[] } };
      };
      for (const category of crd.spec.names.categories ?? []) categories.add(category);
    }
    expect(categories.size).toBeGreaterThan(0);
    const gets = notes.split("\n").filter((line) => /^\s*kubectl get /.test(line));
    expect(gets.length).toBeGreaterThan(0);
    for (const line of gets) {
      const words = line.split("#")[0]?.trim().split(/\s+/) ?? [];
      if (!words.includes("-w") && !words.includes("--watch")) continue;
      // kubectl watches one resource type: a category (several types) or a list of types is refused.
      const resource = words[2] ?? "";
      expect(resource, line).not.toContain(",");
      expect(categories.has(resource), `${line}: ${resource} is a category`).toBe(false);
    }
  });

  it("never count the kinds (there are more to come); where they are listed, all of them are", async () => {
    const files = [
      "README.md",
      "package.json",
      ...(await readdir(path.join(REPO_ROOT, "docs"))).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`),
      ...(await filesUnder("charts/gpuvm-operator")),
      ...(await filesUnder("deploy")),
    ];
    const counted: string[] = [];
    for (const file of files) {
      const text = await readFile(path.join(REPO_ROOT, file), "utf8");
      const counts =
        /\b(one|two|three|four|five|six|seven|eight|nine|ten|\d+) (custom )?(kinds|CRDs|custom resources)\b/gi;
      for (const match of text.matchAll(counts)) counted.push(`${file}: ${match[0]}`);
    }
    expect(counted).toEqual([]);
    const description = (
      JSON.parse(await readFile(path.join(REPO_ROOT, "package.json"), "utf8")) as {
        description: string;
      }
    ).description;
    for (const { kind } of USER_KINDS) expect(description).toMatch(new RegExp(`\\b${kind}\\b`));
  });
});

describe("Helm chart prices", () => {
  it("renders no prices ConfigMap by default, and the operator's prices.yaml from values", async () => {
    expect((await helmTemplate()).filter((m) => m.metadata.name === PRICES_CONFIGMAP_NAME)).toEqual([]);
    const manifests = await helmTemplate(
      "--set-json",
      'prices.gpuHourUSD={"a100-80gb":1.65}',
      "--set-json",
      "prices.diskGbHourUSD=0.0001",
    );
    const configMap = manifests.find((m) => m.kind === "ConfigMap" && m.metadata.name === PRICES_CONFIGMAP_NAME);
    expect(configMap?.metadata.namespace).toBe("gpuvm-system");
    const text = (configMap?.data as Record<string, string> | undefined)?.[PRICES_CONFIGMAP_KEY] ?? "";
    const prices = parsePriceOverrides(text, "the chart's ConfigMap");
    expect(prices.vm("a100-80gb.8x")?.micros).toBe(13_200_000);
    expect(prices.vm("a40.1x")?.micros).toBe(1_100_000);
    expect(prices.disk(1e12).micros).toBe(100_000);
  });
});

describe("kustomize tree (deploy/)", () => {
  it("builds offline with kubectl kustomize and matches the chart's RBAC", async () => {
    const { stdout } = await run("kubectl", ["kustomize", path.join(REPO_ROOT, "deploy")]);
    const manifests = parseManifests(stdout);
    const crds = manifests.filter((manifest) => manifest.kind === "CustomResourceDefinition");
    expect(crds.map((crd) => crd.metadata.name).sort()).toEqual([...EXPECTED_CRDS].sort());
    for (const kind of ["Namespace", "ServiceAccount", "ClusterRoleBinding"]) {
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
    expect(operatorClusterRole(manifests).rules).toEqual(operatorClusterRole(chart).rules);
    expect(capiManagerRoles(manifests).map((role) => role.rules)).toEqual(
      capiManagerRoles(chart).map((role) => role.rules),
    );
    const roleRules = (all: Manifest[]) =>
      Object.fromEntries(
        all.filter((m) => m.kind === "Role").map((role) => [role.metadata.name.replace(/^demo-/, ""), role.rules]),
      );
    expect(roleRules(manifests)).toEqual(roleRules(chart));
  });

  it("grants the least the operator needs: no update anywhere, no get or /finalizers on its kinds, Leases get/list/create/update", async () => {
    const manifests = parseManifests((await run("kubectl", ["kustomize", path.join(REPO_ROOT, "deploy")])).stdout);
    expect(grants(operatorClusterRole(manifests))).toEqual(LEAST_PRIVILEGE);
    const role = (name: string) => manifests.find((m) => m.kind === "Role" && m.metadata.name === name);
    expect(grants(role("gpuvm-operator-leader-election") as Manifest)).toEqual([
      "coordination.k8s.io/leases: create get list update",
    ]);
    // Claims only in the operator's own namespace, and no update (create-only; the id is a guarded patch).
    expect(role("gpuvm-operator-claims")?.metadata.namespace).toBe("gpuvm-system");
    expect(grants(role("gpuvm-operator-claims") as Manifest)).toEqual([
      "gpucloud.dev/gpucloudclaims: create delete get list patch watch",
    ]);
  });

  it("aggregates a ClusterRole bound to nobody to Cluster API's core manager: the contract's verbs on the three kinds", async () => {
    const manifests = parseManifests((await run("kubectl", ["kustomize", path.join(REPO_ROOT, "deploy")])).stdout);
    const [role, ...others] = capiManagerRoles(manifests);
    expect(others).toEqual([]);
    expect(role === undefined ? [] : grants(role)).toEqual(
      ["gpuclusters", "gpumachines", "gpumachinetemplates"].map(
        (plural) => `infrastructure.cluster.x-k8s.io/${plural}: create delete get list patch update watch`,
      ),
    );
    const bound = manifests
      .filter((m) => m.kind === "ClusterRoleBinding" || m.kind === "RoleBinding")
      .map((binding) => (binding.roleRef as { name: string }).name);
    expect(bound).not.toContain(role?.metadata.name);
    // The chart's, unless switched off; none with the namespace-scoped install.
    expect(capiManagerRoles(await helmTemplate()).map((chartRole) => grants(chartRole))).toEqual([
      grants(role as Manifest),
    ]);
    expect(capiManagerRoles(await helmTemplate("--set", "rbac.clusterApiManager=false"))).toEqual([]);
    expect(capiManagerRoles(await helmTemplate("--set", "installScope=namespace"))).toEqual([]);
  });

  it("namespace-scoped component: no cluster-wide permission, the same rules as a Role, watching its own namespace", async () => {
    // A user's overlay outside deploy/ (kustomize refuses an overlay inside its base).
    const overlay = await mkdtemp(path.join(tmpdir(), "gpuvm-overlay-"));
    const deploy = path.relative(overlay, path.join(REPO_ROOT, "deploy"));
    await writeFile(
      path.join(overlay, "kustomization.yaml"),
      `resources:\n  - ${deploy}\ncomponents:\n  - ${deploy}/components/namespace-scoped\n`,
    );
    try {
      const manifests = parseManifests((await run("kubectl", ["kustomize", overlay])).stdout);
      expect(manifests.filter((m) => m.kind === "ClusterRole" || m.kind === "ClusterRoleBinding")).toEqual([]);
      const roles = manifests.filter((manifest) => manifest.kind === "Role");
      expect(roles.map((role) => `${role.metadata.namespace}/${role.metadata.name}`).sort()).toEqual([
        "gpuvm-system/gpuvm-operator",
        "gpuvm-system/gpuvm-operator-claims",
        "gpuvm-system/gpuvm-operator-leader-election",
      ]);
      const operatorRole = roles.find((role) => role.metadata.name === "gpuvm-operator");
      expect(operatorRole === undefined ? [] : grants(operatorRole)).toEqual(LEAST_PRIVILEGE);
      const bindings = manifests.filter((manifest) => manifest.kind === "RoleBinding");
      expect(bindings.map((binding) => (binding.roleRef as { name: string }).name).sort()).toEqual([
        "gpuvm-operator",
        "gpuvm-operator-claims",
        "gpuvm-operator-leader-election",
      ]);
      expect(operatorContainer(only(manifests, "Deployment")).args).toContain("--watch-namespace=$(POD_NAMESPACE)");
    } finally {
      await rm(overlay, { recursive: true, force: true });
    }
  });
});

/** The operator's rules, one line per resource: what test/kubernetes (#10) proves the operator uses. */
const LEAST_PRIVILEGE = [
  "/configmaps: create delete get list patch watch",
  "/secrets: create delete get list patch watch",
  "events.k8s.io/events: create patch",
  ...["gpudisks", "gpufirewallrules", "gpunetworks", "gpuvmpools", "gpuvms"].flatMap((plural) => [
    `gpucloud.dev/${plural}: list patch watch`,
    `gpucloud.dev/${plural}/status: patch`,
  ]),
  // Owned by the operator's objects (a pool's replicas, a GpuMachine's VM, a GpuCluster's network and rules).
  ...["gpudisks", "gpufirewallrules", "gpunetworks", "gpuvms"].map((plural) => `gpucloud.dev/${plural}: create delete`),
  // Cluster API's infrastructure kinds, and the Clusters and Machines that own them (read only).
  ...["gpuclusters", "gpumachines"].map((plural) => `infrastructure.cluster.x-k8s.io/${plural}: list patch watch`),
  "infrastructure.cluster.x-k8s.io/gpumachinetemplates: list watch",
  ...["gpuclusters", "gpumachines", "gpumachinetemplates"].map(
    (plural) => `infrastructure.cluster.x-k8s.io/${plural}/status: patch`,
  ),
  ...["clusters", "machines"].map((plural) => `cluster.x-k8s.io/${plural}: list watch`),
  // Budgets are read, and their ledger written through /status only.
  "gpucloud.dev/gpubudgets: list watch",
  "gpucloud.dev/gpubudgets/status: patch",
].sort();

/** A Role's or ClusterRole's rules as "group/resource: verbs" lines, sorted. */
function grants(role: Manifest): string[] {
  const rules = role.rules as { apiGroups: string[]; resources: string[]; verbs: string[] }[];
  return rules
    .flatMap((rule) =>
      rule.apiGroups.flatMap((group) =>
        rule.resources.map((resource) => `${group}/${resource}: ${[...rule.verbs].sort().join(" ")}`),
      ),
    )
    .sort();
}
