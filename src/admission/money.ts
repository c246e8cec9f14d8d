// Dollars per hour as whole micro-dollars. The ledger sums and compares in integers, so twenty a40.1x at $1.10 make
// exactly $22.00 (in floating point they make 22.000000000000004, and a $22 budget would refuse the twentieth).
// Status fields carry dollars (what kubectl shows); they are read back through toMicros.

export const MICROS_PER_DOLLAR = 1_000_000;

/** A dollar amount as written by people or by the status: rounded to the nearest micro-dollar. */
export function toMicros(dollars: number): number {
  return Math.round(dollars * MICROS_PER_DOLLAR);
}

/** A computed price (size × price per GB-hour): rounded up, so a reservation never holds less than it costs. */
export function toMicrosRoundedUp(dollars: number): number {
  const micros = dollars * MICROS_PER_DOLLAR;
  // Float noise (0.13 × 1e6 = 130000.00000000001) is not a real fraction of a micro-dollar.
  return Math.ceil(micros - 1e-6);
}

/** Micro-dollars as dollars for a status field: the nearest double to the decimal (1100000 → 1.1). */
export function toDollars(micros: number): number {
  return micros / MICROS_PER_DOLLAR;
}

/** `$1.10/h`; amounts below a cent keep their significant digits (`$0.000143/h`, a 1 GiB disk). */
export function formatDollarsPerHour(micros: number): string {
  const dollars = toDollars(Math.abs(micros));
  const sign = micros < 0 ? "-" : "";
  if (dollars === 0 || dollars >= 0.01) return `${sign}$${dollars.toFixed(2)}/h`;
  return `${sign}$${dollars.toFixed(6).replace(/0+$/, "")}/h`;
}
