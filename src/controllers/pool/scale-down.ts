// Which replicas of a GpuVmPool go first when it has more than it needs: the ones a person marked with
// gpucloud.dev/delete-first: "true", then those that are not Ready (they serve nobody), then those of an old
// template revision, then the newest (the oldest have proven themselves), and by name last so that the order is
// stable.

export interface RemovalCandidate {
  name: string;
  deleteFirst: boolean;
  ready: boolean;
  outdated: boolean;
  /** When the replica was created (its GpuVm), or recorded when it has none yet; ms since the epoch. */
  createdAtMs: number;
}

function rank(candidate: RemovalCandidate): number[] {
  return [candidate.deleteFirst ? 0 : 1, candidate.ready ? 1 : 0, candidate.outdated ? 0 : 1, -candidate.createdAtMs];
}

/** The candidates, first to remove first. */
export function removalOrder<T extends RemovalCandidate>(candidates: readonly T[]): T[] {
  return [...candidates].sort((a, b) => {
    const left = rank(a);
    const right = rank(b);
    for (let index = 0; index < left.length; index++) {
      const difference = (left[index] ?? 0) - (right[index] ?? 0);
      if (difference !== 0) return difference;
    }
    return a.name < b.name ? 1 : a.name > b.name ? -1 : 0;
  });
}
