// The object model every controller reads, derived from the zod schemas of src/api (never written twice): an
// informer object parsed into metadata with its defaults filled in, a spec of the kind's schema and a status of
// its schema. An object whose spec is invalid still parses, with an empty spec, so that its status can say why.
// Parses are remembered per informer object: the informer replaces an object on every change, so its identity
// stands for its resourceVersion.
import { z } from "zod";
import {
  type ActionPending,
  type Condition,
  type CreatePending,
  type ManagedSpec,
  type ManagedStatus,
  ObjectMeta as ObjectMetaSchema,
  type OperationRecord,
} from "../../api/common.ts";
import { keyOf } from "../../runtime/index.ts";
import { sameJson } from "../../util/json-values.ts";

export type { ActionPending, Condition, CreatePending, OperationRecord };
export type ConditionStatus = Condition["status"];

/**
 * Absent annotations and labels, shared: most objects have neither, and every cached object's parse holds its
 * metadata (two empty objects each were 1 MiB at 10,000 objects). Frozen: a pass never writes metadata in place.
 */
const NO_STRINGS: Readonly<Record<string, string>> = Object.freeze({});

/** The metadata a pass reads: the API's, with absent fields as their empty values (a pass never tests for them). */
const ManagedMeta = ObjectMetaSchema.transform((meta) => ({
  namespace: meta.namespace,
  name: meta.name,
  uid: meta.uid ?? "",
  generation: meta.generation ?? 0,
  resourceVersion: meta.resourceVersion ?? "",
  finalizers: meta.finalizers ?? [],
  annotations: meta.annotations ?? NO_STRINGS,
  // What a GpuBudget's selector reads.
  labels: meta.labels ?? NO_STRINGS,
  ...(meta.deletionTimestamp ? { deletionTimestamp: meta.deletionTimestamp } : {}),
  ...(meta.creationTimestamp ? { creationTimestamp: meta.creationTimestamp } : {}),
}));
export type ObjectMeta = z.output<typeof ManagedMeta>;

const Envelope = z.object({
  apiVersion: z.string().default(""),
  kind: z.string().default(""),
  metadata: ManagedMeta,
  status: z.record(z.string(), z.unknown()).optional(),
});

/** The fields every kind's spec shares, as the schema gives them; none is certain (an invalid spec reads as {}). */
export type ManagedSpecBase = Partial<ManagedSpec>;

/** The fields every kind's status shares; a kind's own fields ride along in the same record. */
export type ManagedStatusBase = ManagedStatus & { [field: string]: unknown };

export type ManagedObject<Spec extends ManagedSpecBase = ManagedSpecBase> = Pick<
  z.output<typeof Envelope>,
  "apiVersion" | "kind" | "metadata"
> & { spec: Spec; status: ManagedStatusBase };

export type Parsed<Spec extends ManagedSpecBase> =
  | { ok: true; object: ManagedObject<Spec> }
  | { ok: false; object?: ManagedObject; message: string };

/** The work queue's key of an object (`namespace/name`, as the runtime's keyOf and parseKey spell it). */
export const objectKey = (object: { metadata: { namespace: string; name: string } }): string =>
  keyOf(object.metadata.namespace, object.metadata.name);

/** Whether a status says Ready=True (a managed object's, or a pool member's as the pool reads it). */
export function isReady(status: { conditions?: readonly { type: string; status: string }[] } | undefined): boolean {
  return status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}

/** A schema's verdict on one value, as zod's safeParse gives it. */
type SchemaVerdict<T> = { success: true; data: T } | { success: false; error: z.ZodError };

/**
 * A verdict remembered for a value that parsed to itself (the common case: the API server applied the CRD's
 * defaults already): one shared marker instead of a verdict object per cached spec and status.
 */
const PARSED_AS_IS = Symbol("parsed as is");
type Remembered = SchemaVerdict<unknown> | typeof PARSED_AS_IS;

/**
 * Verdicts remembered per value (by identity). The informer hands a new version the previous version's spec or
 * status object when it did not change (informer.ts `shareUnchanged`), so a status write does not parse the spec
 * again, nor a finalizer write the status.
 */
export interface VerdictMemo {
  spec: WeakMap<object, Remembered>;
  status: WeakMap<object, Remembered>;
}

