import type { TopLevelSpec } from "vega-lite";
import { envelopePoints } from "../report/envelope.ts";
import type { AttackPoint } from "./compute.ts";

/**
 * The explorer's own Vega-Lite charts (the attention maps are the report's, charts.ts):
 * rendered to SVG on the page by the report's renderVegaLite.
 */

/**
 * The region attention rows can occupy in the (p_(1), sigma) plane (report/envelope.ts) with
 * the playground's row as a point.
 *
 * @example envelopeWithRowSpec(0.5, 0.388)
 */
export function envelopeWithRowSpec(p1: number, sigma: number): TopLevelSpec {
  return {
    width: 320,
    height: 200,
    layer: [
      {
        data: { values: envelopePoints(100) },
        mark: { type: "line" },
        encoding: {
          x: { field: "p1", type: "quantitative", title: "p(1), the row's largest probability" },
          y: { field: "sigma", type: "quantitative", title: "sigma", scale: { domain: [0, 0.5] } },
          color: { field: "curve", type: "nominal", title: null, legend: { orient: "bottom" } },
        },
      },
      {
        data: { values: [{ p1, sigma }] },
        mark: { type: "point", filled: true, size: 90, color: "black" },
        encoding: {
          x: { field: "p1", type: "quantitative" },
          y: { field: "sigma", type: "quantitative" },
        },
      },
    ],
  } as TopLevelSpec;
}

/**
 * Sigma of each attention row (query position on x), one small panel per block and head.
 *
 * @param rowSigma rowSigma[block][head][query].
 * @example rowSigmaSpec([[[0.1, 0.2], [0.3, 0.05]]])
 */
export function rowSigmaSpec(rowSigma: number[][][]): TopLevelSpec {
  const values = rowSigma.flatMap((heads, b) =>
    heads.flatMap((rows, h) =>
      rows.map((s, q) => ({ block: `block ${b}`, head: `head ${h}`, q, sigma: s })),
    ),
  );
  return {
    data: { values },
    facet: {
      row: { field: "block", type: "ordinal", title: null },
      column: { field: "head", type: "ordinal", title: null },
    },
    spec: {
      width: 160,
      height: 70,
      mark: { type: "bar" },
      encoding: {
        x: {
          field: "q",
          type: "ordinal",
          title: "query position",
          axis: { labelFontSize: 8, labelAngle: 0, values: [0, 4, 8, 12, 16] },
        },
        y: { field: "sigma", type: "quantitative", title: "sigma", scale: { domain: [0, 0.5] } },
      },
    },
  } as TopLevelSpec;
}

/**
 * The attack's margin (true logit minus the largest other) against eps; below 0 the image is
 * misclassified.
 *
 * @example marginSpec([{ eps: 0, predicted: 7, margin: 4.2 }, { eps: 0.1, predicted: 3, margin: -1 }])
 */
export function marginSpec(points: readonly AttackPoint[]): TopLevelSpec {
  return {
    width: 320,
    height: 160,
    layer: [
      {
        data: { values: points.map((p) => ({ ...p })) },
        mark: { type: "line", point: true },
        encoding: {
          x: { field: "eps", type: "quantitative", title: "eps (l_inf, pixels in [0, 1])" },
          y: { field: "margin", type: "quantitative", title: "margin" },
          tooltip: [{ field: "predicted", type: "quantitative" }],
        },
      },
      {
        data: { values: [{ zero: 0 }] },
        mark: { type: "rule", strokeDash: [4, 4], color: "#c00" },
        encoding: { y: { field: "zero", type: "quantitative" } },
      },
    ],
  } as TopLevelSpec;
}
