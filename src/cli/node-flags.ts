// The V8 flags and the environment the operator runs with, and why (the figures: ADR 0017, docs/scaling.md).
//
// OPERATOR_NODE_FLAGS go on node's command line (Dockerfile: NODE_OPTIONS; the playground and the bench pass
// them too). --max-semi-space-size=4: V8 otherwise grows the young generation to 64 MiB per semi-space on a large
// machine, and the operator's resident memory with it, for no CPU saved. --v8-pool-size=2: V8's helper threads
// (concurrent marking and sweeping, background compiles) are two instead of Node's four; each thread that allocates
// holds a malloc arena of its own, and on a pod of one or two cores more helpers only take turns.
//
// OPERATOR_RUNTIME_V8_FLAGS are flags Node refuses in NODE_OPTIONS: the run command sets them itself, once, before
// anything else (applyRuntimeV8Flags; nothing changes them later, ADR 0027), so the image, the chart, the
// playground and a plain `node main.ts run` all get them. --heap-growing-percent=50: after a full collection V8
// lets the old generation grow to 1.5 times what survived before collecting again; its own factor goes up to 4 on
// a machine with much memory, and a heap that grew stays committed. It costs more full collections; a larger value
// on node's command line trades memory back for CPU.
//
// OPERATOR_ENVIRONMENT is read by the C library when the process starts, so it is set by whoever starts the
// operator: the image (Dockerfile ENV), the playground and the bench (operatorEnvironment); a `node main.ts run`
// typed in a shell goes without it. MALLOC_MMAP_THRESHOLD_=131072: glibc gives every allocation of 128 KiB or more
// a mapping of its own and returns it to the system when freed. By default it raises that threshold to the size of
// each such block freed, after which large buffers (HTTP answers, pages of a list, V8's compiler zones) come from
// its heaps, where small long-lived allocations between them keep the memory from being returned.
//
// The compile cache (NODE_COMPILE_CACHE): Node strips the types of every .ts module with a WebAssembly parser
// (amaro) that, once loaded, holds its memory for good. With the cache warm, Node takes each module's stripped and
// compiled code from disk and never loads the parser: the operator idles smaller and starts faster. The image
// warms its cache when it is built (Dockerfile); the processes the playground and the bench start share one under
// the temporary directory (operatorEnvironment).
import { tmpdir } from "node:os";
import path from "node:path";
import { setFlagsFromString } from "node:v8";

export const OPERATOR_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=4", "--v8-pool-size=2"];

export const OPERATOR_RUNTIME_V8_FLAGS: readonly string[] = ["--heap-growing-percent=50"];

export const OPERATOR_ENVIRONMENT: Readonly<Record<string, string>> = { MALLOC_MMAP_THRESHOLD_: "131072" };

/**
 * Sets OPERATOR_RUNTIME_V8_FLAGS, except those node's command line already sets (its value wins). Returns the
 * flags it set. V8 reads these at every collection, so setting them once running takes effect.
 */
export function applyRuntimeV8Flags(
  execArgv: readonly string[] = process.execArgv,
  set: (flag: string) => void = setFlagsFromString,
): string[] {
  const named = (arg: string): string => arg.split("=")[0]?.replaceAll("_", "-") ?? arg;
  const given = new Set(execArgv.map(named));
  const applied = OPERATOR_RUNTIME_V8_FLAGS.filter((flag) => !given.has(named(flag)));
  for (const flag of applied) set(flag);
  return applied;
}

/** The compile cache of operator processes started from a checkout (playground, bench), unless one is set. */
export const LOCAL_COMPILE_CACHE_DIR = path.join(tmpdir(), "gpuvm-operator-compile-cache");

/**
 * The environment for an operator process started by the playground or the bench: `env` with OPERATOR_ENVIRONMENT
 * and NODE_COMPILE_CACHE, each kept when `env` already sets it (an empty NODE_COMPILE_CACHE keeps the cache off, as
 * for Node itself).
 */
export function operatorEnvironment(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const merged: NodeJS.ProcessEnv = { ...OPERATOR_ENVIRONMENT, ...env };
  if (merged.NODE_COMPILE_CACHE === undefined) merged.NODE_COMPILE_CACHE = LOCAL_COMPILE_CACHE_DIR;
  return merged;
}
