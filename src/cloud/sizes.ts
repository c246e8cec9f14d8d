// Disk sizes as the service writes them (`512GiB`, `1TiB`). A server may answer in the other unit
// (`1024GiB` for `1TiB`), so sizes are compared as bytes, never as strings.
import { SIZE_PATTERN } from "./wire.ts";

export const GIB = 1024 ** 3;
export const TIB = 1024 ** 4;

export class InvalidSizeError extends Error {
  override readonly name = "InvalidSizeError";
}

/** `"1TiB"` → 1099511627776. Throws InvalidSizeError for anything but `<whole number>GiB|TiB`. */
export function parseSize(size: string): number {
  const match = SIZE_PATTERN.exec(size.trim());
  if (!match?.[1] || !match[2]) {
    throw new InvalidSizeError(`invalid size ${JSON.stringify(size)}: expected a whole number followed by GiB or TiB`);
  }
  const bytes = Number(match[1]) * (match[2] === "TiB" ? TIB : GIB);
  if (!Number.isSafeInteger(bytes)) throw new InvalidSizeError(`size ${JSON.stringify(size)} is too large`);
  return bytes;
}

/** Bytes → the shortest exact spelling: `"1TiB"`, `"1536GiB"`. Throws unless a positive whole number of GiB. */
export function formatSize(bytes: number): string {
  if (!Number.isSafeInteger(bytes) || bytes <= 0 || bytes % GIB !== 0) {
    throw new InvalidSizeError(`${bytes} bytes is not a positive whole number of GiB`);
  }
  return bytes % TIB === 0 ? `${bytes / TIB}TiB` : `${bytes / GIB}GiB`;
}

/** Negative, zero or positive like a sort comparator; accepts sizes as strings or bytes. */
export function compareSizes(a: string | number, b: string | number): number {
  const left = typeof a === "number" ? a : parseSize(a);
  const right = typeof b === "number" ? b : parseSize(b);
  return Math.sign(left - right);
}

export function sizesEqual(a: string | number, b: string | number): boolean {
  return compareSizes(a, b) === 0;
}
