import { findBoundVariant } from "../lipschitz/variants/index.ts";
import { boundsSpec } from "./charts.ts";
import {
  boundPoints,
  convergenceOf,
  layerOrder,
  layerSummaries,
  type EstimateCount,
  type RunConvergence,
} from "./data.ts";
import { escapeHtml, figure, notAvailable, section, table, warning, type Cell } from "./html.ts";
import type { RunData } from "./load.ts";
import { renderVegaLite } from "./render.ts";
import { quartiles } from "./cells.ts";

/**
 * The report's bounds section: the bounds chart, the legend table (each variant's note from its
 * record, src/lipschitz/variants/) and per run the table of medians and of bound/true.
 */

/**
 * What the legend table says of the series that are not variants; a variant's line is its
 * record's note (src/lipschitz/variants/), and a variant not registered here has none.
 */
const SERIES_NOTES: Record<string, string> = {
  "composition floor":
    "network only: the network bound's product with each block bound replaced by the block's true value; no product of per-block bounds can be lower, and the network's true value is at most it (docs/math.md section 3)",
  true: "the true local Lipschitz constant (exact for the network; for blocks a Lanczos estimate from below, * where some did not converge)",
};

/** The legend table's line for a series: a variant's note, or {@link SERIES_NOTES}'. */
const seriesNote = (name: string): string =>
  SERIES_NOTES[name] ?? findBoundVariant(name)?.note ?? "";

/** The true-value cell of a layer, marked "*" with a count when some of its estimates did not converge. */
function flagUnconverged(cell: Cell, conv: RunConvergence, layer: string): Cell {
  const block = conv.layers.find((l) => l.layer === layer)?.block;
  if (block === undefined || block.unconverged === 0) return cell;
  const html = typeof cell === "string" ? escapeHtml(cell) : cell.html;
  const what = `${block.unconverged} of ${block.estimates} estimates did not converge`;
  return {
    html: `${html} <span class="warn" title="${escapeHtml(what)}">* ${block.unconverged}/${block.estimates}</span>`,
    num: true,
  };
}

/**
 * Under a run's bounds table: how the block and head true values were estimated and how many
 * did not converge (a warning), or that convergence was not recorded (older analysis.json).
 */
function convergenceNote(conv: RunConvergence): string {
  const t = conv.total;
  if (t.estimates === 0) return "";
  const how = [
    conv.method ?? "estimates from below",
    conv.tolerance === null ? null : `residual tolerance ${conv.tolerance.toExponential()}`,
    conv.maxIterations === null ? null : `cap ${conv.maxIterations} products`,
  ]
    .filter((x) => x !== null)
    .join(", ");
  const sum = (key: "block" | "heads", field: keyof EstimateCount) =>
    conv.layers.reduce((a, l) => a + l[key][field], 0);
  const unrecorded =
    t.unrecorded === 0
      ? ""
      : ` ${t.unrecorded} of them have no convergence record (analysis.json from an older attnlip).`;
  if (t.unconverged === 0)
    return `<p class="convergence">True values of blocks and heads: ${t.estimates} estimates from below (${escapeHtml(how)}); ${t.estimates - t.unrecorded} converged.${escapeHtml(unrecorded)}</p>`;
  return warning(
    `${t.unconverged} of ${t.estimates} true values of blocks and heads did not converge ` +
      `(${sum("block", "unconverged")} of ${sum("block", "estimates")} block, ${sum("heads", "unconverged")} of ${sum("heads", "estimates")} head estimates; ${how}): ` +
      "each is low by an unknown amount, so its bound/true values are too high. Blocks with some are marked * (unconverged / estimates)." +
      unrecorded,
  );
}

/**
 * The bounds section of the report: chart (b), the legend of its series and each run's tables.
 *
 * @example await boundsSection(runs) // "<section id=\"bounds\">..."
 */
export async function boundsSection(runs: RunData[]): Promise<string> {
  const variants = [...new Set(runs.flatMap((r) => r.analysis.variants))];
  const layers = layerOrder([...new Set(runs.flatMap((r) => Object.keys(r.analysis.layers)))]);
  const points = boundPoints(runs);
  const chart =
    points.length === 0
      ? notAvailable("no positive bound values to plot")
      : figure(
          "bounds",
          await renderVegaLite(
            boundsSpec(
              points,
              runs.map((r) => r.name),
              layers,
              variants,
            ),
            "bounds",
          ),
          "Median over inputs of every bound variant (colours) and of the true value (black) per block, and for the whole network in its own panel, log scale; each series stands at its own offset beside its block, in the legend's order, so that equal values do not hide each other. The closer a bound lies to the black one, the tighter it is. " +
            "Distribution-aware variants (solid, circles) use each attention row's own sigma; prior art (dashed, squares) uses the worst case 1/2 (t3-half), 1 (t3-one) or a ball bound (castin); the paper's form (dotted, triangle) uses ||X||^2 of the whole input, which makes it looser than prior art here. " +
            (runs.some((r) => layerSummaries(r).some((l) => l.floor !== null))
              ? "The network bound multiplies the block bounds with the factors outside the blocks (embedding, norms, head), so even exact block values give the composition floor (hollow diamond), far above the network's true value: no layer-wise bound can go below it."
              : "") +
            (runs.some((r) => convergenceOf(r).total.unconverged > 0)
              ? " Some block true values did not converge (marked * in the tables below): the black curve may lie low there."
              : ""),
        );
  const legend = table(
    ["variant", "what it is"],
    [
      ...variants,
      "true",
      ...(runs.some((r) => layerSummaries(r).some((l) => l.floor !== null))
        ? ["composition floor"]
        : []),
    ].map((v) => [v, seriesNote(v)]),
  );
  const tables = runs
    .map((run) => {
      const sums = layerSummaries(run);
      const header = ["", ...sums.map((s) => s.layer)];
      const conv = convergenceOf(run);
      const values = [
        ...run.analysis.variants.map((v) => [v, ...sums.map((s) => quartiles(s.bounds[v]))]),
        ["true", ...sums.map((s) => flagUnconverged(quartiles(s.true), conv, s.layer))],
        ...(sums.some((s) => s.floor !== null)
          ? [
              [
                "composition floor",
                ...sums.map((s): Cell => (s.floor === null ? "" : quartiles(s.floor))),
              ],
            ]
          : []),
      ];
      const ratios = run.analysis.variants.map((v) => [
        v,
        ...sums.map((s) => quartiles(s.ratios[v])),
      ]);
      const anyRatio = sums.some((s) => Object.values(s.ratios).some((r) => r !== null));
      return (
        `<h3>${escapeHtml(run.name)}</h3>` +
        table(
          header,
          values,
          `Median bound and true value per layer (q1–q3), ${run.analysis.inputs ?? "?"} inputs`,
        ) +
        convergenceNote(conv) +
        (anyRatio
          ? table(
              header,
              ratios,
              "Median bound/true per layer (q1–q3; 1 would be exact, bigger is looser)",
            )
          : notAvailable("bound/true (no true values)"))
      );
    })
    .join("\n");
  return section("bounds", "Bounds against the true value, per layer", chart + legend + tables);
}
