// The journeys against a cloud that serves only the spec's endpoints (simulator profile seed-only): everything
// reaches Ready, the VM and the disk delete cleanly, the network and the rule say NotSupported and let go with
// deletionPolicy Orphan. And on both profiles: while operations are in flight, the operator makes at most one
// request per poll interval per family (counted by the simulator, /_sim/requests).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  conditionSummary,
  eventually,
  listObjects,
  type Playground,
  sleep,
  startPlayground,
  waitAllReady,
} from "./harness.ts";

/** The playground polls operations every latency / 2: one second here. */
const LATENCY_MS = 2000;
const POLL_MS = 1000;
/** While measuring, operations take this long, so that every family waits for the whole window. */
const SLOW_LATENCY_MS = 30_000;
const WINDOW_MS = 12_000;

const FAMILIES = ["vm", "disk", "network", "firewall-rule"] as const;
type Family = (typeof FAMILIES)[number] | "other";

function familyOf(routeKey: string): Family {
  if (routeKey.includes("/vpc/firewall-rules")) return "firewall-rule";
  if (routeKey.includes("/vpc/networks")) return "network";
  if (routeKey.includes("/disks")) return "disk";
  if (routeKey.includes("/vms")) return "vm";
  return "other";
}

function adminUrl(playground: Playground): string {
  return playground.cloud.url.replace(/\/v0\.1$/, "/_sim");
}

async function admin(playground: Playground, method: string, path: string, body?: unknown): Promise<unknown> {
  const response = await fetch(`${adminUrl(playground)}${path}`, {
    method,
    ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
  });
  if (!response.ok) throw new Error(`${method} /_sim${path}: HTTP ${response.status} ${await response.text()}`);
  return response.json();
}

interface CloudState {
  vms: { id: string; name: string }[];
  disks: { id: string; name: string; size: string }[];
  networks: { id: string; name: string }[];
  firewallRules: { id: string; name: string }[];
}
const cloudState = async (playground: Playground) => (await admin(playground, "GET", "/state")) as CloudState;

function readyReason(object: { status?: { conditions?: { type: string; reason?: string }[] } } | undefined) {
  return object?.status?.conditions?.find((condition) => condition.type === "Ready")?.reason;
}

