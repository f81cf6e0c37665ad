import { describeSplit } from "../data/heldOut.ts";
import type { Summary } from "../stats.ts";
import { escapeHtml, formatNumber, notAvailable, type Cell } from "./html.ts";
import type { RunData } from "./load.ts";

/** Cells and notes the report's sections share. */

/** A summary as "median (q1–q3)", right-aligned; "—" without one. */
export function quartiles(s: Summary | null): Cell {
  if (s === null) return "—";
  return {
    html: `${escapeHtml(formatNumber(s.median))} <small>(${escapeHtml(formatNumber(s.q1))}–${escapeHtml(formatNumber(s.q3))})</small>`,
    num: true,
  };
}

/** Names of runs lacking something, as a "not available" note (empty when none lacks it). */
export function missingNote(runs: RunData[], lacking: RunData[], what: string): string {
  if (lacking.length === 0) return "";
  const who = runs.length > 1 ? `${lacking.map((r) => r.name).join(", ")}: ` : "";
  return notAvailable(`${who}${what}`);
}

/** Which test examples a file used, in words (data/heldOut.ts); older files did not record it. */
export function splitCell(split: Parameters<typeof describeSplit>[0] | undefined): string {
  return split === undefined ? "not recorded (file from an older attnlip)" : describeSplit(split);
}
