// The V8 flags the operator runs with.
//
// OPERATOR_NODE_FLAGS go on node's command line (Dockerfile: NODE_OPTIONS; the playground and the bench pass
// them too). --max-semi-space-size=8: V8 otherwise grows the young generation to 64 MiB per semi-space on a large
// machine, and the operator's resident memory with it (idle 196 MiB, 440-540 MiB at 1,000 objects); capped at
// 8 MiB the same burst peaks near 270 MiB for the same CPU.
//
// OPERATOR_RUNTIME_V8_FLAGS are flags Node refuses in NODE_OPTIONS: the run command sets them itself
// (applyRuntimeV8Flags), so the image, the chart, the playground and a plain `node main.ts run` all get them.
// --heap-growing-percent=50: after a full collection V8 lets the old generation grow to 1.5 times what survived
// before collecting again; its own factor goes up to 4 on a machine with much memory, and a heap that grew stays
// committed (at 10,000 objects: 312 MiB of heap for about 100 MiB alive, 440-490 MiB RSS at rest; with 50:
// 135-146 MiB of heap, 259-267 MiB RSS). It costs more full collections: about 0.3 ms of CPU per object (4-7 %);
// a larger value on node's command line trades memory back for CPU. See docs/scaling.md.
//
// The compile cache (NODE_COMPILE_CACHE): Node strips the types of every .ts module with a WebAssembly parser
// (amaro) that, once loaded, holds about 20 MiB of the process's memory for good. With the cache warm, Node takes
// each module's stripped and compiled code from disk and never loads the parser: an operator idles 14–24 MiB
// smaller and starts in half the time. The image warms its cache when it is built (Dockerfile); the processes the
// playground and the bench start share one under the temporary directory (operatorEnvironment).
import { tmpdir } from "node:os";
import path from "node:path";
import { setFlagsFromString } from "node:v8";

export const OPERATOR_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=8"];

export const OPERATOR_RUNTIME_V8_FLAGS: readonly string[] = ["--heap-growing-percent=50"];

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
 * The environment for an operator process started by the playground or the bench: `env` with NODE_COMPILE_CACHE
 * (kept when already set; an empty value keeps the cache off, as for Node itself).
 */
export function operatorEnvironment(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return env.NODE_COMPILE_CACHE === undefined ? { ...env, NODE_COMPILE_CACHE: LOCAL_COMPILE_CACHE_DIR } : { ...env };
}
