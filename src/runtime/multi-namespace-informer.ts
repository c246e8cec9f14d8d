// One informer per watched namespace, read as one cache: what the operator watches when --watch-namespace names
// several namespaces (a list and a watch per namespace, as RBAC scoped to those namespaces allows).
import type { KubernetesObject } from "@kubernetes/client-node";
import { type InformerOptions, type ObjectInformer, ResilientInformer } from "./informer.ts";
import type { InformerHandler, NoteHandler } from "./informer-cache.ts";
import type { KubeResource } from "./resource.ts";

/** One informer per watched namespace, read as one cache. */
export class MultiNamespaceInformer<T extends KubernetesObject = KubernetesObject> implements ObjectInformer<T> {
  readonly resource: KubeResource;
  readonly #informers: Map<string, ResilientInformer<T>>;

  constructor(options: Omit<InformerOptions, "namespace">, namespaces: readonly string[]) {
    if (namespaces.length === 0) throw new RangeError("MultiNamespaceInformer needs at least one namespace");
    this.resource = options.resource;
    this.#informers = new Map(
      namespaces.map((namespace) => [namespace, new ResilientInformer<T>({ ...options, namespace })]),
    );
  }

  on(handler: InformerHandler<T>): () => void {
    const offs = [...this.#informers.values()].map((informer) => informer.on(handler));
    return () => {
      for (const off of offs) off();
    };
  }

  get(namespace: string, name: string): T | undefined {
    return this.#informers.get(namespace)?.get(namespace, name);
  }

  list(namespace?: string): T[] {
    if (namespace !== undefined) return this.#informers.get(namespace)?.list(namespace) ?? [];
    return [...this.#informers.values()].flatMap((informer) => informer.list());
  }

  keys(): string[] {
    return [...this.#informers.values()].flatMap((informer) => informer.keys());
  }

  knows(namespace: string, name: string): boolean {
    return this.#informers.get(namespace)?.knows(namespace, name) ?? false;
  }

  noteOf(namespace: string, name: string): unknown {
    return this.#informers.get(namespace)?.noteOf(namespace, name);
  }

  onNote(handler: NoteHandler<T>): () => void {
    const offs = [...this.#informers.values()].map((informer) => informer.onNote(handler));
    return () => {
      for (const off of offs) off();
    };
  }

  async recheck(namespace: string, name: string): Promise<void> {
    await this.#informers.get(namespace)?.recheck(namespace, name);
  }

  hasSynced(): boolean {
    return [...this.#informers.values()].every((informer) => informer.hasSynced());
  }

  async waitForSync(signal?: AbortSignal): Promise<void> {
    await Promise.all([...this.#informers.values()].map((informer) => informer.waitForSync(signal)));
  }

  syncError(): string | undefined {
    for (const [namespace, informer] of this.#informers) {
      const error = informer.syncError();
      if (error !== undefined) return `namespace ${namespace}: ${error}`;
    }
    return undefined;
  }

  start(): void {
    for (const informer of this.#informers.values()) informer.start();
  }

  async stop(): Promise<void> {
    await Promise.all([...this.#informers.values()].map((informer) => informer.stop()));
  }
}
