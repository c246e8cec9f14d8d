// The control plane's binaries (etcd, kube-apiserver, kube-controller-manager, kubectl of one release) and the
// real peers (Argo CD's Lua interpreter, kstatus), built with Go from the modules under test/kubernetes into a
// cache folder keyed by their versions and sources. A second build with the same key is a no-op.
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
function requiredVersion(goMod: string, module: string): string {
  const escaped = module.replaceAll(".", "\\.");
  const match = new RegExp(`^\\s*(?:require\\s+)?${escaped}\\s+(v\\S+)`, "m").exec(goMod);
  if (match?.[1] === undefined) throw new KubeBuildError(`test/kubernetes/go.mod does not require ${module}`);
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

async function goSources(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { withFileTypes: true, recursive: true });
  return entries
    .filter(
      (entry) => entry.isFile() && (/\.go$/.test(entry.name) || entry.name === "go.mod" || entry.name === "go.sum"),
    )
    .map((entry) => path.join(entry.parentPath, entry.name))
    .sort();
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
  const versions: KubeVersions = {
    kubernetes: requiredVersion(goMod, "k8s.io/kubernetes"),
    etcd: requiredVersion(goMod, "go.etcd.io/etcd/server/v3"),
    go: goVersion,
  };
  const hash = createHash("sha256");
  for (const file of [...(await goSources(KUBE_MODULE_DIR))]) {
    hash
      .update(path.relative(KUBE_MODULE_DIR, file))
      .update("\0")
      .update(await readFile(file))
      .update("\0");
  }
  hash.update(JSON.stringify(buildSteps(versions).map((step) => [step.packages, step.ldflags])));
  const key = `k8s-${versions.kubernetes}_etcd-${versions.etcd}_${versions.go}_${hash.digest("hex").slice(0, 12)}`;
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

async function isComplete(plan: KubeBuildPlan): Promise<boolean> {
  if (!(await exists(path.join(plan.dir, "build.json")))) return false;
  for (const name of KUBE_BINARIES) if (!(await exists(path.join(plan.binDir, name)))) return false;
  return true;
}

function finished(plan: KubeBuildPlan, built: boolean, buildSeconds: number): BuiltKube {
  return { ...plan, built, buildSeconds, bin: (name) => path.join(plan.binDir, name) };
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
    // CGO off: static binaries, as Kubernetes releases its control plane, and no C toolchain needed.
    // GOFLAGS=-mod=mod would let go.sum drift; -mod=readonly makes a stale go.sum an error instead.
    const child = spawn("go", args, {
      cwd: step.moduleDir,
      env: { ...process.env, CGO_ENABLED: "0", GOFLAGS: `${process.env.GOFLAGS ?? ""} -mod=readonly`.trim() },
      stdio: ["ignore", "inherit", "inherit"],
    });
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

/**
 * Builds the binaries unless the cache already has this exact build. Prints what it does through `log`.
 * Throws KubeBuildError when Go is missing or the build fails.
 */
export async function ensureKubeBinaries(options: { log?: (line: string) => void } = {}): Promise<BuiltKube> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const plan = await kubeBuildPlan();
  const { kubernetes, etcd, go } = plan.versions;
  const what = `Kubernetes ${kubernetes}, etcd ${etcd}, built with ${go}`;
  if (await isComplete(plan)) {
    log(`kube:build: up to date (${what}) in ${plan.binDir}`);
    return finished(plan, false, 0);
  }
  await mkdir(path.dirname(plan.dir), { recursive: true });
  return withLock(`${plan.dir}.lock`, log, async () => {
    if (await isComplete(plan)) {
      log(`kube:build: built meanwhile by another process (${what}) in ${plan.binDir}`);
      return finished(plan, false, 0);
    }
    log(`kube:build: building ${KUBE_BINARIES.join(", ")} (${what}) into ${plan.binDir}`);
    log("kube:build: a first build compiles Kubernetes and takes minutes; Go's caches make later ones fast");
    const started = Date.now();
    const staging = `${plan.dir}.partial`;
    await rm(staging, { recursive: true, force: true });
    await mkdir(path.join(staging, "bin"), { recursive: true });
    for (const step of buildSteps(plan.versions)) await goBuild(step, path.join(staging, "bin"), log);
    const buildSeconds = Math.round((Date.now() - started) / 100) / 10;
    await writeFile(
      path.join(staging, "build.json"),
      `${JSON.stringify({ versions: plan.versions, builtAt: new Date().toISOString(), buildSeconds }, null, 2)}\n`,
    );
    await rm(plan.dir, { recursive: true, force: true });
    await rename(staging, plan.dir);
    log(`kube:build: built in ${buildSeconds} s (${what}) into ${plan.binDir}`);
    return finished(plan, true, buildSeconds);
  });
}

/** The binaries if this exact build is in the cache, undefined otherwise (never builds). */
export async function builtKubeBinaries(): Promise<BuiltKube | undefined> {
  const goVersion = await findGo();
  if (goVersion === undefined) return undefined;
  const plan = await kubeBuildPlan({ goVersion });
  return (await isComplete(plan)) ? finished(plan, false, 0) : undefined;
}
