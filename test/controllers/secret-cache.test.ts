// The Secret cache holds only the Secrets the operator should read: those labelled gpucloud.dev/watch=true
// (credentials, keys and scripts objects refer to, and the connection details it writes) and the one
// --credentials-secret, never every Secret of the cluster. Checked on the wire (every Secret list and watch
// carries a selector) and through the operator's behaviour (an unlabelled Secret is invisible, and says so).
import { fileURLToPath } from "node:url";
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GROUP, SECRET_WATCH_SELECTOR, VERSION } from "../../src/api/common.ts";
import { type OperatorControllers, registerControllers } from "../../src/controllers/index.ts";
import { type RunningKubeDouble, startKubeDouble } from "../../src/kube-double/index.ts";
import { defaultConfig, Manager, SECRETS } from "../../src/runtime/index.ts";
import { type RunningSimulator, startSimulator } from "../../src/simulator/index.ts";
import { type CountingProxy, kubeConfigFor, startCountingProxy } from "../runtime/helpers.ts";
import { condition, type ManagedView, vmSpec, WATCHED } from "./harness.ts";

let sim: RunningSimulator;
let double: RunningKubeDouble;
let proxy: CountingProxy;
let manager: Manager;
let controllers: OperatorControllers;
const kube = () => kubeConfigFor(proxy.url);

beforeAll(async () => {
  sim = await startSimulator({ port: 0, latencyMs: 0, rateLimit: false });
  double = await startKubeDouble({ port: 0, crdDir: fileURLToPath(new URL("../../crds", import.meta.url)) });
  proxy = await startCountingProxy(double.url);
  const core = kube().makeApiClient(CoreV1Api);
  const credentials = { apiKey: sim.apiKey, projectId: sim.projectId, apiUrl: sim.url };
  await core.createNamespace({ body: { metadata: { name: "ops" } } });
  await core.createNamespacedSecret({
    namespace: "default",
    body: { metadata: { name: "gpucloud-credentials", labels: WATCHED }, stringData: credentials },
  });
  // The operator's own default Secret needs no label (it is read through an informer of that one object).
  await core.createNamespacedSecret({
    namespace: "ops",
    body: { metadata: { name: "operator-default" }, stringData: credentials },
  });
  await core.createNamespacedSecret({
    namespace: "default",
    body: { metadata: { name: "someone-elses" }, stringData: { password: "not-for-the-operator" } },
  });
  manager = new Manager({
    kubeConfig: kube(),
    logger: pino({ level: "silent" }),
    config: defaultConfig({
      metricsBindAddress: undefined,
      healthProbeBindAddress: undefined,
      allowedApiUrls: [sim.url],
      operationPollIntervalMs: 50,
      credentialsSecret: { namespace: "ops", name: "operator-default" },
    }),
  });
  controllers = registerControllers(manager, { timing: { dependencyMs: 200, shortMs: 100 } });
  await manager.start();
});
afterAll(async () => {
  await manager?.stop();
  controllers?.stop();
  await proxy?.close();
  await double?.close();
  await sim?.close();
});

const custom = () => kube().makeApiClient(CustomObjectsApi);
const network = (namespace: string, name: string, secret?: string) =>
  custom().createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    plural: "gpunetworks",
    namespace,
    body: {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: "GpuNetwork",
      metadata: { name },
      spec: secret === undefined ? {} : { credentialsRef: { name: secret } },
    },
  });
const read = async (namespace: string, name: string): Promise<ManagedView> =>
  (await custom().getNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    plural: "gpunetworks",
    namespace,
    name,
  })) as ManagedView;

describe("the Secret cache", () => {
  it("lists and watches only labelled Secrets, those of the credentials name (to know a namespace has one), and the default Secret by name", async () => {
    const secretReads = proxy.urls.filter((url) => url.startsWith("GET ") && url.includes("/secrets"));
    expect(secretReads.length).toBeGreaterThan(0);
    const selector = `labelSelector=${encodeURIComponent(SECRET_WATCH_SELECTOR)}`;
    const unselected = secretReads.filter(
      (url) =>
        !url.includes(selector) &&
        !url.includes("fieldSelector=metadata.name%3Doperator-default") &&
        !url.includes("fieldSelector=metadata.name%3Dgpucloud-credentials"),
    );
    expect(unselected).toEqual([]);
    const cached = manager.informerFor(SECRETS, undefined, { labelSelector: SECRET_WATCH_SELECTOR }).list();
    expect(cached.map((secret) => secret.metadata?.name).sort()).toEqual(["gpucloud-credentials"]);
  });

  it("an unlabelled credentials Secret is invisible, and the object says to label it; the label makes it Ready", async () => {
    const core = kube().makeApiClient(CoreV1Api);
    await core.createNamespacedSecret({
      namespace: "default",
      body: {
        metadata: { name: "team-creds" },
        stringData: { apiKey: sim.apiKey, projectId: sim.projectId, apiUrl: sim.url },
      },
    });
    await network("default", "labelled-later", "team-creds");
    await expect
      .poll(async () => condition(await read("default", "labelled-later"), "Ready")?.message ?? "", { timeout: 8000 })
      .toContain("labelled gpucloud.dev/watch=true");
    await core.patchNamespacedSecret(
      { namespace: "default", name: "team-creds", body: { metadata: { labels: WATCHED } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    await expect
      .poll(async () => condition(await read("default", "labelled-later"), "Ready")?.status, { timeout: 8000 })
      .toBe("True");
  });

  it("objects without a Secret of their own use the unlabelled default Secret", async () => {
    await custom().createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      plural: "gpunetworks",
      namespace: "ops",
      body: { apiVersion: `${GROUP}/${VERSION}`, kind: "GpuNetwork", metadata: { name: "by-default" }, spec: {} },
    });
    await expect
      .poll(async () => condition(await read("ops", "by-default"), "Ready")?.status, { timeout: 8000 })
      .toBe("True");
  });

  it("connection details are written only to a Secret the GpuVm owns; someone else's is left alone", async () => {
    const vm = (name: string, secretName: string) =>
      custom().createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        plural: "gpuvms",
        namespace: "default",
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: "GpuVm",
          metadata: { name },
          spec: { ...vmSpec(), connectionDetails: { secretName } },
        },
      });
    const readVm = async (name: string): Promise<ManagedView> =>
      (await custom().getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        plural: "gpuvms",
        namespace: "default",
        name,
      })) as ManagedView;
    await vm("squatter", "someone-elses");
    await expect
      .poll(async () => condition(await readVm("squatter"), "Ready")?.message ?? "", { timeout: 10_000 })
      .toContain("Secret default/someone-elses exists and was not written by this GpuVm");
    const untouched = await kube()
      .makeApiClient(CoreV1Api)
      .readNamespacedSecret({ namespace: "default", name: "someone-elses" });
    expect(Object.keys(untouched.data ?? {})).toEqual(["password"]);

    await vm("publisher", "publisher-connection");
    await expect
      .poll(async () => condition(await readVm("publisher"), "Ready")?.status, { timeout: 10_000 })
      .toBe("True");
    const written = await kube()
      .makeApiClient(CoreV1Api)
      .readNamespacedSecret({ namespace: "default", name: "publisher-connection" });
    expect(written.metadata?.labels).toMatchObject({ "gpucloud.dev/watch": "true" });
    expect(written.metadata?.ownerReferences?.[0]?.name).toBe("publisher");
  });
});
