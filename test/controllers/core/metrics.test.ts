import type { KubernetesObject } from "@kubernetes/client-node";
import { pino } from "pino";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import type { CloudAccount } from "../../../src/controllers/accounts/cloud-account.ts";
import {
  cloudOperationsSample,
  lastCompleteUsageDay,
  registerOperatorMetrics,
} from "../../../src/controllers/core/metrics.ts";
import type { InformerEvent } from "../../../src/runtime/index.ts";
import { Metrics } from "../../../src/runtime/metrics.ts";

const logger = pino({ level: "silent" });

function object(namespace: string, status: Record<string, unknown>): KubernetesObject {
  return { metadata: { namespace, name: `o-${Math.random()}` }, status } as KubernetesObject;
}

const stalled = (reason: string) => ({
  conditions: [
    { type: "Ready", status: "False", reason },
    { type: "Stalled", status: "True", reason },
  ],
});

/** Just what the metrics read of an account. */
function fakeAccount(options: { oldestSince?: number; gpuHours?: number }): CloudAccount {
  const fake = {
    projectId: "p-1",
    inFlight: (family: string) => (family === "vm" && options.oldestSince !== undefined ? 1 : 0),
    oldestInFlightSince: (family: string) => (family === "vm" ? options.oldestSince : undefined),
    client: {
      usage: { list: async () => [{ date: lastCompleteUsageDay(Date.now()), quantity: options.gpuHours ?? 0 }] },
    },
  };
  return fake as unknown as CloudAccount;
}

describe("operator metrics", () => {
  it("counts objects per namespace, kind and condition (type, status, reason)", async () => {
    const registry = new Registry();
    registerOperatorMetrics(registry, {
      kinds: [
        {
          kind: "GpuVm",
          list: () => [
            object("team-a", stalled("CredentialsInvalid")),
            object("team-a", stalled("CredentialsInvalid")),
            object("team-b", stalled("InvalidSpec")),
          ],
          on: () => () => undefined,
        },
      ],
      accounts: () => [],
      logger,
    });
    const text = await registry.metrics();
    expect(text).toContain(
      'gpucloud_managed_resource_conditions{namespace="team-a",kind="GpuVm",type="Stalled",status="True",reason="CredentialsInvalid"} 2',
    );
    expect(text).toContain(
      'gpucloud_managed_resource_conditions{namespace="team-b",kind="GpuVm",type="Ready",status="False",reason="InvalidSpec"} 1',
    );
  });

  it("follows informer events, never walking the cache again at a scrape", async () => {
    const registry = new Registry();
    const running = (hourlyPriceUSD: number) => ({
      state: "STATE_RUNNING",
      hourlyPriceUSD,
      conditions: [{ type: "Ready", status: "True", reason: "Available" }],
    });
    const first = object("team-a", running(1.1));
    const handlers: ((event: InformerEvent<KubernetesObject>) => void)[] = [];
    let walks = 0;
    registerOperatorMetrics(registry, {
      kinds: [
        {
          kind: "GpuVm",
          list: () => {
            walks++;
            return [first];
          },
          on: (handler) => {
            handlers.push(handler);
            return () => undefined;
          },
        },
      ],
      accounts: () => [],
      logger,
    });
    const emit = (event: InformerEvent<KubernetesObject>) => {
      for (const handler of handlers) handler(event);
    };
    const second = object("team-a", stalled("CredentialsInvalid"));
    emit({ type: "add", object: second });
    const gauge = (text: string, line: string) => text.split("\n").find((l) => l.startsWith(line));
    let text = await registry.metrics();
    expect(gauge(text, 'gpucloud_managed_resources{kind="GpuVm",ready="True"}')).toMatch(/ 1$/);
    expect(gauge(text, 'gpucloud_managed_resources{kind="GpuVm",ready="False"}')).toMatch(/ 1$/);
    expect(gauge(text, 'gpucloud_estimated_hourly_cost_dollars{namespace="team-a",kind="GpuVm"}')).toMatch(/ 1.1$/);

    // The stalled one becomes Ready and runs; the first one goes.
    const recovered = { ...second, status: running(2.2) } as KubernetesObject;
    emit({ type: "update", object: recovered, previous: second });
    emit({ type: "delete", object: first });
    text = await registry.metrics();
    expect(gauge(text, 'gpucloud_managed_resources{kind="GpuVm",ready="True"}')).toMatch(/ 1$/);
    expect(gauge(text, 'gpucloud_managed_resources{kind="GpuVm",ready="False"}')).toMatch(/ 0$/);
    expect(gauge(text, 'gpucloud_estimated_hourly_cost_dollars{namespace="team-a",kind="GpuVm"}')).toMatch(/ 2.2$/);
    expect(text).not.toContain('reason="CredentialsInvalid"');
    expect(gauge(text, 'gpucloud_managed_resource_conditions{namespace="team-a",kind="GpuVm",type="Ready"')).toMatch(
      /status="True",reason="Available"} 1$/,
    );

    // A metadata-only change (a finalizer) hands the same status over: the counts stay as they are.
    const finalized = { ...recovered, metadata: { ...recovered.metadata, finalizers: ["x"] } } as KubernetesObject;
    emit({ type: "update", object: finalized, previous: recovered });
    text = await registry.metrics();
    expect(gauge(text, 'gpucloud_managed_resources{kind="GpuVm",ready="True"}')).toMatch(/ 1$/);
    expect(gauge(text, 'gpucloud_estimated_hourly_cost_dollars{namespace="team-a",kind="GpuVm"}')).toMatch(/ 2.2$/);

    emit({ type: "delete", object: finalized });
    text = await registry.metrics();
    expect(text).not.toContain("gpucloud_estimated_hourly_cost_dollars{");
    expect(text).not.toContain("gpucloud_managed_resource_conditions{");
    expect(walks).toBe(1);
  });

  it("reports the age of the oldest operation in flight, and 0 when none is", async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const now = 10_000_000;
    metrics.observeCloudOperations(() => cloudOperationsSample([fakeAccount({ oldestSince: now - 1_860_000 })], now));
    const text = await metrics.text();
    expect(text).toContain('gpucloud_operations_oldest_age_seconds{family="vm"} 1860');
    expect(text).toContain('gpucloud_operations_oldest_age_seconds{family="disk"} 0');
    expect(text).toContain('gpucloud_operations_in_flight{family="vm"} 1');
  });

  it("reports GPU usage in GPU-seconds, Prometheus' base unit", async () => {
    const registry = new Registry();
    registerOperatorMetrics(registry, {
      kinds: [],
      accounts: () => [fakeAccount({ gpuHours: 1.5 })],
      logger,
    });
    await registry.metrics(); // starts the background refresh
    await new Promise((resolve) => setImmediate(resolve));
    expect(await registry.metrics()).toContain(
      `gpucloud_usage_gpu_seconds{project="p-1",period="last_complete_day",date="${lastCompleteUsageDay(Date.now())}"} 5400`,
    );
  });
});
