import type { TopLevelSpec } from "vega-lite";
import { envelopePoints } from "../report/envelope.ts";
import { attentionMapsSpec, blockHeadLayout, type FitWidth } from "../report/charts.ts";
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
 * Sigma of each attention row (query position on x), one small panel per block and head,
 * titled "block b, head h" and wrapped to fit `fit.width` (each block on whole rows), so that
 * any number of heads fits the page's panel.
 *
 * @param rowSigma rowSigma[block][head][query].
 * @param fit the width available (px); default 640.
 * @example rowSigmaSpec([[[0.1, 0.2], [0.3, 0.05]]], { width: 600 })
 */
export function rowSigmaSpec(rowSigma: number[][][], fit: FitWidth = { width: 640 }): TopLevelSpec {
  const values = rowSigma.flatMap((heads, b) =>
    heads.flatMap((rows, h) =>
      rows.map((s, q) => ({ block: `block ${b}`, head: `head ${h}`, q, sigma: s })),
    ),
  );
  const heads = Math.max(1, ...rowSigma.map((h) => h.length));
  // About five ticks along the queries.
  const n = rowSigma[0]?.[0]?.length ?? 1;
  const every = Math.max(1, Math.round(n / 4));
  const panel = Math.max(80, Math.min(160, fit.width - (fit.axisWidth ?? 70)));
  const inner = {
    width: panel,
    height: 70,
    mark: { type: "bar" },
    encoding: {
      x: {
        field: "q",
        type: "ordinal",
        title: "query position",
        axis: {
          labelFontSize: 8,
          labelAngle: 0,
          values: Array.from({ length: Math.ceil(n / every) }, (_, i) => i * every),
        },
      },
      y: { field: "sigma", type: "quantitative", title: "sigma", scale: { domain: [0, 0.5] } },
    },
  };
  return {
    data: { values },
    ...blockHeadLayout(rowSigma.length, heads, panel, 20, fit, inner),
  } as TopLevelSpec;
}

/** The unit spec inside {@link blockHeadLayout}'s small multiples (one object, shared by all). */
function unitOf(spec: unknown): { encoding: Record<"x" | "y", { axis: Record<string, unknown> }> } {
  const s = spec as { spec?: unknown; vconcat?: { spec: unknown }[] };
  return (s.spec ?? s.vconcat![0].spec) as ReturnType<typeof unitOf>;
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

/**
 * The report's attention maps (attentionMapsSpec) of a text, each axis labelled with the
 * tokens ("position:token") when the maps are not pooled (at most `maxCells` tokens).
 *
 * @param fit as attentionMapsSpec's (the y axis's room for the tokens is added here).
 * @example textMapsSpec(maps, ["[CLS]", "free", "money"], 64, { width: 600 })
 */
export function textMapsSpec(
  maps: number[][][],
  tokens: readonly string[],
  maxCells = 64,
  fit?: FitWidth,
): TopLevelSpec {
  // The y axis carries the tokens (up to 90 px) beside its title.
  const spec = attentionMapsSpec(
    maps,
    tokens.length,
    maxCells,
    fit && { axisWidth: tokens.length > maxCells ? 70 : 140, ...fit },
  );
  if (tokens.length > maxCells) return spec;
  const labels = JSON.stringify(
    tokens.map((t, i) => `${i}:${t.length > 12 ? t.slice(0, 11) + "…" : t}`),
  );
  const every = tokens.length > 24 ? 2 : 1;
  for (const [axis, angle] of [
    ["x", -90],
    ["y", 0],
  ] as const)
    Object.assign(unitOf(spec).encoding[axis].axis, {
      values: Array.from({ length: Math.ceil(tokens.length / every) }, (_, i) => i * every),
      labelExpr: `${labels}[datum.value]`,
      labelAngle: angle,
      labelLimit: 90,
    });
  return spec;
}

/**
 * {@link marginSpec} for an attack on token embeddings: eps in embedding units, l_2 or l_inf.
 *
 * @example textMarginSpec([{ eps: 0, predicted: 1, margin: 2 }], "l2")
 */
export function textMarginSpec(points: readonly AttackPoint[], norm: "l2" | "linf"): TopLevelSpec {
  const spec = marginSpec(points) as unknown as {
    layer: { encoding: { x?: { title?: string } } }[];
  };
  spec.layer[0].encoding.x!.title = `eps (${norm === "l2" ? "l_2" : "l_inf"}, token-embedding units)`;
  return spec as unknown as TopLevelSpec;
}

/**
 * {@link rowSigmaSpec} for a text of n tokens: query positions ticked across the whole text.
 *
 * @example textRowSigmaSpec([[[0.1, 0.2, 0.05]]])
 */
export function textRowSigmaSpec(rowSigma: number[][][], fit?: FitWidth): TopLevelSpec {
  const spec = rowSigmaSpec(rowSigma, fit);
  const n = rowSigma[0]?.[0]?.length ?? 0;
  const every = Math.max(1, Math.ceil(n / 6));
  unitOf(spec).encoding.x.axis.values = Array.from(
    { length: Math.ceil(n / every) },
    (_, i) => i * every,
  );
  return spec;
}
