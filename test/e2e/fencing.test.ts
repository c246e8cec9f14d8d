// Fenced leadership on the Kubernetes API test double (in-process, its own write log); the same scenarios run on
// the real kube-apiserver in test/kubernetes/fencing.test.ts.
import path from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { type RunningKubeDouble, startKubeDouble } from "../../src/kube-double/index.ts";
import { describeFencing } from "./fencing.ts";
import { REPO_ROOT } from "./harness.ts";

describeFencing({
  name: "Kubernetes API test double",
  async start(stateDir) {
    const double: RunningKubeDouble = await startKubeDouble({ port: 0, crdDir: path.join(REPO_ROOT, "crds") });
    const kubeconfigPath = path.join(stateDir, "kubeconfig");
    await double.writeKubeconfig(kubeconfigPath);
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfigPath);
    await fetch(`${double.url}/api/v1/namespaces`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: "fencing" } }),
    });
    return {
      kubeConfig,
      operatorKubeconfigPath: kubeconfigPath,
      namespace: "fencing",
      leaseNamespace: "fencing",
      writes: async () => [...double.writes()],
      close: () => double.close(),
    };
  },
});
