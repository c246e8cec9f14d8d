// usage: GPU-hours and cost at the catalogue's prices, grouped, with totals, CSV and JSON; the days the daily
// refresh has not published yet are said on stderr. Two VMs run on a manual clock for two and a half days.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCloudClient } from "../../../src/cloud/client.ts";
import { createManualClock } from "../../../src/simulator/index.ts";
import { type Cli, startCli } from "./harness.ts";

const SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey test@example";
const HOUR = 3_600_000;
let cli: Cli;
const run = (argv: string[]) => cli.run(argv, { env: { GPUCLOUD_API_KEY: cli.sim.apiKey } });

beforeAll(async () => {
  // From 2026-11-20 12:00 UTC: an a100-80gb.8x (8 × $1.81) and an l40s-48gb.2x (2 × $1.25) in two regions.
  const clock = createManualClock(Date.UTC(2026, 10, 20, 12, 0, 0));
  cli = await startCli({ clock });
  const p = cli.sim.projectId;
  const cloud = createCloudClient({
    baseUrl: cli.sim.url,
    credentials: { apiKey: cli.sim.apiKey },
    rateLimiter: false,
  });
  await cloud.vms.create(p, { name: "big", type: "a100-80gb.8x", location: "us-east1-a", ssh_public_key: SSH_KEY });
  await cloud.vms.create(p, {
    name: "small",
    type: "l40s-48gb.2x",
    location: "eu-iceland1-a",
    ssh_public_key: SSH_KEY,
  });
  clock.advance(0);
  clock.advance(2 * 24 * HOUR); // 2026-11-22 12:00: the 20th (12 h) and the 21st (24 h) are published
});
afterAll(async () => {
  await cli.close();
});

describe("usage", () => {
  it("one row per day, type and region by default, with cost and totals; today is said to be missing", async () => {
    const result = await run(["usage", "--from", "2026-11-01"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatchInlineSnapshot(`
      "DATE         TYPE           REGION        GPU-HOURS   $/GPU-HOUR      COST
      2026-11-20   a100-80gb.8x   us-east1          96.00        $1.81   $173.76
      2026-11-20   l40s-48gb.2x   eu-iceland1       24.00        $1.25    $30.00
      2026-11-21   a100-80gb.8x   us-east1         192.00        $1.81   $347.52
      2026-11-21   l40s-48gb.2x   eu-iceland1       48.00        $1.25    $60.00
      TOTAL                                        360.00                $611.28
      "
    `);
    expect(result.stderr).toBe("note: usage is refreshed once a day after midnight UTC: 2026-11-22 is not in yet\n");
  });

  it("grouped by type (with the price per GPU-hour), by day, by location", async () => {
    expect(
      (await run(["usage", "--from", "2026-11-20", "--to", "2026-11-21", "--group-by", "type"])).stdout,
    ).toMatchInlineSnapshot(`
      "TYPE           GPU-HOURS   $/GPU-HOUR      COST
      a100-80gb.8x      288.00        $1.81   $521.28
      l40s-48gb.2x       72.00        $1.25    $90.00
      TOTAL             360.00                $611.28
      "
    `);
    expect(
      (await run(["usage", "--from", "2026-11-20", "--to", "2026-11-21", "--group-by", "day"])).stdout,
    ).toMatchInlineSnapshot(`
      "DATE         GPU-HOURS      COST
      2026-11-20      120.00   $203.76
      2026-11-21      240.00   $407.52
      TOTAL           360.00   $611.28
      "
    `);
    const byRegion = await run([
      "usage",
      "--from",
      "2026-11-21",
      "--to",
      "2026-11-21",
      "--group-by",
      "location",
      "--no-headers",
    ]);
    expect(byRegion.stdout).toMatchInlineSnapshot(`
      "eu-iceland1    48.00    $60.00
      us-east1      192.00   $347.52
      "
    `);
    expect(byRegion.stderr).toBe("");
  });

  it("filters by type and region", async () => {
    const result = await run([
      "usage",
      "--from",
      "2026-11-20",
      "--to",
      "2026-11-21",
      "--type",
      "l40s-48gb.2x",
      "--group-by",
      "type",
    ]);
    expect(result.stdout).toContain("l40s-48gb.2x");
    expect(result.stdout).not.toContain("a100-80gb.8x");
    const region = await run([
      "usage",
      "--from",
      "2026-11-20",
      "--to",
      "2026-11-21",
      "--region",
      "us-east1",
      "--group-by",
      "location",
      "-o",
      "json",
    ]);
    expect(JSON.parse(region.stdout)).toMatchObject({ rows: [{ region: "us-east1", gpuHours: 288 }] });
  });

  it("--format csv: a header and one line per row, no totals; -o json: rows and totals", async () => {
    const csv = await run([
      "usage",
      "--from",
      "2026-11-20",
      "--to",
      "2026-11-21",
      "--group-by",
      "day,type",
      "--format",
      "csv",
    ]);
    expect(csv.stdout).toBe(
      [
        "date,type,gpu_hours,cost_usd",
        "2026-11-20,a100-80gb.8x,96,173.76",
        "2026-11-20,l40s-48gb.2x,24,30",
        "2026-11-21,a100-80gb.8x,192,347.52",
        "2026-11-21,l40s-48gb.2x,48,60",
        "",
      ].join("\n"),
    );
    const json = JSON.parse(
      (await run(["usage", "--from", "2026-11-20", "--to", "2026-11-21", "--group-by", "type", "-o", "json"])).stdout,
    );
    expect(json).toEqual({
      from: "2026-11-20",
      to: "2026-11-21",
      groupBy: ["type"],
      rows: [
        { type: "a100-80gb.8x", gpuHours: 288, costUsd: 521.28 },
        { type: "l40s-48gb.2x", gpuHours: 72, costUsd: 90 },
      ],
      total: { gpuHours: 360, costUsd: 611.28 },
    });
  });

  it("checks the dates and the group keys (exit 2)", async () => {
    expect(await run(["usage", "--from", "2026-13-01"])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("--from: expected a date YYYY-MM-DD, got '2026-13-01'"),
    });
    expect((await run(["usage", "--from", "2026-11-22", "--to", "2026-11-21"])).code).toBe(2);
    expect((await run(["usage", "--group-by", "week"])).code).toBe(2);
    expect((await run(["usage", "--format", "xml"])).code).toBe(2);
  });
});

describe("usage from a server that publishes the running day (the playground's simulator)", () => {
  it("shows today's GPU-hours so far, without saying that today is not in", async () => {
    const clock = createManualClock(Date.UTC(2026, 10, 20, 12, 0, 0));
    const live = await startCli({ clock, usagePublication: "live" });
    try {
      const cloud = createCloudClient({ baseUrl: live.sim.url, credentials: { apiKey: live.sim.apiKey } });
      await cloud.vms.create(live.sim.projectId, {
        name: "now",
        type: "a100-80gb.8x",
        location: "us-east1-a",
        ssh_public_key: SSH_KEY,
      });
      clock.advance(0);
      clock.advance(HOUR / 2);
      const result = await live.run(["usage", "--group-by", "type"], {
        env: { GPUCLOUD_API_KEY: live.sim.apiKey },
      });
      expect(result).toMatchObject({ code: 0, stderr: "" });
      expect(result.stdout).toMatch(/^a100-80gb\.8x +4\.00 /m);
    } finally {
      await live.close();
    }
  });
});
