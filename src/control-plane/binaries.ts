// The control plane's binaries (etcd, kube-apiserver, kube-controller-manager, kubectl of one release), the
// real peers (Argo CD's Lua interpreter, kstatus) and Cluster API's managers and clusterctl, built with Go from
// the modules under test/kubernetes into cache folders keyed by their versions and sources (one for Kubernetes
// and the peers, one for Cluster API, with its providers' manifests rendered beside the binaries). A second
// build with the same key is a no-op.
import { execFile, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { access, mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { isProcessAlive } from "../util/process-alive.ts";

const run = promisify(execFile);

export const REPO_ROOT = path.resolve(import.meta.dirname, "../..");
export const KUBE_MODULE_DIR = path.join(REPO_ROOT, "test/kubernetes");
const PEERS_MODULE_DIR = path.join(KUBE_MODULE_DIR, "peers");
/** Cluster API's module: its own folder and cache key, so that a Cluster API change never rebuilds Kubernetes. */
export const CAPI_MODULE_DIR = path.join(KUBE_MODULE_DIR, "capi");

/** Every binary the build produces, by name. */
export const KUBE_BINARIES = [
  "etcd",
  "kube-apiserver",
  "kube-controller-manager",
  "kubectl",
  "kube-certs",
  "argocd-health",
  "kstatus",
] as const;
export type KubeBinary = (typeof KUBE_BINARIES)[number];

export interface KubeVersions {
  kubernetes: string;
  etcd: string;
  go: string;
}

export interface KubeBuildPlan {
  versions: KubeVersions;
  /** The cache folder of this exact build (versions + a hash of the Go sources and flags). */
  dir: string;
  binDir: string;
}

export interface BuiltKube extends KubeBuildPlan {
  /** True when this call compiled; false when the cache already had the build. */
  built: boolean;
  buildSeconds: number;
  bin(name: KubeBinary): string;
}

export class KubeBuildError extends Error {
  override name = "KubeBuildError";
}

/** `go` when it is on PATH (its version, e.g. "go1.26.8"), undefined otherwise. */
export async function findGo(): Promise<string | undefined> {
  try {
    const { stdout } = await run("go", ["env", "GOVERSION"], { timeout: 30_000 });
    return stdout.trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Where builds are kept: $GPUVM_KUBE_CACHE, else $XDG_CACHE_HOME/gpuvm-operator/kube, else ~/.cache/…. */
export function kubeCacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  if (env.GPUVM_KUBE_CACHE) return path.resolve(env.GPUVM_KUBE_CACHE);
  const cacheHome = env.XDG_CACHE_HOME ? path.resolve(env.XDG_CACHE_HOME) : path.join(homedir(), ".cache");
  return path.join(cacheHome, "gpuvm-operator", "kube");
}

/** The version a go.mod requires a module at (`require x v1` or inside a `require (` block). */
function requiredVersion(goMod: string, module: string, goModPath: string): string {
  const escaped = module.replaceAll(".", "\\.");
  const match = new RegExp(`^\\s*(?:require\\s+)?${escaped}\\s+(v\\S+)`, "m").exec(goMod);
  if (match?.[1] === undefined) throw new KubeBuildError(`${goModPath} does not require ${module}`);
  return match[1];
}

/** Version stamps a release build of Kubernetes carries (hack/lib/version.sh sets the same variables). */
function versionLdflags(kubernetes: string): string[] {
  const [major, minor] = kubernetes.replace(/^v/, "").split(".");
  const flags: string[] = [];
  for (const pkg of ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"]) {
    flags.push(`-X ${pkg}.gitVersion=${kubernetes}`, `-X ${pkg}.gitMajor=${major}`, `-X ${pkg}.gitMinor=${minor}`);
    flags.push(`-X ${pkg}.gitTreeState=clean`);
  }
  return flags;
}

/** Version stamps of a Cluster API release build (its hack/scripts/release/version.sh sets the same). */
function capiVersionLdflags(clusterApi: string): string[] {
  const [major, minor] = clusterApi.replace(/^v/, "").split(".");
  const pkg = "sigs.k8s.io/cluster-api/version";
  return [
    `-X ${pkg}.gitVersion=${clusterApi}`,
    `-X ${pkg}.gitMajor=${major}`,
    `-X ${pkg}.gitMinor=${minor}`,
    `-X ${pkg}.gitTreeState=clean`,
  ];
}

/** The Go sources of a module folder, sorted; `exclude` names subfolders (nested modules) left out. */
async function goSources(directory: string, exclude: string[] = []): Promise<string[]> {
  const entries = await readdir(directory, { withFileTypes: true, recursive: true });
  return entries
    .filter(
      (entry) => entry.isFile() && (/\.go$/.test(entry.name) || entry.name === "go.mod" || entry.name === "go.sum"),
    )
    .map((entry) => path.join(entry.parentPath, entry.name))
    .filter((file) => !exclude.some((folder) => file.startsWith(path.join(directory, folder) + path.sep)))
    .sort();
}

async function sourcesHash(directory: string, exclude: string[], extra: unknown): Promise<string> {
  const hash = createHash("sha256");
  for (const file of await goSources(directory, exclude)) {
    hash
      .update(path.relative(directory, file))
      .update("\0")
      .update(await readFile(file))
      .update("\0");
  }
  hash.update(JSON.stringify(extra));
  return hash.digest("hex").slice(0, 12);
}

interface BuildStep {
  moduleDir: string;
  packages: string[];
  ldflags: string[];
}

function buildSteps(versions: KubeVersions): BuildStep[] {
  return [
    {
      // One invocation for the four big commands: they share most packages, and go build compiles each once.
      moduleDir: KUBE_MODULE_DIR,
      packages: [
        "./cmd/etcd",
        "./cmd/kube-certs",
        "k8s.io/kubernetes/cmd/kube-apiserver",
        "k8s.io/kubernetes/cmd/kube-controller-manager",
        "k8s.io/kubernetes/cmd/kubectl",
      ],
      ldflags: ["-s", "-w", ...versionLdflags(versions.kubernetes)],
    },
    { moduleDir: PEERS_MODULE_DIR, packages: ["./cmd/argocd-health", "./cmd/kstatus"], ldflags: ["-s", "-w"] },
  ];
}

/** Reads the versions from test/kubernetes/go.mod and works out the cache folder; builds nothing. */
export async function kubeBuildPlan(
  options: { goVersion?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<KubeBuildPlan> {
  const goVersion = options.goVersion ?? (await findGo());
  if (goVersion === undefined) throw new KubeBuildError("go is not on PATH: install Go 1.26 or newer");
  const goMod = await readFile(path.join(KUBE_MODULE_DIR, "go.mod"), "utf8");
  const goModPath = "test/kubernetes/go.mod";
  const versions: KubeVersions = {
    kubernetes: requiredVersion(goMod, "k8s.io/kubernetes", goModPath),
    etcd: requiredVersion(goMod, "go.etcd.io/etcd/server/v3", goModPath),
    go: goVersion,
  };
  // capi/ is a module of its own with its own cache folder: its files never change this key.
  const hash = await sourcesHash(
    KUBE_MODULE_DIR,
    [path.relative(KUBE_MODULE_DIR, CAPI_MODULE_DIR)],
    buildSteps(versions).map((step) => [step.packages, step.ldflags]),
  );
  const key = `k8s-${versions.kubernetes}_etcd-${versions.etcd}_${versions.go}_${hash}`;
  const dir = path.join(kubeCacheRoot(options.env), key);
  return { versions, dir, binDir: path.join(dir, "bin") };
}

async function exists(file: string): Promise<boolean> {
  try {
    await access(file);
    return true;
  } catch {
    return false;
  }
}

/** A cache folder is complete when its build.json and every file the build promises are there. */
async function isComplete(dir: string, files: string[]): Promise<boolean> {
  if (!(await exists(path.join(dir, "build.json")))) return false;
  for (const file of files) if (!(await exists(path.join(dir, file)))) return false;
  return true;
}

function finished(plan: KubeBuildPlan, built: boolean, buildSeconds: number): BuiltKube {
  return { ...plan, built, buildSeconds, bin: (name) => path.join(plan.binDir, name) };
}

function goEnv(): NodeJS.ProcessEnv {
  // CGO off: static binaries, as Kubernetes releases its control plane, and no C toolchain needed.
  // GOFLAGS=-mod=mod would let go.sum drift; -mod=readonly makes a stale go.sum an error instead.
  return { ...process.env, CGO_ENABLED: "0", GOFLAGS: `${process.env.GOFLAGS ?? ""} -mod=readonly`.trim() };
}

function goBuild(step: BuildStep, outDir: string, log: (line: string) => void): Promise<void> {
  // -buildvcs=false: the binaries need no stamp of this repository's commit (and a clone's git state never
  // breaks the build).
  const args = [
    "build",
    "-trimpath",
    "-buildvcs=false",
    `-ldflags=${step.ldflags.join(" ")}`,
    "-o",
    `${outDir}/`,
    ...step.packages,
  ];
  log(`  (cd ${path.relative(REPO_ROOT, step.moduleDir)} && go ${args.join(" ")})`);
  return new Promise((resolve, reject) => {
    const child = spawn("go", args, { cwd: step.moduleDir, env: goEnv(), stdio: ["ignore", "inherit", "inherit"] });
    child.once("error", reject);
    child.once("exit", (code, signal) =>
      code === 0
        ? resolve()
        : reject(new KubeBuildError(`go build in ${step.moduleDir} failed (${signal ?? `exit code ${code}`})`)),
    );
  });
}

const LOCK_STALE_MS = 2 * 60 * 60 * 1000;

/** A lock folder beside the build: two test runs starting at once build once, the other waits. */
async function withLock<T>(lockDir: string, log: (line: string) => void, work: () => Promise<T>): Promise<T> {
  let announced = false;
  for (;;) {
    try {
      await mkdir(lockDir);
      await writeFile(path.join(lockDir, "pid"), String(process.pid));
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const owner = Number(await readFile(path.join(lockDir, "pid"), "utf8").catch(() => "0"));
      const age = Date.now() - (await stat(lockDir).catch(() => ({ mtimeMs: Date.now() }))).mtimeMs;
      if (!isProcessAlive(owner) && age > 5_000) {
        await rm(lockDir, { recursive: true, force: true }); // left by a build that was killed
        continue;
      }
      if (age > LOCK_STALE_MS) throw new KubeBuildError(`${lockDir} is held by process ${owner} for too long`);
      if (!announced) log(`kube:build: waiting for the build that process ${owner} runs`);
      announced = true;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
  try {
    return await work();
  } finally {
    await rm(lockDir, { recursive: true, force: true });
  }
}

interface CacheBuild {
  dir: string;
  /** The files (relative to dir) a complete build has. */
  files: string[];
  /** What is built, for the log lines: "Kubernetes v1.37.2, etcd v3.7.0, built with go1.26.8". */
  what: string;
  names: readonly string[];
  versions: object;
  /** Fills the staging folder (its bin/ exists). */
  run(staging: string): Promise<void>;
}

/** Builds into `${dir}.partial` under a lock, then renames it to dir: a killed build leaves nothing half-made. */
async function ensureBuilt(
  build: CacheBuild,
  log: (line: string) => void,
): Promise<{ built: boolean; buildSeconds: number }> {
  const { dir, what } = build;
  if (await isComplete(dir, build.files)) {
    log(`kube:build: up to date (${what}) in ${dir}`);
    return { built: false, buildSeconds: 0 };
  }
  await mkdir(path.dirname(dir), { recursive: true });
  return withLock(`${dir}.lock`, log, async () => {
    if (await isComplete(dir, build.files)) {
      log(`kube:build: built meanwhile by another process (${what}) in ${dir}`);
      return { built: false, buildSeconds: 0 };
    }
    log(`kube:build: building ${build.names.join(", ")} (${what}) into ${dir}`);
    log("kube:build: a first build compiles them from source and takes minutes; Go's caches make later ones fast");
    const started = Date.now();
    const staging = `${dir}.partial`;
    await rm(staging, { recursive: true, force: true });
    await mkdir(path.join(staging, "bin"), { recursive: true });
    await build.run(staging);
    const buildSeconds = Math.round((Date.now() - started) / 100) / 10;
    await writeFile(
      path.join(staging, "build.json"),
      `${JSON.stringify({ versions: build.versions, builtAt: new Date().toISOString(), buildSeconds }, null, 2)}\n`,
    );
    await rm(dir, { recursive: true, force: true });
    await rename(staging, dir);
    log(`kube:build: built in ${buildSeconds} s (${what}) into ${dir}`);
    return { built: true, buildSeconds };
  });
}

function kubeBuild(plan: KubeBuildPlan, log: (line: string) => void): CacheBuild {
  const { kubernetes, etcd, go } = plan.versions;
  return {
    dir: plan.dir,
    files: KUBE_BINARIES.map((name) => path.join("bin", name)),
    what: `Kubernetes ${kubernetes}, etcd ${etcd}, built with ${go}`,
    names: KUBE_BINARIES,
    versions: plan.versions,
    async run(staging) {
      for (const step of buildSteps(plan.versions)) await goBuild(step, path.join(staging, "bin"), log);
    },
  };
}

/**
 * Builds the binaries unless the cache already has this exact build. Prints what it does through `log`.
 * Throws KubeBuildError when Go is missing or the build fails.
 */
export async function ensureKubeBinaries(options: { log?: (line: string) => void } = {}): Promise<BuiltKube> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const plan = await kubeBuildPlan();
  const { built, buildSeconds } = await ensureBuilt(kubeBuild(plan, log), log);
  return finished(plan, built, buildSeconds);
}

/** The binaries if this exact build is in the cache, undefined otherwise (never builds). */
export async function builtKubeBinaries(): Promise<BuiltKube | undefined> {
  const goVersion = await findGo();
  if (goVersion === undefined) return undefined;
  const plan = await kubeBuildPlan({ goVersion });
  return (await isComplete(plan.dir, kubeBuild(plan, () => {}).files)) ? finished(plan, false, 0) : undefined;
}

// ---- Cluster API -------------------------------------------------------------------------------------------

/** Cluster API's binaries: the core manager, the kubeadm bootstrap provider's manager, clusterctl. */
export const CAPI_BINARIES = ["capi-manager", "capi-kubeadm-bootstrap-manager", "clusterctl"] as const;
export type CapiBinary = (typeof CAPI_BINARIES)[number];

/**
 * Each provider's manifests as clusterctl would install them (`config/default` rendered by kustomize: CRDs with
 * their conversion patches and labels, RBAC, webhook configurations, the Deployment and its flags), with the
 * `${VAR:=default}` variables left in, as in a release's `*-components.yaml`.
 */
export const CAPI_COMPONENTS = ["core", "bootstrap-kubeadm"] as const;
export type CapiComponent = (typeof CAPI_COMPONENTS)[number];

/** The main package, the binary it becomes, and the kustomize folder of its manifests. */
const CAPI_PROGRAMS: {
  pkg: string;
  builtAs: string;
  binary: CapiBinary;
  component?: CapiComponent;
  config?: string;
}[] = [
  {
    pkg: "sigs.k8s.io/cluster-api/core",
    builtAs: "core",
    binary: "capi-manager",
    component: "core",
    config: "core/config/default",
  },
  {
    pkg: "sigs.k8s.io/cluster-api/bootstrap/kubeadm",
    builtAs: "kubeadm",
    binary: "capi-kubeadm-bootstrap-manager",
    component: "bootstrap-kubeadm",
    config: "bootstrap/kubeadm/config/default",
  },
  { pkg: "sigs.k8s.io/cluster-api/cmd/clusterctl", builtAs: "clusterctl", binary: "clusterctl" },
];

export interface CapiVersions {
  clusterApi: string;
  go: string;
  /** The kubectl (its kustomize) that rendered the components. */
  kubectl: string;
}

export interface BuiltCapi {
  versions: CapiVersions;
  dir: string;
  binDir: string;
  built: boolean;
  buildSeconds: number;
  bin(name: CapiBinary): string;
  /** The rendered manifests of a provider (see CAPI_COMPONENTS). */
  components(name: CapiComponent): string;
  /** Cluster API's metadata.yaml (release series → contract), for clusterctl's repositories. */
  metadataPath: string;
}

/** Where the module cache holds a module's source (`go mod download` first, for a cold module cache). */
async function moduleDir(moduleDirectory: string, module: string): Promise<string> {
  const { stdout } = await run("go", ["mod", "download", "-json", module], {
    cwd: moduleDirectory,
    env: goEnv(),
    timeout: 600_000,
  });
  const dir = (JSON.parse(stdout) as { Dir?: unknown }).Dir;
  if (typeof dir !== "string") throw new KubeBuildError(`go mod download ${module}: no source folder`);
  return dir;
}

/**
 * The source folder of the Cluster API module the build used, in Go's module cache (for what the build does not
 * render, such as the kubeadm control plane provider's CRDs).
 */
export async function clusterApiSourceDir(capi: Pick<BuiltCapi, "versions">): Promise<string> {
  return moduleDir(CAPI_MODULE_DIR, `sigs.k8s.io/cluster-api@${capi.versions.clusterApi}`);
}

/** Reads the Cluster API version from test/kubernetes/capi/go.mod and works out the cache folder. */
async function capiBuildPlan(kube: BuiltKube, env: NodeJS.ProcessEnv = process.env) {
  const goModPath = "test/kubernetes/capi/go.mod";
  const goMod = await readFile(path.join(CAPI_MODULE_DIR, "go.mod"), "utf8");
  const versions: CapiVersions = {
    clusterApi: requiredVersion(goMod, "sigs.k8s.io/cluster-api", goModPath),
    go: kube.versions.go,
    kubectl: kube.versions.kubernetes,
  };
  const ldflags = ["-s", "-w", ...capiVersionLdflags(versions.clusterApi)];
  const hash = await sourcesHash(CAPI_MODULE_DIR, [], [CAPI_PROGRAMS, ldflags, versions.kubectl]);
  const dir = path.join(kubeCacheRoot(env), `capi-${versions.clusterApi}_${versions.go}_${hash}`);
  return { versions, dir, binDir: path.join(dir, "bin"), ldflags };
}

function componentsFile(component: CapiComponent): string {
  return path.join("components", `${component}.yaml`);
}

/**
 * Builds Cluster API's managers and clusterctl (test/kubernetes/capi/go.mod) unless the cache has them, and
 * renders each provider's manifests with the control plane's kubectl (kustomize), beside them.
 */
export async function ensureCapiBinaries(options: {
  kube: BuiltKube;
  log?: (line: string) => void;
  env?: NodeJS.ProcessEnv;
}): Promise<BuiltCapi> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const plan = await capiBuildPlan(options.kube, options.env);
  const { built, buildSeconds } = await ensureBuilt(
    {
      dir: plan.dir,
      files: [
        ...CAPI_BINARIES.map((name) => path.join("bin", name)),
        ...CAPI_COMPONENTS.map(componentsFile),
        "metadata.yaml",
      ],
      what: `Cluster API ${plan.versions.clusterApi}, built with ${plan.versions.go}`,
      names: CAPI_BINARIES,
      versions: plan.versions,
      async run(staging) {
        const binDir = path.join(staging, "bin");
        const step = { moduleDir: CAPI_MODULE_DIR, packages: CAPI_PROGRAMS.map((p) => p.pkg), ldflags: plan.ldflags };
        await goBuild(step, binDir, log);
        for (const program of CAPI_PROGRAMS) {
          await rename(path.join(binDir, program.builtAs), path.join(binDir, program.binary));
        }
        const source = await moduleDir(CAPI_MODULE_DIR, `sigs.k8s.io/cluster-api@${plan.versions.clusterApi}`);
        await mkdir(path.join(staging, "components"));
        for (const program of CAPI_PROGRAMS) {
          if (program.component === undefined || program.config === undefined) continue;
          const { stdout } = await run(options.kube.bin("kubectl"), ["kustomize", path.join(source, program.config)], {
            maxBuffer: 64 * 1024 * 1024,
            timeout: 120_000,
          });
          await writeFile(path.join(staging, componentsFile(program.component)), stdout);
        }
        await writeFile(path.join(staging, "metadata.yaml"), await readFile(path.join(source, "metadata.yaml")));
      },
    },
    log,
  );
  return {
    versions: plan.versions,
    dir: plan.dir,
    binDir: plan.binDir,
    built,
    buildSeconds,
    bin: (name) => path.join(plan.binDir, name),
    components: (name) => path.join(plan.dir, componentsFile(name)),
    metadataPath: path.join(plan.dir, "metadata.yaml"),
  };
}
