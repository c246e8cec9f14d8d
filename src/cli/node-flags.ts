// The V8 flags the operator runs with (Dockerfile: NODE_OPTIONS; the playground and the bench pass them too).
// --max-semi-space-size=8: V8 otherwise grows the young generation to 64 MiB per semi-space on a large machine,
// and the operator's resident memory with it (idle 196 MiB, 440-540 MiB at 1,000 objects); capped at 8 MiB the
// same burst peaks near 270 MiB for the same CPU. See docs/scaling.md.
export const OPERATOR_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=8"];
