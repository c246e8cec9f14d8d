// `gpuvm-operator kube-build` (`npm run kube:build`): builds the real Kubernetes control plane the tests and
// `playground --kube real` use (etcd, kube-apiserver, kube-controller-manager, kubectl of one release, and the
// Argo CD Lua and kstatus checkers) and Cluster API's managers and clusterctl from the Go modules under
// test/kubernetes, into caches keyed by version. A second run is a no-op.

const HELP = `Usage: gpuvm-operator kube-build [--print-dir]

Builds etcd, kube-apiserver, kube-controller-manager and kubectl (the versions test/kubernetes/go.mod requires),
kube-certs, argocd-health and kstatus, then Cluster API's core manager, kubeadm bootstrap manager and clusterctl
(the version test/kubernetes/capi/go.mod requires, its providers' manifests rendered beside them), with Go into
$GPUVM_KUBE_CACHE, else $XDG_CACHE_HOME/gpuvm-operator/kube, else ~/.cache/gpuvm-operator/kube, one folder per
versions and sources. Does nothing when those builds exist. Needs Go 1.26+ on PATH; a first build takes
minutes, later ones reuse Go's caches.

Flags:
  --print-dir   print only the folder of the Kubernetes binaries (after building everything if needed)
  -h, --help    show this help
`;

export async function main(argv: string[]): Promise<number> {
  if (argv.includes("-h") || argv.includes("--help")) {
    process.stdout.write(HELP);
    return 0;
  }
  const unknown = argv.filter((arg) => arg !== "--print-dir");
  if (unknown.length > 0) {
    process.stderr.write(`gpuvm-operator kube-build: unknown argument ${unknown[0]}\n\n${HELP}`);
    return 2;
  }
  const printDir = argv.includes("--print-dir");
  const { ensureCapiBinaries, ensureKubeBinaries, KubeBuildError } = await import("../../control-plane/binaries.ts");
  try {
    const log = printDir ? (line: string) => process.stderr.write(`${line}\n`) : undefined;
    const built = await ensureKubeBinaries({ log });
    await ensureCapiBinaries({ kube: built, log });
    if (printDir) process.stdout.write(`${built.binDir}\n`);
    return 0;
  } catch (error) {
    if (!(error instanceof KubeBuildError)) throw error;
    process.stderr.write(`gpuvm-operator kube-build: ${error.message}\n`);
    return 1;
  }
}