async function waitForReason(playground: Playground, plural: string, name: string, reasons: string[]) {
  let last = "";
  await eventually(
    `${plural}/${name} to show ${reasons.join(" or ")}`,
    async () => {
      const object = (await listObjects(playground, plural)).find((o) => o.metadata.name === name);
      last = object === undefined ? "(gone)" : conditionSummary([object]);
      return reasons.includes(readyReason(object) ?? "") ? object : undefined;
    },
    90_000,
  ).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}; last seen: ${last}`, { cause: error });
  });
}

async function createObject(playground: Playground, plural: string, kind: string, name: string, spec: object) {
  await playground.customObjects.createNamespacedCustomObject({
    group: "gpucloud.dev",
    version: "v1alpha1",
    namespace: "default",
    plural,
    body: { apiVersion: "gpucloud.dev/v1alpha1", kind, metadata: { name, namespace: "default" }, spec },
  });
}

/**
 * Put every family to waiting on a slow operation (VM STOP, disk RESIZE, network and rule CREATE), then count
 * the simulator's requests per family over WINDOW_MS. Returns the counts per minute.
 */
async function measureWhileWaiting(playground: Playground): Promise<Record<Family, number>> {
  await admin(playground, "PUT", "/settings", { latency_ms: SLOW_LATENCY_MS });
  await playground.kubectl("patch", "gvm/trainer", "--type=merge", "-p", '{"spec":{"powerState":"Stopped"}}');
  await playground.kubectl("patch", "gpudisk/datasets", "--type=merge", "-p", '{"spec":{"size":"2TiB"}}');
  await createObject(playground, "gpunetworks", "GpuNetwork", "waiting-net", { cidr: "10.30.0.0/16" });
  await createObject(playground, "gpufirewallrules", "GpuFirewallRule", "waiting-rule", {
    networkRef: { name: "training-net" },
    direction: "ingress",
    action: "allow",
    protocols: ["tcp"],
    sources: [{ cidr: "10.0.0.0/8" }],
    destinationPorts: ["443"],
  });
  const startedAt = Date.now();
  const waiting = ["WaitingForOperation", "Updating", "Creating"];
  await waitForReason(playground, "gpuvms", "trainer", waiting);
  await waitForReason(playground, "gpudisks", "datasets", waiting);
  await waitForReason(playground, "gpunetworks", "waiting-net", waiting);
  await waitForReason(playground, "gpufirewallrules", "waiting-rule", waiting);
  // Every operation was started; the window must end before the first of them can settle.
  await sleep(2 * POLL_MS);
  expect(Date.now() - startedAt + WINDOW_MS, "the measuring window must fit in the slow latency").toBeLessThan(
    SLOW_LATENCY_MS,
  );
  await admin(playground, "DELETE", "/requests");
  const windowStart = Date.now();
  await sleep(WINDOW_MS);
  const { counts } = (await admin(playground, "GET", "/requests")) as { counts: Record<string, number> };
  const elapsedMs = Date.now() - windowStart;
  const perFamily: Record<Family, number> = { vm: 0, disk: 0, network: 0, "firewall-rule": 0, other: 0 };
  for (const [route, count] of Object.entries(counts)) perFamily[familyOf(route)] += count;
  // At most one request per poll interval per family (one more for a tick at either edge of the window).
  const bound = Math.floor(elapsedMs / POLL_MS) + 1;
  for (const family of FAMILIES) {
    expect(perFamily[family], `${family} requests in ${elapsedMs} ms: ${JSON.stringify(counts)}`).toBeLessThanOrEqual(
      bound,
    );
  }
  const perMinute = Object.fromEntries(
    Object.entries(perFamily).map(([family, count]) => [family, Math.round((count * 60_000) / elapsedMs)]),
  ) as Record<Family, number>;
  console.info(`[${playground.cloud.url}] requests per minute while waiting (poll ${POLL_MS} ms):`, perMinute, counts);
  // Back to normal: the slow operations finish, every object is Ready again.
  await admin(playground, "PUT", "/settings", { latency_ms: LATENCY_MS });
  return perMinute;
}

describe("seed-only profile: a cloud with only the spec's endpoints", () => {
  let playground: Playground;

  beforeAll(async () => {
    playground = await startPlayground({ latencyMs: LATENCY_MS, profile: "seed-only" });
  });

  afterAll(async () => {
    if (playground === undefined) return;
    const exit = await playground.close({ signal: "SIGTERM" });
    expect(exit.code).toBe(0);
  });

  it("brings the examples' VM, disk, network and rule to Ready, one cloud resource each", async () => {
    expect(playground.process.output).toContain("Simulator profile:          seed-only");
    await playground.kubectl("apply", "-f", "examples/");
    await waitAllReady(playground);
    const cloud = await cloudState(playground);
    // The trainer and its disk, and the two replicas of the workers pool with their scratch disks.
    const names = (items: { name: string }[]) => items.map((item) => item.name).sort();
    expect(names(cloud.vms)).toEqual([
      "default-trainer",
      expect.stringMatching(/^default-workers-/),
      expect.stringMatching(/^default-workers-/),
    ]);
    expect(names(cloud.disks)).toEqual([
      "default-datasets",
      expect.stringMatching(/^default-workers-.*-scratch$/),
      expect.stringMatching(/^default-workers-.*-scratch$/),
    ]);
    expect(cloud.networks.filter((n) => n.name !== "default")).toHaveLength(1);
    expect(cloud.firewallRules).toHaveLength(1);
  });

  it("waits with at most one request per poll interval per family", async () => {
    const perMinute = await measureWhileWaiting(playground);
    for (const family of FAMILIES) expect(perMinute[family]).toBeGreaterThan(0);
    await waitAllReady(playground, 180_000);
    const disk = (await cloudState(playground)).disks.find((item) => item.name === "default-datasets");
    expect(disk?.size).toBe("2TiB");
  });

  it("deletes the VMs and the disks cleanly (the pool's too)", async () => {
    await playground.kubectl("delete", "gvm/trainer", "--timeout=120s");
    await playground.kubectl("delete", "gpudisk/datasets", "--timeout=120s");
    await playground.kubectl("delete", "gpool/workers", "--timeout=120s");
    const cloud = await cloudState(playground);
    expect(cloud.vms).toEqual([]);
    expect(cloud.disks).toEqual([]);
  });

  it("says NotSupported for deleting rules and networks, and lets them go with deletionPolicy Orphan", async () => {
    const before = await cloudState(playground);
    for (const rule of ["allow-ssh", "waiting-rule"]) {
      await playground.kubectl("delete", `gpufirewallrule/${rule}`, "--wait=false");
      await waitForReason(playground, "gpufirewallrules", rule, ["NotSupported"]);
    }
    const [stalled] = await listObjects(playground, "gpufirewallrules");
    const message = stalled?.status?.conditions?.find((c) => c.type === "Stalled")?.message ?? "";
    expect(message).toMatch(/does not support deleting a firewall rule .*deletionPolicy: Orphan/);
    for (const rule of ["allow-ssh", "waiting-rule"]) {
      await playground.kubectl("patch", `gpufirewallrule/${rule}`, "--type=merge", "-p", ORPHAN);
    }
    await eventually("the rules released", async () =>
      (await listObjects(playground, "gpufirewallrules")).length === 0 ? true : undefined,
    );
    for (const network of ["training-net", "waiting-net"]) {
      await playground.kubectl("delete", `gpunetwork/${network}`, "--wait=false");
      await waitForReason(playground, "gpunetworks", network, ["NotSupported"]);
      await playground.kubectl("patch", `gpunetwork/${network}`, "--type=merge", "-p", ORPHAN);
    }
    await eventually("the networks released", async () =>
      (await listObjects(playground, "gpunetworks")).length === 0 ? true : undefined,
    );
    // The server could not delete them: they are still in the cloud, as the messages said.
    const after = await cloudState(playground);
    expect(after.firewallRules.map((r) => r.id).sort()).toEqual(before.firewallRules.map((r) => r.id).sort());
    expect(after.networks.map((n) => n.id).sort()).toEqual(before.networks.map((n) => n.id).sort());
  });
});

describe("contract profile: the same wait costs the same", () => {
  let playground: Playground;

  beforeAll(async () => {
    playground = await startPlayground({ latencyMs: LATENCY_MS });
  });

  afterAll(async () => {
    if (playground === undefined) return;
    await playground.close({ signal: "SIGTERM" });
  });

  it("waits with at most one request per poll interval per family", async () => {
    await playground.kubectl("apply", "-f", "examples/");
    await waitAllReady(playground);
    await measureWhileWaiting(playground);
    await waitAllReady(playground, 180_000);
  });
});

const ORPHAN = '{"spec":{"deletionPolicy":"Orphan"}}';
