// Who refers to whom, learned while reconciling: a GpuVm refers to its GpuDisks and Secrets, a rule to its
// GpuNetwork and GpuVms, every object to its credentials Secret. An informer event of a target then wakes
// exactly its dependents (O(1) per event instead of scanning every object). References never cross namespaces.

export class DependencyIndex {
  /** `TargetKind/namespace/name` → dependent keys per dependent kind. */
  readonly #dependents = new Map<string, Map<string, Set<string>>>();
  /** `DependentKind/namespace/name` → targets it referred to last time (to drop stale edges). */
  readonly #targets = new Map<string, string[]>();

  /** Replace the references of one object (`references` are `Kind/name` in the object's namespace). */
  record(kind: string, namespace: string, name: string, references: readonly string[]): void {
    const self = `${kind}/${namespace}/${name}`;
    const key = `${namespace}/${name}`;
    for (const old of this.#targets.get(self) ?? []) this.#dependents.get(old)?.get(kind)?.delete(key);
    const targets = references.map((reference) => {
      const slash = reference.indexOf("/");
      return `${reference.slice(0, slash)}/${namespace}/${reference.slice(slash + 1)}`;
    });
    for (const target of targets) {
      let byKind = this.#dependents.get(target);
      if (byKind === undefined) {
        byKind = new Map();
        this.#dependents.set(target, byKind);
      }
      let keys = byKind.get(kind);
      if (keys === undefined) {
        keys = new Set();
        byKind.set(kind, keys);
      }
      keys.add(key);
    }
    if (targets.length > 0) this.#targets.set(self, targets);
    else this.#targets.delete(self);
  }

  /** Keys (`namespace/name`) of `dependentKind` objects that refer to the target. */
  dependents(dependentKind: string, targetKind: string, namespace: string, name: string): string[] {
    return [...(this.#dependents.get(`${targetKind}/${namespace}/${name}`)?.get(dependentKind) ?? [])];
  }
}
