import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { z } from "zod";
import { ensureHelm } from "../../.ci/helm.ts";
import { requirePromtool } from "./promtool.ts";

// The alerting rules and the dashboard (deploy/monitoring/rules-and-dashboard/), checked with Prometheus' own
// promtool, and their packaging in kustomize (deploy/monitoring/) and Helm. The dashboard's and the rules'
// metric names are checked against a live scrape in test/e2e/monitoring.test.ts.

const run = promisify(execFile);
const REPO_ROOT = path.resolve(import.meta.dirname, "../..");
const SOURCE_DIR = path.join(REPO_ROOT, "deploy/monitoring/rules-and-dashboard");
const RULES = path.join(SOURCE_DIR, "gpuvm-operator.rules.yaml");
const RULE_TESTS = path.join(SOURCE_DIR, "gpuvm-operator.rules.test.yaml");
const DASHBOARD = path.join(SOURCE_DIR, "gpuvm-operator-dashboard.json");
const CHART_DIR = path.join(REPO_ROOT, "charts/gpuvm-operator");
const MONITORING_APIS = ["ServiceMonitor", "PodMonitor", "PrometheusRule"].flatMap((kind) => [
  "--api-versions",
  `monitoring.coreos.com/v1/${kind}`,
]);

const AlertRule = z.object({
  alert: z.string(),
  expr: z.string(),
  for: z.string().optional(),
  labels: z.object({ severity: z.enum(["warning", "critical"]) }),
  annotations: z.strictObject({
    summary: z.string().min(10),
    description: z.string().min(20),
    runbook_url: z.string(),
  }),
});
const RuleFile = z.object({ groups: z.array(z.object({ name: z.string(), rules: z.array(AlertRule).min(1) })) });
const RuleTests = z.object({
  tests: z.array(
    z.object({
      name: z.string(),
      alert_rule_test: z.array(z.object({ alertname: z.string(), exp_alerts: z.array(z.unknown()) })),
    }),
  ),
});

interface Manifest {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
}

function manifestsOf(text: string): Manifest[] {
  return parseAllDocuments(text)
    .map((document) => document.toJS() as Manifest | null)
    .filter((manifest): manifest is Manifest => manifest !== null);
}

function only(manifests: Manifest[], kind: string): Manifest {
  const found = manifests.filter((manifest) => manifest.kind === kind);
  expect(
    found.map((manifest) => manifest.kind),
    kind,
  ).toEqual([kind]);
  return found[0] as Manifest;
}

/** GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to dashes. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\w\- ]/g, "")
    .replace(/ /g, "-");
}

let promtool = "";
let helm = "";
let rules: z.infer<typeof RuleFile>;
const alerts = () => rules.groups.flatMap((group) => group.rules);

beforeAll(async () => {
  promtool = await requirePromtool();
  helm = await ensureHelm();
  rules = RuleFile.parse(parse(await readFile(RULES, "utf8")));
});

describe("alerting rules", () => {
  it("pass promtool check rules", async () => {
    const { stdout } = await run(promtool, ["check", "rules", RULES]);
    expect(stdout).toContain(`SUCCESS: ${alerts().length} rules found`);
  });

  it("pass their promtool unit tests", async () => {
    const { stdout } = await run(promtool, ["test", "rules", RULE_TESTS]);
    expect(stdout).toContain("SUCCESS");
  });

  it("have, for every alert, a unit test where it fires and one where it stays silent", async () => {
    const tests = RuleTests.parse(parse(await readFile(RULE_TESTS, "utf8"))).tests;
    const cases = tests.flatMap((test) => test.alert_rule_test);
    for (const { alert } of alerts()) {
      const own = cases.filter((entry) => entry.alertname === alert);
      expect(
        own.some((entry) => entry.exp_alerts.length > 0),
        `${alert} has no firing case`,
      ).toBe(true);
      expect(
        own.some((entry) => entry.exp_alerts.length === 0),
        `${alert} has no silent case`,
      ).toBe(true);
    }
    const known = new Set(alerts().map((rule) => rule.alert));
    expect(cases.map((entry) => entry.alertname).filter((name) => !known.has(name))).toEqual([]);
  });

  it("link each alert to its own section of docs/runbook.md", async () => {
    const runbook = await readFile(path.join(REPO_ROOT, "docs/runbook.md"), "utf8");
    const anchors = new Set([...runbook.matchAll(/^#{2,3} (.+)$/gm)].map((match) => anchorOf(match[1] ?? "")));
    for (const { alert, annotations } of alerts()) {
      expect(annotations.runbook_url).toBe(`docs/runbook.md#${alert.toLowerCase()}`);
      expect(anchors.has(alert.toLowerCase()), `docs/runbook.md has no section "${alert}"`).toBe(true);
    }
  });
});

describe("Grafana dashboard", () => {
  it("is valid dashboard JSON whose panels all have queries, a title and a description", async () => {
    const Dashboard = z.object({
      uid: z.literal("gpuvm-operator"),
      title: z.string(),
      panels: z.array(
        z.object({
          type: z.string(),
          title: z.string().min(3),
          description: z.string().optional(),
          targets: z.array(z.object({ expr: z.string().min(1) })).optional(),
        }),
      ),
    });
    const dashboard = Dashboard.parse(JSON.parse(await readFile(DASHBOARD, "utf8")));
    const panels = dashboard.panels.filter((panel) => panel.type !== "row");
    expect(panels.length).toBeGreaterThanOrEqual(12);
    for (const panel of panels) {
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      expect(panel.description?.length, panel.title).toBeGreaterThan(10);
    }
  });
});

describe("kustomize (deploy/monitoring/)", () => {
  it("renders a ServiceMonitor for the metrics Service, the PrometheusRule and the dashboard ConfigMap", async () => {
    const base = manifestsOf((await run("kubectl", ["kustomize", path.join(REPO_ROOT, "deploy")])).stdout);
    const monitoring = manifestsOf(
      (await run("kubectl", ["kustomize", path.join(REPO_ROOT, "deploy/monitoring")])).stdout,
    );
    expect(monitoring.map((manifest) => manifest.kind).sort()).toEqual([
      "ConfigMap",
      "PrometheusRule",
      "ServiceMonitor",
    ]);
    for (const manifest of monitoring) expect(manifest.metadata.namespace, manifest.kind).toBe("gpuvm-system");
    const monitor = only(monitoring, "ServiceMonitor").spec as {
      selector: { matchLabels: Record<string, string> };
      endpoints: { port: string; honorLabels: boolean }[];
    };
    const service = only(base, "Service");
    expect(service.metadata.labels).toMatchObject(monitor.selector.matchLabels);
    expect(monitor.endpoints).toMatchObject([{ port: "metrics", honorLabels: true }]);
    expect(only(monitoring, "PrometheusRule").spec).toEqual(parse(await readFile(RULES, "utf8")));
    const dashboard = only(monitoring, "ConfigMap");
    expect(dashboard.metadata.labels).toMatchObject({ grafana_dashboard: "1" });
    expect(dashboard.data?.["gpuvm-operator-dashboard.json"]).toBe(await readFile(DASHBOARD, "utf8"));
  });

  it("renders a PodMonitor for the operator's pods instead in deploy/monitoring/pod-monitor/", async () => {
    const base = manifestsOf((await run("kubectl", ["kustomize", path.join(REPO_ROOT, "deploy")])).stdout);
    const monitoring = manifestsOf(
      (await run("kubectl", ["kustomize", path.join(REPO_ROOT, "deploy/monitoring/pod-monitor")])).stdout,
    );
    expect(monitoring.map((manifest) => manifest.kind).sort()).toEqual(["ConfigMap", "PodMonitor", "PrometheusRule"]);
    const monitor = only(monitoring, "PodMonitor");
    expect(monitor.metadata.namespace).toBe("gpuvm-system");
    const selector = (monitor.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
    const podLabels = (only(base, "Deployment").spec as { template: { metadata: { labels: Record<string, string> } } })
      .template.metadata.labels;
    expect(podLabels).toMatchObject(selector);
  });
});

describe("Helm chart monitoring values", () => {
  async function template(...args: string[]): Promise<Manifest[]> {
    const { stdout } = await run(helm, ["template", "demo", CHART_DIR, "--namespace", "gpuvm-system", ...args]);
    return manifestsOf(stdout);
  }
  const all = [
    "serviceMonitor.enabled=true",
    "podMonitor.enabled=true",
    "prometheusRule.enabled=true",
    "grafanaDashboard.enabled=true",
  ].flatMap((value) => ["--set", value]);

  it("renders the monitors and the PrometheusRule only where the cluster serves their CRDs", async () => {
    const kinds = (manifests: Manifest[]) => manifests.map((manifest) => manifest.kind);
    const withoutCrds = kinds(await template(...all));
    for (const kind of ["ServiceMonitor", "PodMonitor", "PrometheusRule"]) expect(withoutCrds).not.toContain(kind);
    expect(withoutCrds).toContain("ConfigMap"); // the dashboard needs no CRD
    const withCrds = kinds(await template(...all, ...MONITORING_APIS));
    for (const kind of ["ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap"])
      expect(withCrds).toContain(kind);
    const defaults = kinds(await template(...MONITORING_APIS));
    for (const kind of ["ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap"])
      expect(defaults).not.toContain(kind);
  });

  it("ships the same rules and dashboard as deploy/monitoring/, with labels and a runbook base URL", async () => {
    const args = await template(
      ...all,
      ...MONITORING_APIS,
      ...[
        "prometheusRule.labels.release=kube-prometheus-stack",
        "podMonitor.labels.release=kube-prometheus-stack",
        "prometheusRule.runbookBaseUrl=https://git.example/gpuvm-operator/blob/v0.1.0/",
        "grafanaDashboard.namespace=monitoring",
        "grafanaDashboard.annotations.grafana_folder=GPU",
      ].flatMap((value) => ["--set", value]),
    );
    const rule = only(args, "PrometheusRule");
    expect(rule.metadata.labels).toMatchObject({
      release: "kube-prometheus-stack",
      "app.kubernetes.io/instance": "demo",
    });
    const expected = parse(
      (await readFile(RULES, "utf8")).replaceAll(
        "runbook_url: docs/runbook.md",
        "runbook_url: https://git.example/gpuvm-operator/blob/v0.1.0/docs/runbook.md",
      ),
    );
    expect(rule.spec).toEqual(expected);
    expect(only(args, "PodMonitor").metadata.labels).toMatchObject({ release: "kube-prometheus-stack" });
    expect(only(args, "PodMonitor").spec).toMatchObject({
      podMetricsEndpoints: [{ port: "metrics", honorLabels: true }],
    });
    const dashboard = only(args, "ConfigMap") as Manifest & { metadata: { annotations?: Record<string, string> } };
    expect(dashboard.metadata.namespace).toBe("monitoring");
    expect(dashboard.metadata.labels).toMatchObject({ grafana_dashboard: "1" });
    expect(dashboard.metadata.annotations).toEqual({ grafana_folder: "GPU" });
    expect(dashboard.data?.["gpuvm-operator-dashboard.json"]).toBe((await readFile(DASHBOARD, "utf8")).trimEnd());
  });
});
