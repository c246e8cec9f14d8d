// Who refers to whom, learned while reconciling: a GpuVm refers to its GpuDisks and Secrets, a rule to its
// GpuNetwork and GpuVms, every object to its credentials Secret. An informer event of a target then wakes
// exactly its dependents (O(1) per event instead of scanning every object). The other direction serves cloud
// side effects: a settled VM operation that attaches or detaches disks wakes the GpuDisks the VM refers to, and
// those it referred to before (a detach happens after the reference is gone). References never cross namespaces.

import { sharedInterner } from "../../util/intern.ts";

export class DependencyIndex {
  /** `TargetKind/namespace/name` → dependent keys per dependent kind. */
  readonly #dependents = new Map<string, Map<string, Set<string>>>();
  /** `DependentKind/namespace/name` → targets it referred to last time (to drop stale edges). */
  readonly #targets = new Map<string, string[]>();
  /** `DependentKind/namespace/name` → targets it referred to earlier but no longer (see `targets`). */
  readonly #former = new Map<string, Set<string>>();

  /** Replace the references of one object (`references` are `Kind/name` in the object's namespace). */
  record(kind: string, namespace: string, name: string, references: readonly string[]): void {
    const self = `${kind}/${namespace}/${name}`;
    const key = `${namespace}/${name}`;
    // Interned: most objects of a namespace refer to the same credentials Secret (one string, not one each).
    const targets = references.map((reference) => {
      const slash = reference.indexOf("/");
      return sharedInterner.intern(`${reference.slice(0, slash)}/${namespace}/${reference.slice(slash + 1)}`);
    });
    // Every pass records its references; the same ones again change nothing.
    const previous = this.#targets.get(self);
    if (previous?.length === targets.length && previous.every((target, index) => target === targets[index])) return;
    const former = this.#former.get(self) ?? new Set<string>();
    for (const old of this.#targets.get(self) ?? []) {
      this.#dependents.get(old)?.get(kind)?.delete(key);
      former.add(old);
    }
    for (const target of targets) former.delete(target);
    if (former.size > 0) this.#former.set(self, former);
    else this.#former.delete(self);
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

  /**
   * Keys (`namespace/name`) of the `targetKind` objects one dependent refers to, and of those it referred to
   * earlier (a dropped reference may still be attached in the cloud until the operation removing it settles).
   */
  targets(dependentKind: string, namespace: string, name: string, targetKind: string): string[] {
    const self = `${dependentKind}/${namespace}/${name}`;
    const prefix = `${targetKind}/`;
    const all = new Set([...(this.#targets.get(self) ?? []), ...(this.#former.get(self) ?? [])]);
    return [...all].filter((target) => target.startsWith(prefix)).map((target) => target.slice(prefix.length));
  }

  /** Keys (`namespace/name`) of `dependentKind` objects that refer to the target. */
  dependents(dependentKind: string, targetKind: string, namespace: string, name: string): string[] {
    return [...(this.#dependents.get(`${targetKind}/${namespace}/${name}`)?.get(dependentKind) ?? [])];
  }
}
