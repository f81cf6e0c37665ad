/**
 * Formats a number for tables and messages: 6 significant digits, "-" for missing or
 * non-finite values.
 *
 * @example formatNumber(0.38810249675906655) // "0.388102"
 */
export function formatNumber(value: number | undefined | null, digits = 6): string {
  if (value === undefined || value === null || !Number.isFinite(value)) return "-";
  if (value === 0) return "0";
  const abs = Math.abs(value);
  return abs >= 1e-4 && abs < 1e6 ? Number(value.toPrecision(digits)).toString() : value.toExponential(digits - 1);
}

/**
 * A count with its noun, singular for exactly one: every message that counts bytes, inputs,
 * blocks, ... words it this way ("1 byte", not "1 bytes").
 *
 * @param count a number or bigint (a header length read as a 64-bit integer).
 * @param plural the plural when it is not noun + "s".
 * @example counted(1, "byte") // "1 byte"
 * @example counted(0, "byte") // "0 bytes"
 * @example counted(3n, "entry", "entries") // "3 entries"
 */
export function counted(count: number | bigint, noun: string, plural = `${noun}s`): string {
  return `${count} ${count === 1 || count === 1n ? noun : plural}`;
}
