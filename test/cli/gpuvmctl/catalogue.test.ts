// Tenancy and catalogue commands against the simulator: tables (snapshots), -o json|yaml, --no-headers,
// suggest's choice and order, usage errors.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { type Cli, startCli } from "./harness.ts";

let cli: Cli;
let run: (argv: string[]) => ReturnType<Cli["run"]>;

beforeAll(async () => {
  cli = await startCli({
    // Only some capacity, so that availability and suggest have something to choose.
    capacity: {
      "us-east1-a": { "a100-80gb.8x": 0, "a40.8x": 0 },
      "eu-iceland1-a": { "a100-80gb.8x": 0 },
      "us-northcentral1-a": { "l40s-48gb.8x": 0 },
    },
  });
  run = (argv) => cli.run(argv, { env: { GPUCLOUD_API_KEY: cli.sim.apiKey } });
});
afterAll(async () => {
  await cli.close();
});

describe("tenancy", () => {
  it("orgs, projects and billing", async () => {
    expect((await run(["orgs"])).stdout).toMatchInlineSnapshot(`
      "ID                                     NAME            PAYMENT-CUSTOMER
      5f2b4c1d-0000-4000-8000-000000000001   Simulated Org   cus_sim_0001
      "
    `);
    expect((await run(["projects"])).stdout).toMatchInlineSnapshot(`
      "ID                                     NAME      ORGANIZATION    DEFAULT
      6a3c5d2e-0000-4000-8000-000000000001   default   Simulated Org   *
      "
    `);
    const billing = await run(["billing"]);
    expect(billing.stdout).toMatch(
      /^Project: {9}default \(6a3c5d2e-0000-4000-8000-000000000001\)\nOrganization: {4}Simulated Org \(5f2b4c1d-0000-4000-8000-000000000001\)\nPayment method: {2}valid\nBilling link: {4}https:\/\/billing\.example\.invalid\/session\/\S+\n$/,
    );
    expect(JSON.parse((await run(["billing", "-o", "json"])).stdout)).toMatchObject({ hasValidPaymentMethod: true });
  });

  it("projects use: sets the default, refuses an unknown project with exit 4", async () => {
    const used = await run(["projects", "use", cli.sim.projectId]);
    expect(used).toMatchObject({ code: 0, stdout: `Default project: ${cli.sim.projectId} (default).\n` });
    const unknown = await run(["projects", "use", "nope"]);
    expect(unknown).toMatchObject({
      code: 4,
      stderr: "error: no project 'nope' among the 1 you can see: 'gpuvmctl projects' lists them\n",
    });
  });
});

