import Table from "cli-table3";
import { formatNumber } from "./format.ts";

export { formatNumber };

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
