import Table from "cli-table3";

/** Formats a number for tables: 6 significant digits, "-" for missing or non-finite values. */
export function formatNumber(value: number | undefined | null, digits = 6): string {
  if (value === undefined || value === null || !Number.isFinite(value)) return "-";
  if (value === 0) return "0";
  const abs = Math.abs(value);
  return abs >= 1e-4 && abs < 1e6 ? Number(value.toPrecision(digits)).toString() : value.toExponential(digits - 1);
}

/** Renders rows under a header as a plain-text table (cli-table3, no colours). */
export function renderTable(head: string[], rows: (string | number)[][]): string {
  const table = new Table({
    head,
    style: { head: [], border: [] },
    chars: { mid: "", "left-mid": "", "mid-mid": "", "right-mid": "" },
  });
  for (const row of rows) table.push(row.map((c) => (typeof c === "number" ? formatNumber(c) : c)));
  return table.toString();
}