describe("catalogue", () => {
  it("locations and images", async () => {
    expect((await run(["locations"])).stdout).toMatchInlineSnapshot(`
      "LOCATION
      us-east1-a
      us-southcentral1-a
      eu-iceland1-a
      us-northcentral1-a
      "
    `);
    expect((await run(["locations", "-o", "json"])).stdout).toMatchInlineSnapshot(`
      "[
        "us-east1-a",
        "us-southcentral1-a",
        "eu-iceland1-a",
        "us-northcentral1-a"
      ]
      "
    `);
    const images = await run(["images", "--no-headers"]);
    expect(images.stdout.split("\n")[0]).toMatch(/^ubuntu/);
  });

  it("types: GPUs, memory and the catalogue's price per hour", async () => {
    expect((await run(["types"])).stdout).toMatchInlineSnapshot(`
      "TYPE            GPUS   GPU                     GPU-MEMORY   VCPU   MEMORY   LOCAL-DISK   $/HOUR
      a100.1x            1   NVIDIA A100 40GB PCIe         40GB     12    120GB        960GB    $1.60
      a100.2x            2   NVIDIA A100 40GB PCIe         40GB     24    240GB       1920GB    $3.20
      a100.4x            4   NVIDIA A100 40GB PCIe         40GB     48    480GB       3840GB    $6.40
      a100.8x            8   NVIDIA A100 40GB PCIe         40GB     96    960GB       7680GB   $12.80
      a100-80gb.1x       1   NVIDIA A100 80GB PCIe         80GB     12    120GB        960GB    $1.81
      a100-80gb.2x       2   NVIDIA A100 80GB PCIe         80GB     24    240GB       1920GB    $3.62
      a100-80gb.4x       4   NVIDIA A100 80GB PCIe         80GB     48    480GB       3840GB    $7.24
      a100-80gb.8x       8   NVIDIA A100 80GB PCIe         80GB     96    960GB       7680GB   $14.48
      a40.1x             1   NVIDIA A40 48GB PCIe          48GB      6     60GB        960GB    $1.10
      a40.2x             2   NVIDIA A40 48GB PCIe          48GB     12    120GB       1920GB    $2.20
      a40.4x             4   NVIDIA A40 48GB PCIe          48GB     24    240GB       3840GB    $4.40
      a40.8x             8   NVIDIA A40 48GB PCIe          48GB     48    480GB       7680GB    $8.80
      l40s-48gb.1x       1   NVIDIA L40S 48GB PCIe         48GB      8    147GB         none    $1.25
      l40s-48gb.2x       2   NVIDIA L40S 48GB PCIe         48GB     16    294GB         none    $2.50
      l40s-48gb.4x       4   NVIDIA L40S 48GB PCIe         48GB     32    588GB         none    $5.00
      l40s-48gb.8x       8   NVIDIA L40S 48GB PCIe         48GB     64   1176GB         none   $10.00
      l40s-48gb.10x     10   NVIDIA L40S 48GB PCIe         48GB     80   1470GB         none   $12.50
      "
    `);
    const yaml = parse((await run(["types", "-o", "yaml"])).stdout) as { type: string; hourlyPriceUsd: number }[];
    expect(yaml.find((t) => t.type === "a100-80gb.8x")).toMatchObject({
      gpus: 8,
      gpuMemoryGb: 80,
      hourlyPriceUsd: 14.48,
    });
  });

  it("availability, filtered by type, location and capacity", async () => {
    expect((await run(["availability", "--type", "a100-80gb.8x"])).stdout).toMatchInlineSnapshot(`
      "TYPE           LOCATION             AVAILABLE
      a100-80gb.8x   us-east1-a           no
      a100-80gb.8x   us-southcentral1-a   yes
      a100-80gb.8x   eu-iceland1-a        no
      a100-80gb.8x   us-northcentral1-a   yes
      "
    `);
    expect(
      (await run(["availability", "--location", "us-east1-a", "--available", "--no-headers"])).stdout,
    ).not.toContain("a100-80gb.8x");
  });

  it("suggest: available types with at least N GPUs, cheapest first, and the fragment to paste", async () => {
    const eight = await run(["suggest", "--gpus", "8"]);
    expect(eight.stdout).toMatchInlineSnapshot(`
      "TYPE            GPUS   GPU                     $/HOUR   LOCATIONS
      a40.8x             8   NVIDIA A40 48GB PCIe     $8.80   eu-iceland1-a,us-northcentral1-a,us-southcentral1-a
      l40s-48gb.8x       8   NVIDIA L40S 48GB PCIe   $10.00   eu-iceland1-a,us-east1-a,us-southcentral1-a
      l40s-48gb.10x     10   NVIDIA L40S 48GB PCIe   $12.50   eu-iceland1-a,us-east1-a,us-northcentral1-a,us-southcentral1-a
      a100.8x            8   NVIDIA A100 40GB PCIe   $12.80   eu-iceland1-a,us-east1-a,us-northcentral1-a,us-southcentral1-a
      a100-80gb.8x       8   NVIDIA A100 80GB PCIe   $14.48   us-northcentral1-a,us-southcentral1-a
      "
    `);
    expect(eight.stderr).toMatchInlineSnapshot(`
      "
      # cheapest match, for a GpuVm spec:
      type: a40.8x
      locations: [eu-iceland1-a, us-northcentral1-a, us-southcentral1-a]
      # or: gpuvmctl manifest vm <name> --type a40.8x --location eu-iceland1-a,us-northcentral1-a,us-southcentral1-a
      "
    `);
    const model = await run(["suggest", "--gpus", "4", "--gpu-model", "a100-80gb", "-o", "json"]);
    expect((JSON.parse(model.stdout) as { type: string }[]).map((s) => s.type)).toEqual([
      "a100-80gb.4x",
      "a100-80gb.8x",
    ]);
    const cheap = await run(["suggest", "--gpus", "2", "--max-price", "2.5", "--no-headers"]);
    expect(cheap.stdout).toMatchInlineSnapshot(`
      "a40.2x         2   NVIDIA A40 48GB PCIe    $2.20   eu-iceland1-a,us-east1-a,us-northcentral1-a,us-southcentral1-a
      l40s-48gb.2x   2   NVIDIA L40S 48GB PCIe   $2.50   eu-iceland1-a,us-east1-a,us-northcentral1-a,us-southcentral1-a
      "
    `);
    const prefix = await run([
      "suggest",
      "--gpus",
      "10",
      "--gpu-model",
      "l40s",
      "--location",
      "us-east1-a",
      "--no-headers",
    ]);
    expect(prefix.stdout).toBe("l40s-48gb.10x   10   NVIDIA L40S 48GB PCIe   $12.50   us-east1-a\n");
    const none = await run(["suggest", "--gpus", "8", "--max-price", "1"]);
    expect(none).toMatchObject({ code: 0, stdout: "TYPE   GPUS   GPU   $/HOUR   LOCATIONS\n" });
    expect(none.stderr).toContain("nothing available matches");
  });

  it("suggest: usage errors are exit 2", async () => {
    expect(await run(["suggest"])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("--gpus <n> is required"),
    });
    expect((await run(["suggest", "--gpus", "two"])).code).toBe(2);
    const model = await run(["suggest", "--gpus", "1", "--gpu-model", "h100"]);
    expect(model).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("'h100' is none of a100, a100-80gb, a40, l40s-48gb"),
    });
  });
});
