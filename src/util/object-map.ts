// A value per Kubernetes object, keyed by kind, namespace and name in nested Maps rather than by one composite
// `Kind/namespace/name` string: an index with an entry per cached object would otherwise hold one more string of
// 50–80 bytes per object (a new one at each join), where the nested keys are the kind and namespace strings every
// object of them shares and the name the object's own.

export class ObjectMap<V> {
  readonly #byKind = new Map<string, Map<string, Map<string, V>>>();
  #size = 0;

  get size(): number {
    return this.#size;
  }

  get(kind: string, namespace: string, name: string): V | undefined {
    return this.#byKind.get(kind)?.get(namespace)?.get(name);
  }

  set(kind: string, namespace: string, name: string, value: V): void {
    let byNamespace = this.#byKind.get(kind);
    if (byNamespace === undefined) {
      byNamespace = new Map();
      this.#byKind.set(kind, byNamespace);
    }
    let byName = byNamespace.get(namespace);
    if (byName === undefined) {
      byName = new Map();
      byNamespace.set(namespace, byName);
    }
    if (!byName.has(name)) this.#size++;
    byName.set(name, value);
  }

  /** Forgets one object's value; the maps of a namespace and a kind go with their last object. */
  delete(kind: string, namespace: string, name: string): boolean {
    const byNamespace = this.#byKind.get(kind);
    const byName = byNamespace?.get(namespace);
    if (byNamespace === undefined || byName === undefined || !byName.delete(name)) return false;
    this.#size--;
    if (byName.size === 0) byNamespace.delete(namespace);
    if (byNamespace.size === 0) this.#byKind.delete(kind);
    return true;
  }

  /** Every object's kind, namespace, name and value. */
  *entries(): Generator<[kind: string, namespace: string, name: string, value: V]> {
    for (const [kind, byNamespace] of this.#byKind) {
      for (const [namespace, byName] of byNamespace) {
        for (const [name, value] of byName) yield [kind, namespace, name, value];
      }
    }
  }
}
