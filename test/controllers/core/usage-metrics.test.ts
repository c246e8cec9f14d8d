// gpucloud_usage_gpu_seconds against the simulator's daily usage refresh (the spec: "refreshed once a day shortly
// after midnight UTC"): the gauge shows the last complete day, never a running day the server does not have,
// and the running day too where a server reports it.
import pino from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type CloudClient, createCloudClient } from "../../../src/cloud/client.ts";
import type { UsageItem } from "../../../src/cloud/wire.ts";
import { lastCompleteUsageDay, registerOperatorMetrics } from "../../../src/controllers/core/metrics.ts";
import {
  createManualClock,
  type ManualClock,
  type RunningSimulator,
  startSimulator,
} from "../../../src/simulator/index.ts";

const HOUR = 3_600_000;
let sim: RunningSimulator;
let clock: ManualClock;
let cloud: CloudClient;

beforeAll(async () => {
  clock = createManualClock(Date.UTC(2026, 10, 21, 12, 0, 0));
  sim = await startSimulator({ port: 0, latencyMs: 0, rateLimit: false, clock });
  cloud = createCloudClient({ baseUrl: sim.url, credentials: { apiKey: sim.apiKey }, rateLimiter: false });
});
afterAll(async () => {
  await sim.close();
});

/** The usage gauge over `client`; `scrape()` collects once and waits for the read that collect started, if any. */
function usageGauge(client: Pick<CloudClient, "usage">, projectId: string) {
  let started = 0;
  let settled = 0;
  const counting = {
    usage: {
      list: (...args: Parameters<CloudClient["usage"]["list"]>) => {
        started++;
        return client.usage.list(...args).finally(() => {
          settled++;
        });
      },
    },
  };
  const registry = new Registry();
  registerOperatorMetrics(registry, {
    kinds: [],
    accounts: () => [{ projectId, client: counting as unknown as CloudClient, inFlight: () => 0 }],
    logger: pino({ level: "silent" }),
    now: () => clock.now(),
  });
  const samples = async () => {
    const metric = await registry.getSingleMetric("gpucloud_usage_gpu_seconds")?.get();
    // In GPU-hours, as the cloud reports them (the metric is in seconds, × 3600).
    return Object.fromEntries(
      (metric?.values ?? []).map((v) => [
        `${v.labels.period}/${v.labels.date}`,
        Math.round((v.value / 3600) * 1e6) / 1e6,
      ]),
    );
  };
  return {
    reads: () => started,
    async scrape(): Promise<Record<string, number>> {
      await samples(); // collect: starts a read when one is due
      await vi.waitFor(() => expect(settled).toBe(started));
      await new Promise(setImmediate); // the gauge's own handler runs after the read settles
      return samples();
    },
  };
}

describe("usage gauge", () => {
  it("names the last complete day: yesterday from 01:00 UTC, the day before until then", () => {
    expect(lastCompleteUsageDay(Date.UTC(2026, 10, 22, 0, 59))).toBe("2026-11-20");
    expect(lastCompleteUsageDay(Date.UTC(2026, 10, 22, 1, 0))).toBe("2026-11-21");
    expect(lastCompleteUsageDay(Date.UTC(2026, 10, 22, 23, 59))).toBe("2026-11-21");
  });

  it("reads the last complete day after the daily refresh, and no running day the server does not have", async () => {
    // Two GPUs running from 12:00 UTC on 2026-11-21.
    await cloud.vms.create(sim.projectId, {
      name: "usage-gauge",
      type: "a100.2x",
      location: "us-east1-a",
      ssh_public_key: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey test@example",
    });
    clock.advance(0); // latency 0: the create settles at once on the manual clock
    const [vm] = (await cloud.vms.list(sim.projectId, { names: ["usage-gauge"] })).items;
    expect(vm?.state).toBe("STATE_RUNNING");
    const gauge = usageGauge(cloud, sim.projectId);
    clock.advance(6 * HOUR); // 18:00 the same day: nothing of today is published
    expect(await gauge.scrape()).toEqual({ "last_complete_day/2026-11-20": 0 });
    clock.advance(10 * 60_000); // read hourly, not at every scrape
    expect(await gauge.scrape()).toEqual({ "last_complete_day/2026-11-20": 0 });
    expect(gauge.reads()).toBe(1);
    clock.advance(6 * HOUR + 20 * 60_000); // 00:30 the next day: refreshed at 00:15, complete from 01:00
    expect(await gauge.scrape()).toEqual({ "last_complete_day/2026-11-20": 0 });
    expect(gauge.reads()).toBe(2);
    clock.advance(HOUR); // 01:30: the day change is read at once, not after the hourly interval
    expect(await gauge.scrape()).toEqual({ "last_complete_day/2026-11-21": 24 }); // 2 GPUs × 12 h
    clock.advance(24 * HOUR); // 01:30 a day later: a whole day of 2 GPUs
    expect(await gauge.scrape()).toEqual({ "last_complete_day/2026-11-22": 48 });
  });

  it("also shows the running day where the server reports it", async () => {
    const today = new Date(clock.now()).toISOString().slice(0, 10);
    const yesterday = lastCompleteUsageDay(clock.now());
    const item = (date: string, quantity: number): UsageItem => ({
      billable_metric: "gpu-hours",
      date,
      project_id: "p",
      quantity,
      region: "us-east1",
      reservation_id: "",
      resource_type: "a40.1x",
    });
    const eager = { usage: { list: async () => [item(yesterday, 10), item(yesterday, 2.5), item(today, 1.25)] } };
    const gauge = usageGauge(eager as unknown as CloudClient, "p");
    expect(await gauge.scrape()).toEqual({ [`last_complete_day/${yesterday}`]: 12.5, [`current_day/${today}`]: 1.25 });
  });
});