/**
 * The verdict of `schema` on `value`, remembered in `memo` when given. Where the parsed value equals the one given
 * (the API server applied the CRD's defaults already), the given one is kept: a parse costs no second copy. The
 * comparison is JSON's (sameJson: no copies, unlike util.isDeepStrictEqual): both are JSON-shaped.
 */
function verdictOf<T>(schema: z.ZodType<T>, value: unknown, memo?: WeakMap<object, Remembered>): SchemaVerdict<T> {
  const remembered = memo !== undefined && typeof value === "object" && value !== null;
  if (remembered) {
    const known = memo.get(value);
    if (known === PARSED_AS_IS) return { success: true, data: value as T };
    if (known !== undefined) return known as SchemaVerdict<T>;
  }
  const parsed = schema.safeParse(value);
  if (parsed.success && sameJson(parsed.data, value)) {
    if (remembered) memo.set(value, PARSED_AS_IS);
    return { success: true, data: value as T };
  }
  const verdict: SchemaVerdict<T> = parsed.success
    ? { success: true, data: parsed.data }
    : { success: false, error: parsed.error };
  if (remembered) memo.set(value, verdict);
  return verdict;
}

/** Informer object → the object model. An invalid spec still yields the object, so status can say why. */
export function parseManaged<Spec extends ManagedSpecBase>(
  raw: unknown,
  specSchema: z.ZodType<Spec>,
  statusSchema: z.ZodType,
  memo?: VerdictMemo,
): Parsed<Spec> {
  const envelope = Envelope.safeParse(raw);
  if (!envelope.success) return { ok: false, message: `malformed object: ${z.prettifyError(envelope.error)}` };
  // The raw status, not the envelope's copy of it: its identity is what the memo knows it by.
  const rawStatus = (raw as { status?: unknown }).status ?? {};
  const status = verdictOf(statusSchema, rawStatus, memo?.status);
  const base = {
    apiVersion: envelope.data.apiVersion,
    kind: envelope.data.kind,
    metadata: envelope.data.metadata,
    status: (status.success ? status.data : rawStatus) as ManagedStatusBase,
  };
  const spec = verdictOf(specSchema, (raw as { spec?: unknown }).spec ?? {}, memo?.spec);
  if (!spec.success) {
    const issues = spec.error.issues.map((issue) => `spec.${issue.path.join(".")}: ${issue.message}`);
    return { ok: false, object: { ...base, spec: {} }, message: `invalid spec: ${issues.join("; ")}` };
  }
  return { ok: true, object: { ...base, spec: spec.data } };
}

/**
 * Parses each informer object of a kind once. The informer replaces its object on every change, so the raw
 * object's identity stands for its resourceVersion, and a WeakMap keyed by it forgets a parse with the object;
 * the verdicts on its spec and status are remembered by theirs (see VerdictMemo).
 * Every call hands out a copy whose top level and metadata are its own: a pass moves metadata.resourceVersion
 * after its own write and replaces status, and that must not leak into the next pass. Spec and status are shared
 * and never changed in place (a pass drafts a copy).
 */
export class ManagedParser<Spec extends ManagedSpecBase> {
  readonly #specSchema: z.ZodType<Spec>;
  readonly #statusSchema: z.ZodType;
  readonly #parsed = new WeakMap<object, Parsed<Spec>>();
  readonly #memo: VerdictMemo = { spec: new WeakMap(), status: new WeakMap() };

  constructor(specSchema: z.ZodType<Spec>, statusSchema: z.ZodType) {
    this.#specSchema = specSchema;
    this.#statusSchema = statusSchema;
  }

  parse(raw: unknown): Parsed<Spec> {
    if (typeof raw !== "object" || raw === null) return parseManaged(raw, this.#specSchema, this.#statusSchema);
    let parsed = this.#parsed.get(raw);
    if (parsed === undefined) {
      parsed = parseManaged(raw, this.#specSchema, this.#statusSchema, this.#memo);
      this.#parsed.set(raw, parsed);
    }
    if (parsed.ok) return { ok: true, object: ownCopy(parsed.object) };
    return parsed.object === undefined ? parsed : { ...parsed, object: ownCopy(parsed.object) };
  }
}

function ownCopy<T extends ManagedObject>(object: T): T {
  return { ...object, metadata: { ...object.metadata } };
}
