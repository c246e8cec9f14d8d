// Copying and comparing JSON-shaped data (what informer objects and statuses are: plain objects, arrays,
// primitives), on every reconcile pass. structuredClone serializes through the host and util.isDeepStrictEqual
// handles every kind of value: both cost several times more for the small statuses a pass copies and compares.

/** An object literal's kind of object (or one without a prototype): what JSON.parse makes. */
export const isPlainObject = (value: object): boolean => {
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
};

/** Deep copy of plain objects and arrays; anything else (primitives, class instances) is kept as it is. */
export function cloneJson<T>(value: T): T {
  if (Array.isArray(value)) return value.map(cloneJson) as T;
  if (typeof value !== "object" || value === null || !isPlainObject(value)) return value;
  const copy: Record<string, unknown> = {};
  for (const key in value) copy[key] = cloneJson((value as Record<string, unknown>)[key]);
  return copy as T;
}

/**
 * Whether two JSON values serialize alike: equal primitives, arrays item by item, plain objects key by key in any
 * order, a key whose value is undefined counting as absent (JSON drops it). Other objects only when identical.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let index = 0; index < a.length; index++) if (!sameJson(a[index], b[index])) return false;
    return true;
  }
  if (Array.isArray(b) || !isPlainObject(a) || !isPlainObject(b)) return false;
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  let defined = 0;
  for (const key in left) {
    if (left[key] === undefined) continue;
    defined++;
    if (!sameJson(left[key], right[key])) return false;
  }
  for (const key in right) if (right[key] !== undefined) defined--;
  return defined === 0;
}
