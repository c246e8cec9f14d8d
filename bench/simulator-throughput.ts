// Throughput of the simulator: simple GETs and VM creates per second, from bounded concurrent fetch loops
// against 127.0.0.1. Run: `npx node bench/simulator-throughput.ts [--seconds 3] [--concurrency 16]`.
import { parseArgs } from "node:util";
import { startSimulator } from "../src/simulator/index.ts";

const { values } = parseArgs({
  options: { seconds: { type: "string", default: "3" }, concurrency: { type: "string", default: "16" } },
});
const seconds = Number(values.seconds);
const concurrency = Number(values.concurrency);
if (!(seconds > 0) || !Number.isInteger(concurrency) || concurrency < 1) {
  process.stderr.write("usage: simulator-throughput.ts [--seconds <n>] [--concurrency <n>]\n");
  process.exit(2);
}

// Room for every create: the point is the HTTP path, not out_of_stock answers.
const capacity = { "us-east1-a": { "a40.1x": 1_000_000 } };
const sim = await startSimulator({ port: 0, host: "127.0.0.1", latencyMs: 0, rateLimit: false, capacity });
const headers = { authorization: `Bearer ${sim.apiKey}`, "content-type": "application/json" };
const projectUrl = `${sim.url}/projects/${sim.projectId}`;

/** Run `request` from `concurrency` loops for `seconds`; returns requests/s (non-2xx answers abort). */
async function measure(name: string, request: (i: number) => Promise<Response>): Promise<number> {
  const deadline = performance.now() + seconds * 1000;
  let done = 0;
  let failures = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        const response = await request(done + failures);
        await response.arrayBuffer();
        if (response.ok) done++;
        else failures++;
      }
    }),
  );
  const perSecond = done / ((performance.now() - started) / 1000);
  process.stdout.write(
    `${name.padEnd(28)} ${perSecond.toFixed(0).padStart(7)} req/s  (${done} ok, ${failures} failed)\n`,
  );
  return perSecond;
}

try {
  const created = await fetch(`${projectUrl}/vms`, {
    method: "POST",
    headers,
    body: JSON.stringify({
      name: "bench-target",
      type: "a40.1x",
      location: "us-east1-a",
      ssh_public_key: "ssh-ed25519 AAAA",
    }),
  });
  const vmId = ((await created.json()) as { operation: { metadata: { id: string } } }).operation.metadata.id;
  process.stdout.write(`simulator ${sim.url}, ${concurrency} concurrent loops, ${seconds}s each\n`);
  await measure("GET /vms/<id>", () => fetch(`${projectUrl}/vms/${vmId}`, { headers }));
  await measure("GET /projects", () => fetch(`${sim.url}/projects`, { headers }));
  let serial = 0;
  await measure("POST /vms (create)", () =>
    fetch(`${projectUrl}/vms`, {
      method: "POST",
      headers,
      body: JSON.stringify({
        name: `bench-${serial++}`,
        type: "a40.1x",
        location: "us-east1-a",
        ssh_public_key: "ssh-ed25519 AAAA",
      }),
    }),
  );
} finally {
  await sim.close();
}
