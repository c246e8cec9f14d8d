// A deep copy of JSON-shaped data (what informer objects and statuses are: plain objects, arrays, primitives).
// structuredClone serializes through the host and costs several times more for the small statuses a reconcile
// pass copies each time.

/** Deep copy of plain objects and arrays; anything else (primitives, class instances) is kept as it is. */
export function cloneJson<T>(value: T): T {
  if (Array.isArray(value)) return value.map(cloneJson) as T;
  if (typeof value !== "object" || value === null) return value;
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return value;
  const copy: Record<string, unknown> = {};
  for (const key in value) copy[key] = cloneJson((value as Record<string, unknown>)[key]);
  return copy as T;
}
