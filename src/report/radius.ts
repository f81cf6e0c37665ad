import type { TopLevelSpec } from "vega-lite";
import { growth, MAP_NOTE, RADIUS_MEASURE_NOTE, summaryRows } from "../radius/document.ts";
import type { InputSet, RadiusPoint, RadiusResult } from "../radius/sweep.ts";
import { escapeHtml, figure, formatNumber, page, section, table } from "./html.ts";
import { renderVegaLite } from "./render.ts";
import { variantColours } from "../lipschitz/variants/index.ts";

/**
 * The radius report (radius.html, written by `attnlip radius`): the local Lipschitz constant of
 * one attention sub-layer against the input radius R (log-log) and against the sequence length
 * n, the true value solid and every bound variant dashed, a horizontal line per global bound
 * (a bound that holds at every input; none for dot-product attention), and the median tables.
 */

const SETS: InputSet[] = ["held-out", "constructed"];

/** Chart rows: one per (set, x, series) with the median over inputs. */
function chartRows(result: RadiusResult, sweep: RadiusPoint["sweep"]) {
  return SETS.flatMap((set) =>
    summaryRows(result, sweep, set).flatMap((r) => [
      { set, x: r.x, series: "true", value: r.trueMedian },
      ...result.variants.map((v) => ({ set, x: r.x, series: v, value: r.bounds[v] })),
    ]),
  ).filter((r) => r.value > 0 && Number.isFinite(r.value));
}

/**
 * One panel per input set: x (R or n, log scale) against the medians (log scale); the true value
 * a solid black line, each variant a dashed coloured line, each global bound a grey horizontal rule.
 *
 * @example sweepSpec(result, "radius") // local constant against R, log-log
 */
export function sweepSpec(result: RadiusResult, sweep: RadiusPoint["sweep"]): TopLevelSpec {
  const rows = chartRows(result, sweep);
  const series = ["true", ...result.variants];
  const colour = {
    field: "series",
    type: "nominal",
    scale: {
      domain: series,
      range: ["black", ...variantColours(result.variants)],
    },
    title: "median of",
    legend: { labelLimit: 400, symbolStrokeWidth: 2 },
  };
  const dash = {
    field: "series",
    type: "nominal",
    scale: { domain: series, range: series.map((s) => (s === "true" ? [1, 0] : [6, 3])) },
    legend: null,
  };
  const x = {
    field: "x",
    type: "quantitative",
    scale: { type: "log" },
    title:
      sweep === "radius"
        ? "R (largest token norm, log scale)"
        : `n (tokens, log scale; R = ${result.lengthRadius})`,
  };
  const y = {
    field: "value",
    type: "quantitative",
    scale: { type: "log" },
    axis: { format: ".0e" },
    title: "local Lipschitz constant (log scale)",
  };
  const panel = (set: InputSet) => ({
    title: { text: `${set} inputs`, fontSize: 13 },
    width: 360,
    height: 280,
    layer: [
      {
        data: { values: rows.filter((r) => r.set === set) },
        mark: { type: "line", point: { size: 25, filled: true } },
        encoding: {
          x,
          y,
          color: colour,
          strokeDash: dash,
          strokeWidth: { condition: { test: "datum.series === 'true'", value: 3 }, value: 1.5 },
        },
      },
      ...(result.globalBounds.length > 0
        ? [
            {
              data: { values: result.globalBounds.map((b) => ({ name: b.name, value: b.value })) },
              mark: { type: "rule", color: "#888", strokeWidth: 1.5 },
              encoding: { y: { field: "value", type: "quantitative" } },
            },
          ]
        : []),
    ],
  });
  const sets = SETS.filter((s) => rows.some((r) => r.set === s));
  return {
    hconcat: sets.map(panel),
    resolve: { scale: { y: "shared", color: "shared", strokeDash: "shared" } },
  } as unknown as TopLevelSpec;
}

/** The median table of one sweep and set. */
function medianTable(result: RadiusResult, sweep: RadiusPoint["sweep"], set: InputSet): string {
  const rows = summaryRows(result, sweep, set);
  if (rows.length === 0) return "";
  return table(
    [sweep === "radius" ? "R" : "n", "true", ...result.variants],
    rows.map((r) => [
      formatNumber(r.x),
      formatNumber(r.trueMedian),
      ...result.variants.map((v) => formatNumber(r.bounds[v])),
    ]),
    `${set} inputs: medians over ${rows[0].inputs} input${rows[0].inputs === 1 ? "" : "s"}`,
  );
}

/**
 * The whole radius.html page.
 *
 * @param source what the model is (for the header).
 * @returns a self-contained HTML page (inline SVG, no scripts).
 * @example await buildRadiusReport(result, "vit-micro (random init, seed 0)")
 */
export async function buildRadiusReport(result: RadiusResult, source: string): Promise<string> {
  const g = growth(result);
  const fmt = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : "n/a");
  const global =
    result.globalBounds.length === 0
      ? `No global bound: kind "${result.layer.kind}" registers none (dot-product attention is not globally Lipschitz), so no horizontal line is drawn.`
      : `Global bounds (grey horizontal lines): ${result.globalBounds.map((b) => `${b.name} = ${formatNumber(b.value)}`).join(", ")}.`;
  const parts = [
    `<h1>Local Lipschitz constant against radius and length</h1>`,
    `<p class="runs">${escapeHtml(source)}: block ${result.block}, layer ${escapeHtml(result.layer.name)} (kind ${escapeHtml(result.layer.kind)}), n = ${result.tokens} tokens of width ${result.d}; ${result.inputs.heldOut} held-out input(s), ${result.inputs.constructed} constructed (one per head).</p>`,
    `<div class="howto"><p>The map: ${escapeHtml(MAP_NOTE)}.</p><p>${escapeHtml(RADIUS_MEASURE_NOTE)}.</p><p>Growth of the median true value (log-log slope): against R over R &gt;= ${formatNumber(g.fromRadius)}, held-out ${fmt(g.radius["held-out"])}, constructed ${fmt(g.radius.constructed)}; against n, held-out ${fmt(g.length["held-out"])}, constructed ${fmt(g.length.constructed)}.</p><p>${escapeHtml(global)}</p></div>`,
  ];
  const radius = figure(
    "radius",
    await renderVegaLite(sweepSpec(result, "radius"), "radius"),
    "Median local Lipschitz constant against R (log-log): the true value solid black, each bound variant dashed.",
  );
  parts.push(
    section(
      "against-radius",
      "Against the radius R",
      [radius, ...SETS.map((s) => medianTable(result, "radius", s))].join("\n"),
    ),
  );
  if (result.lengths.length > 0) {
    const length = figure(
      "length",
      await renderVegaLite(sweepSpec(result, "length"), "length"),
      `Median local Lipschitz constant against n at R = ${result.lengthRadius} (log-log).`,
    );
    parts.push(
      section(
        "against-length",
        "Against the sequence length n",
        [length, ...SETS.map((s) => medianTable(result, "length", s))].join("\n"),
      ),
    );
  }
  if (result.notes.length > 0)
    parts.push(
      section(
        "notes",
        "Notes",
        `<ul>${result.notes.map((n) => `<li>${escapeHtml(n)}</li>`).join("")}</ul>`,
      ),
    );
  parts.push(
    `<footer>Made by attnlip radius. Charts: Vega-Lite, rendered to SVG without a browser. This file needs no network.</footer>`,
  );
  return page(`attnlip radius: ${result.layer.name}`, parts.join("\n"));
}
