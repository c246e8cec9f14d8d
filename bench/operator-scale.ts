// Counted run: 100 GpuVms through the real operator (simulator + Kubernetes API test double over HTTP).
// Reports cloud API calls per VM to reach Ready and list calls per resync period in steady state, from the
// simulator's own request counts. Run: npx node bench/operator-scale.ts [--vms 100] [--sync-period-ms 4000]
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { CoreV1Api, CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import { pino } from "pino";
import { GROUP, VERSION } from "../src/api/common.ts";
import { registerControllers } from "../src/controllers/index.ts";
import { startKubeDouble } from "../src/kube-double/index.ts";
import { defaultConfig, Manager } from "../src/runtime/index.ts";
import { startSimulator } from "../src/simulator/index.ts";

const { values } = parseArgs({
  options: {
    vms: { type: "string", default: "100" },
    "sync-period-ms": { type: "string", default: "4000" },
    resyncs: { type: "string", default: "3" },
    "latency-ms": { type: "string", default: "200" },
  },
});
const VMS = Number(values.vms);
const SYNC_MS = Number(values["sync-period-ms"]);
const RESYNCS = Number(values.resyncs);
const NAMESPACE = "default";
const SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGJlbmNobWFya2tleWZvcnRoZW9wZXJhdG9y bench@example";

interface ListedVm {
  status?: { conditions?: { type: string; status: string }[] };
}

const sim = await startSimulator({
  port: 0,
  latencyMs: Number(values["latency-ms"]),
  rateLimit: false,
  // Room for every VM in the first location: the figures measure the steady path, not the fallback.
  capacity: { "us-east1-a": { "a40.1x": VMS } },
});
const double = await startKubeDouble({ port: 0, crdDir: fileURLToPath(new URL("../crds", import.meta.url)) });
const kubeConfig = new KubeConfig();
kubeConfig.loadFromString(double.kubeconfigYaml());
const core = kubeConfig.makeApiClient(CoreV1Api);
const custom = kubeConfig.makeApiClient(CustomObjectsApi);
await core.createNamespace({ body: { metadata: { name: NAMESPACE } } }).catch(() => undefined);
await core.createNamespacedSecret({
  namespace: NAMESPACE,
  body: {
    metadata: { name: "gpucloud-credentials", labels: { "gpucloud.dev/watch": "true" } },
    stringData: { apiKey: sim.apiKey, projectId: sim.projectId, apiUrl: sim.url },
  },
});

const manager = new Manager({
  kubeConfig,
  logger: pino({ level: "warn" }),
  config: defaultConfig({
    metricsBindAddress: undefined,
    healthProbeBindAddress: undefined,
    syncPeriodMs: SYNC_MS,
    allowedApiUrls: [sim.url],
    apiRateLimit: 100,
    maxConcurrentReconciles: 8,
  }),
});
const controllers = registerControllers(manager);
await manager.start();

async function counts(): Promise<Record<string, number>> {
  const answer = (await (await fetch(`${sim.adminUrl}/requests`)).json()) as { counts: Record<string, number> };
  return answer.counts;
}
const resetCounts = async (): Promise<void> => {
  await fetch(`${sim.adminUrl}/requests`, { method: "DELETE" });
};
const apiCalls = (all: Record<string, number>): [string, number][] =>
  Object.entries(all).filter(([route]) => !route.includes("/_sim"));
const total = (all: Record<string, number>): number => apiCalls(all).reduce((sum, [, n]) => sum + n, 0);

await resetCounts();
const started = Date.now();
await Promise.all(
  Array.from({ length: VMS }, (_, i) =>
    custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      plural: "gpuvms",
      namespace: NAMESPACE,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: "GpuVm",
        metadata: { name: `vm-${String(i).padStart(3, "0")}` },
        spec: {
          type: "a40.1x",
          locations: ["us-east1-a", "us-southcentral1-a", "eu-iceland1-a"],
          sshPublicKey: SSH_KEY,
        },
      },
    }),
  ),
);

let ready = 0;
while (ready < VMS) {
  if (Date.now() - started > 180_000) throw new Error(`only ${ready}/${VMS} Ready after 180 s`);
  await new Promise((resolve) => setTimeout(resolve, 250));
  const list = (await custom.listNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    plural: "gpuvms",
    namespace: NAMESPACE,
  })) as {
    items: ListedVm[];
  };
  ready = list.items.filter((vm) =>
    vm.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
  ).length;
}
const toReadyMs = Date.now() - started;
const createCounts = await counts();

await resetCounts();
// Let the informers settle, then measure whole resync periods.
const steadyMs = SYNC_MS * RESYNCS;
await new Promise((resolve) => setTimeout(resolve, steadyMs));
const steadyCounts = await counts();
const vmListCalls = Object.entries(steadyCounts)
  .filter(([route]) => /^GET \S*\/projects\/:projectId\/vms$/.test(route))
  .reduce((sum, [, n]) => sum + n, 0);

const lines = [
  `VMs: ${VMS}, simulator operation latency ${values["latency-ms"]} ms, sync period ${SYNC_MS} ms`,
  `time to all Ready: ${(toReadyMs / 1000).toFixed(1)} s`,
  `cloud API calls to reach Ready: ${total(createCounts)} (${(total(createCounts) / VMS).toFixed(2)} per VM)`,
  ...apiCalls(createCounts).map(([route, n]) => `    ${route}: ${n}`),
  `steady state over ${RESYNCS} resync periods: ${total(steadyCounts)} calls, VM list calls per resync: ${(vmListCalls / RESYNCS).toFixed(2)}`,
  ...apiCalls(steadyCounts).map(([route, n]) => `    ${route}: ${n}`),
];
process.stdout.write(`${lines.join("\n")}\n`);

await manager.stop();
controllers.stop();
await double.close();
await sim.close();
