// The managed kinds' objects as the informer caches hold them, each parsed once (core/object-model.ts): shared by
// their reconcilers, by the kinds that read them as references, and by the wakes that look up who holds what.
import type { KubernetesObject } from "@kubernetes/client-node";
import type { Manager, ObjectInformer } from "../../runtime/index.ts";
import { resourceOf } from "../core/kube-access.ts";
import { type ManagedObject, ManagedParser, type ManagedSpecBase } from "../core/object-model.ts";
import type { KindDefinition } from "./external.ts";

export class ManagedCaches {
  readonly #informers = new Map<string, ObjectInformer<KubernetesObject>>();
  readonly #parsers = new Map<string, ManagedParser<ManagedSpecBase>>();

  constructor(manager: Manager, kinds: readonly KindDefinition<ManagedSpecBase>[]) {
    for (const { info } of kinds) {
      this.#informers.set(info.kind, manager.informerFor(resourceOf(info)));
      this.#parsers.set(info.kind, new ManagedParser(info.specSchema, info.statusSchema));
    }
  }

  /** The informer of a managed kind (undefined for another kind). */
  informer(kind: string): ObjectInformer<KubernetesObject> | undefined {
    return this.#informers.get(kind);
  }

  /** The one parser of a kind's informer objects (its reconciler's and every reader's). */
  parser(kind: string): ManagedParser<ManagedSpecBase> | undefined {
    return this.#parsers.get(kind);
  }

  /** An informer object of `kind`, parsed; undefined when absent or its spec is invalid. */
  parse(kind: string, raw: unknown): ManagedObject | undefined {
    const parser = this.#parsers.get(kind);
    if (parser === undefined || raw === undefined) return undefined;
    const parsed = parser.parse(raw);
    return parsed.ok ? parsed.object : undefined;
  }

  /** The cached object of `kind`, parsed. */
  get(kind: string, namespace: string, name: string): ManagedObject | undefined {
    return this.parse(kind, this.#informers.get(kind)?.get(namespace, name));
  }

  /** The cached objects of `kind` (of one namespace, or all), parsed; unparseable ones left out. */
  list(kind: string, namespace?: string): ManagedObject[] {
    return (this.#informers.get(kind)?.list(namespace) ?? []).flatMap((raw) => this.parse(kind, raw) ?? []);
  }
}
