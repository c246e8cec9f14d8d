// What lets V8's memory reducer work in the operator's process on Node 24 (ADR 0034). The reducer is the
// collection that compacts the heap of a process gone quiet and gives its pooled pages back to the system; it
// starts when every allocation rate V8 watches is low, the embedder's (cppgc) among them. Since V8 13.1 that rate
// is a decayed throughput without a floor: in a process that never allocates on cppgc it is exactly 0, and V8
// reads a zero rate as the busiest (ComputeMutatorUtilization returns 0 for it), so the reducer never starts on
// a low rate, only by its watchdog 100 s after the last full collection, which an operator at rest (a background
// look every 30 s) never reaches. Upstream: issues.chromium.org/issues/570738027, nodejs/node#66564.
//
// A small cppgc allocation now and then keeps that rate above zero: compiling a one-character `vm.Script` (Node
// allocates its ContextifyScript on cppgc). Nothing else changes: no V8 flag, no collection started here; V8's
// own rule decides when the process is quiet. Remove this with a Node whose V8 reads a zero embedder rate as low
// (test/cli/memory-reducer.test.ts says when: its run without this module then sees the reducer start).
import { Script } from "node:vm";

/**
 * Often enough that the decayed rate never reaches exactly 0 between two allocations (it does after a while, by
 * floating-point underflow: about 100 s by the upstream report's reading).
 */
export const EMBEDDER_ALLOCATION_INTERVAL_MS = 20_000;

/** Starts the periodic cppgc allocation (on an unref'd timer); returns its stop. */
export function keepEmbedderAllocationRateAboveZero(intervalMs = EMBEDDER_ALLOCATION_INTERVAL_MS): () => void {
  const allocate = (): Script => new Script("0");
  allocate();
  const timer = setInterval(allocate, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
