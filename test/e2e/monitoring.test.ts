// The monitoring that ships (alerting rules, Grafana dashboard) against a live operator: the operator runs as
// `gpuvm-operator run` beside the playground's simulator and Kubernetes API test double, manages the examples,
// and its /metrics scrape must pass `promtool check metrics` and expose every metric the dashboard's queries and
// the alerts' expressions read.
import { spawnSync } from "node:child_process";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { exposedSampleNames, metricNamesOf } from "../deploy/promql.ts";
import { requirePromtool } from "../deploy/promtool.ts";
import {
  eventually,
  type Playground,
  REPO_ROOT,
  type RunningProcess,
  startOperator,
  startPlayground,
  waitAllReady,
} from "./harness.ts";

const SOURCE_DIR = path.join(REPO_ROOT, "deploy/monitoring/rules-and-dashboard");

interface DashboardPanel {
  title?: string;
  targets?: { expr?: string }[];
}

let playground: Playground;
let operator: RunningProcess;
let metricsUrl: string;

async function scrape(): Promise<string> {
  const response = await fetch(metricsUrl);
  if (response.status !== 200) throw new Error(`GET ${metricsUrl}: HTTP ${response.status}`);
  return response.text();
}

beforeAll(async () => {
  playground = await startPlayground({ latencyMs: 100, withoutOperator: true });
  operator = startOperator(playground);
  // The operator logs the address it serves /metrics on (the playground's operator command asks for port 0).
  metricsUrl = await eventually(
    "the operator's metrics server",
    async () => {
      const match = /"url":"(http:\/\/[^"]+)","paths":\["\/metrics"/.exec(operator.output);
      return match?.[1] === undefined ? undefined : `${match[1]}/metrics`;
    },
    60_000,
  );
  await playground.kubectl("apply", "-f", "examples/");
  await waitAllReady(playground);
  // The usage gauge is read from the cloud in the background of the first scrape that sees an account.
  await eventually(
    "the usage gauge",
    async () =>
      /^gpucloud_usage_gpu_seconds\{project="[^"]+",period="last_complete_day",date="\d{4}-\d{2}-\d{2}"\} /m.test(
        await scrape(),
      )
        ? true
        : undefined,
    30_000,
  );
});

afterAll(async () => {
  await operator?.stop();
  await playground?.close();
});

describe("a live /metrics scrape", () => {
  it("passes promtool check metrics", async () => {
    const promtool = await requirePromtool();
    const text = await scrape();
    const result = spawnSync(promtool, ["check", "metrics"], { input: text, encoding: "utf8" });
    expect(`${result.stdout}${result.stderr}`).toBe("");
    expect(result.status).toBe(0);
  });

  it("carries the operator's series once objects are managed", async () => {
    const text = await scrape();
    expect(text).toMatch(
      /^gpucloud_usage_gpu_seconds\{project="[^"]+",period="last_complete_day",date="\d{4}-\d{2}-\d{2}"\} /m,
    );
    expect(text).toMatch(/^rest_client_requests_total\{code="200",method="GET",host="127\.0\.0\.1:\d+"\} \d+/m);
    expect(text).toMatch(
      // The trainer and the two replicas of the workers pool (examples/).
      /^gpucloud_managed_resource_conditions\{namespace="default",kind="GpuVm",type="Ready",status="True",reason="Available"\} 3$/m,
    );
    expect(text).toMatch(/^gpucloud_operations_oldest_age_seconds\{family="vm"\} /m);
    expect(text).toContain("gpucloud_operator_ready 1");
  });

  it("exposes every metric the Grafana dashboard queries", async () => {
    const dashboard = JSON.parse(await readFile(path.join(SOURCE_DIR, "gpuvm-operator-dashboard.json"), "utf8")) as {
      panels: DashboardPanel[];
    };
    const exposed = exposedSampleNames(await scrape());
    const queries = dashboard.panels.flatMap((panel) =>
      (panel.targets ?? []).map((target) => ({ panel: panel.title, expr: target.expr ?? "" })),
    );
    expect(queries.length).toBeGreaterThan(20);
    const missing = queries.flatMap(({ panel, expr }) =>
      metricNamesOf(expr)
        .filter((name) => !exposed.has(name))
        .map((name) => `${panel}: ${name}`),
    );
    expect(missing).toEqual([]);
  });

  it("exposes every metric the alerts read", async () => {
    const rules = parse(await readFile(path.join(SOURCE_DIR, "gpuvm-operator.rules.yaml"), "utf8")) as {
      groups: { rules: { alert: string; expr: string }[] }[];
    };
    const exposed = exposedSampleNames(await scrape());
    const missing = rules.groups
      .flatMap((group) => group.rules)
      .flatMap(({ alert, expr }) =>
        metricNamesOf(expr)
          .filter((name) => !exposed.has(name))
          .map((name) => `${alert}: ${name}`),
      );
    expect(missing).toEqual([]);
  });
});
