// vms, disks, networks, firewall-rules and operations against the simulator: tables, lookups by name or id,
// changes with and without --wait (spinner on a terminal, plain lines otherwise), deletes, exit codes.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CloudClient, createCloudClient } from "../../../src/cloud/client.ts";
import type { Operation } from "../../../src/cloud/wire.ts";
import { type Cli, startCli, visible } from "./harness.ts";

const SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey test@example";
let cli: Cli;
let cloud: CloudClient;
let run: (argv: string[], options?: Parameters<Cli["run"]>[1]) => ReturnType<Cli["run"]>;
let project: string;

async function settled(operation: Operation): Promise<Operation> {
  for (;;) {
    const current = await cloud.operations.get(
      project,
      (operation.metadata.type || "vm") as "vm",
      operation.operation_id,
    );
    if (current.state !== "IN_PROGRESS") return current;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

beforeAll(async () => {
  cli = await startCli({ latencyMs: 60 });
  project = cli.sim.projectId;
  cloud = createCloudClient({ baseUrl: cli.sim.url, credentials: { apiKey: cli.sim.apiKey }, rateLimiter: false });
  run = (argv, options = {}) =>
    cli.run(argv, { ...options, env: { GPUCLOUD_API_KEY: cli.sim.apiKey, ...options.env } });
  await settled(
    await cloud.vms.create(project, {
      name: "trainer",
      type: "a100-80gb.8x",
      location: "us-east1-a",
      ssh_public_key: SSH_KEY,
    }),
  );
  await settled(
    await cloud.vms.create(project, {
      name: "notebook",
      type: "a40.1x",
      location: "eu-iceland1-a",
      ssh_public_key: SSH_KEY,
    }),
  );
  await settled(await cloud.disks.create(project, { name: "datasets", size: "1TiB", location: "us-east1-a" }));
  await settled(await cloud.networks.create(project, { name: "lab", cidr: "10.20.0.0/16" }));
  const [lab] = (await cloud.networks.list(project)).filter((n) => n.name === "lab");
  await settled(
    await cloud.firewallRules.create(project, {
      name: "ssh",
      vpc_network_id: lab?.id ?? "",
      direction: "ingress",
      action: "allow",
      protocols: ["tcp"],
      sources: [{ cidr: "0.0.0.0/0" }],
      destination_ports: ["22"],
    }),
  );
});
afterAll(async () => {
  await cli.close();
});

const stable = (text: string) => text.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<id>");

describe("vms", () => {
  it("list: a table, filters, --no-headers, -o json", async () => {
    const table = await run(["vms", "list"]);
    expect(table.stdout.split("\n")[0]).toBe(
      "NAME       ID                                     TYPE           STATE     LOCATION        PUBLIC-IP    $/HOUR   AGE",
    );
    expect((await run(["vms", "list", "--type", "a40.1x", "--no-headers"])).stdout).toMatch(
      /^notebook +\S+ +a40\.1x +RUNNING/,
    );
    expect((await run(["vms", "list", "--state", "stopped"])).stdout).toBe(
      "NAME   ID   TYPE   STATE   LOCATION   PUBLIC-IP   $/HOUR   AGE\n",
    );
    const json = JSON.parse((await run(["vms", "list", "-o", "json"])).stdout) as { name: string; state: string }[];
    expect(json.map((v) => v.name).sort()).toEqual(["notebook", "trainer"]);
    expect(json[0]).toHaveProperty("network_interfaces");
  });

  it("get: by name or id; an unknown one is exit 4", async () => {
    const byName = await run(["vms", "get", "trainer"]);
    expect(stable(byName.stdout)).toMatch(
      /^Name: {8}trainer\nID: {10}<id>\nType: {8}a100-80gb\.8x\nState: {7}RUNNING\n/,
    );
    expect(byName.stdout).toContain("Price:       $14.48/hour\n");
    const id = (JSON.parse((await run(["vms", "get", "trainer", "-o", "json"])).stdout) as { id: string }).id;
    expect((await run(["vms", "get", id, "-o", "yaml"])).stdout).toContain("name: trainer\n");
    const missing = await run(["vms", "get", "ghost"]);
    expect(missing).toMatchObject({
      code: 4,
      stdout: "",
      stderr: "error: no VM named or with id 'ghost' in this project: 'gpuvmctl vms list' lists them\n",
    });
  });

  it("stop --wait off a terminal: one line per state, then the result", async () => {
    const result = await run(["vms", "stop", "notebook", "--wait"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe("");
    expect(result.stderr).toMatch(
      /^operation \S+: STOP vm notebook {2}IN_PROGRESS {2}\d+\.\ds\noperation \S+: SUCCEEDED after \d+\.\ds\n$/,
    );
    expect((await run(["vms", "get", "notebook", "-o", "json"])).stdout).toContain('"state": "STATE_STOPPED"');
  });

  it("start --wait on a terminal: a spinner with the state and elapsed time, then a check mark", async () => {
    const result = await run(["vms", "start", "notebook", "--wait"], { stderrTty: true });
    expect(result.code).toBe(0);
    expect(result.stderr).toContain("\r\u001b[2K");
    expect(result.stderr).toMatch(/⠋.* START vm notebook {2}IN_PROGRESS {2}\d+\.\ds/);
    expect(visible(result.stderr)).toMatch(/\r⎋\[2K⎋\[32m✓⎋\[0m START vm notebook {2}SUCCEEDED {2}\d+\.\ds\n$/);
    const plain = await run(["vms", "reset", "notebook", "--wait"], { stderrTty: true, env: { NO_COLOR: "1" } });
    expect(visible(plain.stderr)).toMatch(/\r⎋\[2K✓ RESET vm notebook {2}SUCCEEDED {2}\d+\.\ds\n$/);
  });

  it("without --wait: the operation and how to follow it; -o json prints the operation", async () => {
    const stop = await run(["vms", "stop", "notebook"]);
    expect(stop.stdout).toMatch(
      /^STOP vm notebook: operation (\S+) IN_PROGRESS \(follow it: gpuvmctl operations wait \1\)\n$/,
    );
    const id = /operation (\S+) IN_PROGRESS/.exec(stop.stdout)?.[1] ?? "";
    const waited = await run(["operations", "wait", id, "-o", "json"]);
    expect(waited.code).toBe(0);
    expect(JSON.parse(waited.stdout)).toMatchObject({ operation_id: id, state: "SUCCEEDED" });
    const conflict = await run(["vms", "stop", "notebook"]);
    expect(conflict).toMatchObject({
      code: 5,
      stderr: "error: action STOP is not allowed while the VM is STATE_STOPPED\n",
    });
  });

  it("delete: needs --yes off a terminal (exit 2), then terminates and waits", async () => {
    const refused = await run(["vms", "delete", "notebook"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("needs --yes when there is no terminal to ask");
    const deleted = await run(["vms", "delete", "notebook", "--yes", "--wait"]);
    expect(deleted.code).toBe(0);
    expect(deleted.stderr).toMatch(/SUCCEEDED after/);
    expect((await run(["vms", "get", "notebook"])).code).toBe(4);
  });

  it("a failed operation is exit 5 with the cloud's code", async () => {
    await run(["vms", "stop", "trainer", "--wait"]);
    await fetch(`${cli.sim.adminUrl}/capacity`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ "us-east1-a": { "a100-80gb.8x": { capacity: 0 } } }),
    });
    const start = await run(["vms", "start", "trainer", "--wait"]);
    expect(start.code).toBe(5);
    expect(start.stderr).toMatch(/error: operation \S+ \(START vm trainer\) FAILED: out_of_stock: /);
  });
});

describe("disks, networks, firewall rules", () => {
  it("get by name or id; an unknown one is exit 4 (tables: tables.test.ts)", async () => {
    const rule = JSON.parse((await run(["firewall-rules", "get", "ssh", "-o", "json"])).stdout) as { id: string };
    expect((await run(["firewall-rules", "get", rule.id, "-o", "yaml"])).stdout).toContain("name: ssh\n");
    expect((await run(["networks", "get", "lab"])).stdout).toContain("CIDR:     10.20.0.0/16\n");
    expect(await run(["disks", "get", "nope"])).toMatchObject({
      code: 4,
      stderr: "error: no disk named or with id 'nope' in this project: 'gpuvmctl disks list' lists them\n",
    });
  });

  it("disks resize: checks the size (exit 2), grows, refuses to shrink (exit 5)", async () => {
    expect(await run(["disks", "resize", "datasets", "2TB"])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("size '2TB': expected a whole number followed by GiB or TiB"),
    });
    const grown = await run(["disks", "resize", "datasets", "2TiB", "--wait"]);
    expect(grown.code).toBe(0);
    expect((await run(["disks", "get", "datasets", "-o", "json"])).stdout).toContain('"size": "2TiB"');
    // Shrinking is refused by the API at once (400), before any operation.
    expect(await run(["disks", "resize", "datasets", "1TiB", "--wait"])).toMatchObject({
      code: 5,
      stderr: expect.stringMatching(/^error: .*grow/),
    });
  });

  it("deletes a rule, then its network, then the disk", async () => {
    expect((await run(["firewall-rules", "delete", "ssh", "--yes", "--wait"])).code).toBe(0);
    expect((await run(["networks", "delete", "lab", "-y", "-w"])).code).toBe(0);
    expect((await run(["disks", "delete", "datasets", "--yes", "--wait"])).code).toBe(0);
    expect((await run(["networks", "list", "--no-headers"])).stdout).not.toContain("lab");
  });
});

describe("operations", () => {
  it("list, get (finding the family), wait, and unknown ids", async () => {
    const listed = await run(["operations", "list", "--family", "disk", "--no-headers"]);
    expect(
      listed.stdout
        .split("\n")
        .filter(Boolean)
        .map((line) => line.split(/ +/)[1]),
    ).toEqual(["CREATE", "RESIZE", "DELETE"]);
    const id = listed.stdout.split(/ +/)[0] ?? "";
    const got = await run(["operations", "get", id]);
    expect(stable(got.stdout)).toMatch(
      /^ID: {9}<id>\nOperation: {2}CREATE\nResource: {3}disk <id>\nState: {6}SUCCEEDED\n/,
    );
    const waited = await run(["operations", "wait", id, "--family", "disk"]);
    expect(waited).toMatchObject({ code: 0, stderr: expect.stringMatching(/: SUCCEEDED after /) });
    const missing = await run(["operations", "get", "00000000-0000-4000-8000-000000000000"]);
    expect(missing).toMatchObject({ code: 4, stderr: expect.stringContaining("in any family") });
    expect((await run(["operations", "list", "--family", "gpu"])).code).toBe(2);
  });
});
