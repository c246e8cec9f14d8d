// Who refers to whom, learned while reconciling: a GpuVm refers to its GpuDisks and Secrets, a rule to its
// GpuNetwork and GpuVms, every object to its credentials Secret. An informer event of a target then wakes
// exactly its dependents (O(1) per event instead of scanning every object). The other direction serves cloud
// side effects: a settled VM operation that attaches or detaches disks wakes the GpuDisks the VM refers to, and
// those it referred to before (a detach happens after the reference is gone). References never cross namespaces.

import { keyOf } from "../../runtime/index.ts";
import { sharedInterner } from "../../util/intern.ts";
import { ObjectMap } from "../../util/object-map.ts";

export class DependencyIndex {
  /**
   * `TargetKind/namespace/name` → per dependent kind, the names of its dependents (references never cross
   * namespaces: the target's is theirs). Names, not `namespace/name` keys: no string of its own per dependent.
   */
  readonly #dependents = new Map<string, Map<string, Set<string>>>();
  /** Dependent → the targets (`TargetKind/namespace/name`) it referred to last time (to drop stale edges). */
  readonly #targets = new ObjectMap<readonly string[]>();
  /** Dependent → targets it referred to earlier but no longer (see `targets`). */
  readonly #former = new ObjectMap<Set<string>>();

  /** Replace the references of one object (`references` are `Kind/name` in the object's namespace). */
  record(kind: string, namespace: string, name: string, references: readonly string[]): void {
    // Interned: most objects of a namespace refer to the same credentials Secret (one string, not one each).
    const targets = references.map((reference) => {
      const slash = reference.indexOf("/");
      return sharedInterner.intern(`${reference.slice(0, slash)}/${namespace}/${reference.slice(slash + 1)}`);
    });
    // Every pass records its references; the same ones again change nothing.
    const previous = this.#targets.get(kind, namespace, name);
    if (previous?.length === targets.length && previous.every((target, index) => target === targets[index])) return;
    const former = this.#former.get(kind, namespace, name) ?? new Set<string>();
    for (const old of previous ?? []) {
      this.#forgetDependent(old, kind, name);
      former.add(old);
    }
    for (const target of targets) former.delete(target);
    if (former.size > 0) this.#former.set(kind, namespace, name, former);
    else this.#former.delete(kind, namespace, name);
    for (const target of targets) {
      let byKind = this.#dependents.get(target);
      if (byKind === undefined) {
        byKind = new Map();
        this.#dependents.set(target, byKind);
      }
      let names = byKind.get(kind);
      if (names === undefined) {
        names = new Set();
        byKind.set(kind, names);
      }
      names.add(name);
    }
    if (targets.length > 0) this.#targets.set(kind, namespace, name, targets);
    else this.#targets.delete(kind, namespace, name);
  }

  /**
   * Keys (`namespace/name`) of the `targetKind` objects one dependent refers to, and of those it referred to
   * earlier (a dropped reference may still be attached in the cloud until the operation removing it settles).
   */
  targets(dependentKind: string, namespace: string, name: string, targetKind: string): string[] {
    const prefix = `${targetKind}/`;
    const all = new Set([
      ...(this.#targets.get(dependentKind, namespace, name) ?? []),
      ...(this.#former.get(dependentKind, namespace, name) ?? []),
    ]);
    return [...all].filter((target) => target.startsWith(prefix)).map((target) => target.slice(prefix.length));
  }

  /** Keys (`namespace/name`) of `dependentKind` objects that refer to the target. */
  dependents(dependentKind: string, targetKind: string, namespace: string, name: string): string[] {
    const names = this.#dependents.get(`${targetKind}/${namespace}/${name}`)?.get(dependentKind);
    return names === undefined ? [] : [...names].map((dependent) => keyOf(namespace, dependent));
  }

  #forgetDependent(target: string, kind: string, name: string): void {
    const byKind = this.#dependents.get(target);
    const names = byKind?.get(kind);
    if (byKind === undefined || names === undefined) return;
    names.delete(name);
    if (names.size > 0) return;
    byKind.delete(kind);
    if (byKind.size === 0) this.#dependents.delete(target);
  }
}
