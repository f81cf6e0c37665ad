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
