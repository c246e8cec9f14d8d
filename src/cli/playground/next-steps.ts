// What the playground prints once everything is up: where each server is, the credentials, the operator's command
// when it does not run it, and the next commands to try, each as it can be pasted; then the line the e2e suite
// waits for.
import path from "node:path";
import type { SimulatorProfile } from "../../simulator/profiles.ts";
import { shellQuote } from "../../util/shell-quote.ts";
import { CREDENTIALS_NAMESPACE, CREDENTIALS_SECRET } from "./conventions.ts";

/** Printed once everything is up; the e2e suite waits for it. */
export const READY_LINE = "Playground ready.";

/** A path as people type it: relative below the working directory, absolute elsewhere. */
function displayPath(target: string): string {
  const relative = path.relative(process.cwd(), target);
  return relative === "" || relative.startsWith("..") || path.isAbsolute(relative) ? target : relative;
}

export function nextSteps(options: {
  stateDir: string;
  kubeUrl: string;
  /** "Kubernetes API test double" or the real control plane's description. */
  kubeLabel: string;
  /** kubectl of the control plane's release, when there is one. */
  kubectl: string | undefined;
  cloud: { url: string; projectId: string };
  /** The simulator's user, who signs in with gpuvmctl. */
  user: { email: string; password: string };
  profile: SimulatorProfile;
  operatorCommand: string | undefined;
  /** With --capi: the workload cluster's kubeconfig. */
  capi?: { workloadKubeconfigPath: string };
}): string {
  const kubeconfig = displayPath(path.join(options.stateDir, "kubeconfig"));
  const cloudFile = displayPath(path.join(options.stateDir, "cloud.json"));
  const lines = [
    "",
    `${options.kubeLabel}: ${options.kubeUrl}   (kubeconfig: ${kubeconfig})`,
    `GPU cloud API simulator:    ${options.cloud.url}   (API key and project: ${cloudFile})`,
    ...(options.profile === "contract"
      ? []
      : [`Simulator profile:          ${options.profile} (only the spec's endpoints; see docs/simulator.md)`]),
    `Credentials Secret:         ${CREDENTIALS_NAMESPACE}/${CREDENTIALS_SECRET} (apiKey, projectId, apiUrl)`,
    "",
  ];
  if (options.kubectl !== undefined) {
    lines.push(`kubectl of the same release: ${options.kubectl} (any kubectl within one minor version works too)`, "");
  }
  if (options.operatorCommand !== undefined) {
    lines.push("The operator is not running. Start it (and stop/restart it at will) in another shell:", "");
    lines.push(`  ${options.operatorCommand}`, "");
  }
  const requirePath = path.isAbsolute(cloudFile) ? cloudFile : `./${cloudFile}`;
  const apiKey = `"$(node -p 'require(${JSON.stringify(requirePath)}).apiKey')"`;
  const { email, password } = options.user;
  if (options.capi !== undefined) {
    const workload = displayPath(options.capi.workloadKubeconfigPath);
    lines.push(
      "Cluster API: the Cluster default/playground (its GpuCluster, Secret playground-kubeconfig), control plane up.",
      "Its GPU workers, in another shell:",
      "",
      `  export KUBECONFIG=${path.isAbsolute(kubeconfig) ? kubeconfig : `$PWD/${kubeconfig}`}`,
      "  kubectl apply -f examples/cluster-api/",
      "  kubectl get machines,gpumachines -w  # 3 Machines Running, each a GPU VM of the simulator",
      `  kubectl --kubeconfig ${workload} get nodes -o wide   # their Nodes in the workload cluster`,
      "  kubectl scale machinedeployment gpu-workers --replicas 5",
      "",
    );
  }
  lines.push(
    "Next, in another shell:",
    "",
    `  export KUBECONFIG=${path.isAbsolute(kubeconfig) ? kubeconfig : `$PWD/${kubeconfig}`}`,
    "  kubectl apply -f examples/",
    "  kubectl get gpucloud                 # every kind with READY, SYNCED and REASON",
    "  kubectl get gvm -w                   # kubectl watches one resource type at a time",
    "  kubectl wait --for=condition=Ready gvm/trainer --timeout=2m",
    "  kubectl scale gpool/workers --replicas 4 && kubectl get gpool -w",
    `  curl -H "Authorization: Bearer $(node -p 'require(${JSON.stringify(requirePath)}).apiKey')" ${options.cloud.url}/projects/${options.cloud.projectId}/vms`,
    "  kubectl delete -f examples/",
    "",
    "gpuvmctl against the simulated cloud: sign in as its user (the password is asked for) ...",
    "",
    `  npx gpuvmctl login --api-url ${options.cloud.url} --email ${shellQuote(email)}   # password: ${password}`,
    "",
    "... or use the project's API key, without a sign-in:",
    "",
    `  export GPUCLOUD_API_URL=${options.cloud.url} GPUCLOUD_API_KEY=${apiKey}`,
    "",
    "  npx gpuvmctl vms list                # the cloud's VMs",
    "  npx gpuvmctl usage --group-by type   # GPU-hours so far (the playground publishes usage as it accrues)",
    "",
    "Ctrl-C stops everything; the state stays in the state directory for the next start.",
    READY_LINE,
    "",
  );
  return lines.join("\n");
}
