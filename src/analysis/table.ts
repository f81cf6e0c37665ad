import { renderTable } from "../cli/table.ts";
import type { Analysis, BoundsSummary } from "./analyze.ts";

/** One table per layer: median bound of each variant, median true value, median ratio. */
export function analysisTables(analysis: Analysis): string {
  const parts: string[] = [];
  const one = (name: string, s: BoundsSummary, note: string) => {
    const rows: (string | number)[][] = analysis.variants.map((v) => [
      v,
      s.bounds[v].median,
      s.true?.median ?? NaN,
      s.ratios?.[v].median ?? NaN,
      s.ratios?.[v].max ?? NaN,
    ]);
    parts.push(`${name} (${note}; medians over ${analysis.inputs} inputs)`);
    parts.push(renderTable(["variant", "bound", "true", "bound/true", "max bound/true"], rows));
  };
  analysis.blocks.forEach((b, i) => one(b.name, analysis.summary.blocks[i], "true value by power iteration"));
  one("network", analysis.summary.network, `exact input-Jacobian norm, input = ${analysis.inputSpace}`);
  return parts.join("\n");
}
