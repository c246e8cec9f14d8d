// The resource tables and details, on a manual clock (ages are fixed) with ids masked to the same width:
// alignment, right-aligned numbers, dashes for empty cells.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCloudClient } from "../../../src/cloud/client.ts";
import { createManualClock } from "../../../src/simulator/index.ts";
import { type Cli, startCli } from "./harness.ts";

const SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey test@example";
let cli: Cli;
const run = (argv: string[]) => cli.run(argv, { env: { GPUCLOUD_API_KEY: cli.sim.apiKey } });
const masked = (text: string) =>
  text.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx");

beforeAll(async () => {
  const clock = createManualClock(Date.UTC(2026, 10, 21, 12, 0, 0));
  cli = await startCli({ clock, latencyMs: 1000 });
  const p = cli.sim.projectId;
  const cloud = createCloudClient({
    baseUrl: cli.sim.url,
    credentials: { apiKey: cli.sim.apiKey },
    rateLimiter: false,
  });
  await cloud.vms.create(p, { name: "trainer", type: "a100-80gb.8x", location: "us-east1-a", ssh_public_key: SSH_KEY });
  await cloud.disks.create(p, { name: "datasets", size: "1TiB", location: "us-east1-a" });
  await cloud.networks.create(p, { name: "lab", cidr: "10.20.0.0/16" });
  clock.advance(1000);
  const lab = (await cloud.networks.list(p)).find((n) => n.name === "lab");
  await cloud.firewallRules.create(p, {
    name: "ssh",
    vpc_network_id: lab?.id ?? "",
    direction: "ingress",
    action: "allow",
    protocols: ["tcp", "udp"],
    sources: [{ cidr: "0.0.0.0/0" }],
    destination_ports: ["22", "8000-9000"],
  });
  await cloud.vms.create(p, { name: "notebook", type: "a40.1x", location: "eu-iceland1-a", ssh_public_key: SSH_KEY });
  clock.advance(90 * 60_000);
});
afterAll(async () => {
  await cli.close();
});

describe("tables", () => {
  it("vms list and get", async () => {
    expect(masked((await run(["vms", "list"])).stdout)).toMatchInlineSnapshot(`
      "NAME       ID                                     TYPE           STATE     LOCATION        PUBLIC-IP    $/HOUR   AGE
      trainer    xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx   a100-80gb.8x   RUNNING   us-east1-a      198.18.0.3   $14.48   90m
      notebook   xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx   a40.1x         RUNNING   eu-iceland1-a   198.18.0.5    $1.10   90m
      "
    `);
    expect(masked((await run(["vms", "get", "notebook"])).stdout)).toMatchInlineSnapshot(`
      "Name:        notebook
      ID:          xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
      Type:        a40.1x
      State:       RUNNING
      Location:    eu-iceland1-a
      Public IP:   198.18.0.5
      Private IP:  10.0.0.5
      SSH:         ubuntu@198.18.0.5
      Disks:       notebook-boot (128GiB, os)
      Price:       $1.10/hour
      Created:     2026-11-21T12:00:01Z
      "
    `);
  });

  it("disks, networks, firewall rules", async () => {
    expect(masked((await run(["disks", "list"])).stdout)).toMatchInlineSnapshot(`
      "NAME       ID                                     TYPE             SIZE   LOCATION     ATTACHED-TO   AGE
      datasets   xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx   persistent-ssd   1TiB   us-east1-a   -             90m
      "
    `);
    expect(masked((await run(["disks", "get", "datasets"])).stdout)).toMatchInlineSnapshot(`
      "Name:         datasets
      ID:           xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
      Type:         persistent-ssd
      Size:         1TiB
      Location:     us-east1-a
      Block size:   4096
      Attached to:  -
      Created:      2026-11-21T12:00:01Z
      "
    `);
    expect(masked((await run(["networks", "list"])).stdout)).toMatchInlineSnapshot(`
      "NAME      ID                                     CIDR           SUBNETS
      default   xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx   10.0.0.0/16          1
      lab       xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx   10.20.0.0/16         1
      "
    `);
    expect(masked((await run(["firewall-rules", "list"])).stdout)).toMatchInlineSnapshot(`
      "NAME   ID                                     DIRECTION   ACTION   PROTOCOLS   SOURCES     PORTS          STATE
      ssh    xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx   ingress     allow    tcp,udp     0.0.0.0/0   22,8000-9000   active
      "
    `);
    expect(masked((await run(["firewall-rules", "get", "ssh"])).stdout)).toMatchInlineSnapshot(`
      "Name:               ssh
      ID:                 xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
      Network:            xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
      Direction:          ingress
      Action:             allow
      Protocols:          tcp, udp
      Sources:            0.0.0.0/0
      Source ports:       all
      Destinations:       any
      Destination ports:  22,8000-9000
      State:              active
      "
    `);
  });

  it("operations list", async () => {
    expect(masked((await run(["operations", "list", "--family", "vm"])).stdout)).toMatchInlineSnapshot(`
      "ID                                     OPERATION   RESOURCE                               STATE       STARTED                COMPLETED
      xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx   CREATE      xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx   SUCCEEDED   2026-11-21T12:00:00Z   2026-11-21T12:00:01Z
      xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx   CREATE      xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx   SUCCEEDED   2026-11-21T12:00:01Z   2026-11-21T12:00:02Z
      "
    `);
  });
});
