import type { TopLevelSpec } from "vega-lite";
import { ENVELOPE_CURVES, envelopePoints } from "./envelope.ts";
import { histogram, poolMap, subsample, type EpochPoint, type StepPoint } from "./data.ts";

/**
 * The report's Vega-Lite specifications, one builder per chart. Each takes plain data and
 * returns a specification with its data inline; render.ts turns it into SVG. The bounds chart
 * (b) is in boundsChart.ts.
 */

export { boundsSpec, variantFamily } from "./boundsChart.ts";

/** Colours of the first and second run (blue, orange), the same in every chart. */
export const RUN_COLOURS = ["#4c78a8", "#f58518"];

function runScale(runs: string[]) {
  return { domain: runs, range: RUN_COLOURS.slice(0, runs.length) };
}

/** Attention rows of one run for chart (a) and (c). */
export interface RunRows {
  run: string;
  top1: readonly number[];
  sigma: readonly number[];
}

/**
 * Chart (a): sigma against p_(1) for sampled attention rows, colour by run, with the upper
 * envelope sigmaMax(p_(1)) and the lower bound p_(1)(1 - p_(1)) (envelope.ts).
 *
 * @param maxPoints rows drawn per run (evenly subsampled).
 */
export function sigmaScatterSpec(rows: RunRows[], maxPoints = 1500): TopLevelSpec {
  const points = rows.flatMap((r) =>
    subsample(
      r.top1.map((p1, i) => ({ run: r.run, p1, sigma: r.sigma[i] })),
      maxPoints,
    ),
  );
  const runs = rows.map((r) => r.run);
  return {
    width: 390,
    height: 300,
    layer: [
      {
        data: { values: points },
        mark: { type: "circle", size: 14, opacity: 0.4 },
        encoding: {
          x: {
            field: "p1",
            type: "quantitative",
            scale: { domain: [0, 1] },
            title: "p(1): largest probability of the attention row",
          },
          y: {
            field: "sigma",
            type: "quantitative",
            scale: { domain: [0, 0.5] },
            title: "sigma (softmax Jacobian norm)",
          },
          color: {
            field: "run",
            type: "nominal",
            scale: runScale(runs),
            title: "run",
            legend: { symbolOpacity: 1 },
          },
        },
      },
      {
        data: { values: envelopePoints(200) },
        mark: { type: "line", color: "black", strokeWidth: 1.5 },
        encoding: {
          x: { field: "p1", type: "quantitative" },
          y: { field: "sigma", type: "quantitative" },
          strokeDash: {
            field: "curve",
            type: "nominal",
            scale: {
              domain: [ENVELOPE_CURVES.upper, ENVELOPE_CURVES.lower],
              range: [
                [1, 0],
                [5, 4],
              ],
            },
            title: "envelope",
            legend: { labelLimit: 260, symbolStrokeWidth: 1.5 },
          },
        },
      },
    ],
  } as TopLevelSpec;
}

/** Chart (c): distributions of p_(1) and of sigma over attention rows, one area per run (fractions of rows). */
export function distributionsSpec(rows: RunRows[], bins = 40): TopLevelSpec {
  const runs = rows.map((r) => r.run);
  const panel = (
    values: { run: string; x: number; fraction: number }[],
    title: string,
    domain: [number, number],
  ) => ({
    data: { values },
    width: 270,
    height: 200,
    layer: [
      {
        mark: { type: "area", interpolate: "step", opacity: 0.3 },
        encoding: {
          x: { field: "x", type: "quantitative", scale: { domain }, title },
          y: { field: "fraction", type: "quantitative", title: "fraction of rows", stack: null },
          color: {
            field: "run",
            type: "nominal",
            scale: runScale(runs),
            title: "run",
            // Below the panels: two panels and a legend at the side would not fit 800 px.
            legend: { symbolOpacity: 1, orient: "bottom" },
          },
        },
      },
      {
        mark: { type: "line", interpolate: "step", strokeWidth: 1.5 },
        encoding: {
          x: { field: "x", type: "quantitative" },
          y: { field: "fraction", type: "quantitative" },
          color: { field: "run", type: "nominal", scale: runScale(runs) },
        },
      },
    ],
  });
  const p1 = rows.flatMap((r) =>
    histogram(r.top1, 0, 1, bins).map((b) => ({ run: r.run, x: b.mid, fraction: b.fraction })),
  );
  const sg = rows.flatMap((r) =>
    histogram(r.sigma, 0, 0.5, bins).map((b) => ({ run: r.run, x: b.mid, fraction: b.fraction })),
  );
  return {
    hconcat: [
      panel(p1, "p(1): largest probability of the row", [0, 1]),
      panel(sg, "sigma of the row", [0, 0.5]),
    ],
  } as TopLevelSpec;
}

/** One point of the robust-accuracy chart. */
export interface RobustPoint {
  run: string;
  eps: number;
  /** The attack's label (registry: "PGD", "FGSM", ...). */
  attack: string;
  accuracy: number;
}

/** Dash patterns of the attacks' lines, in order (solid, dashed, dotted, dash-dotted, ...). */
const DASHES: number[][] = [
  [1, 0],
  [6, 4],
  [2, 3],
  [8, 3, 2, 3],
  [12, 4],
  [4, 2, 1, 2, 1, 2],
];
const DASH_NAMES = ["solid", "dashed", "dotted", "dash-dotted", "long-dashed", "dash-dot-dotted"];

/**
 * How the k-th attack's line is drawn, in words (for captions).
 *
 * @example dashName(1) // "dashed"
 */
export function dashName(k: number): string {
  return DASH_NAMES[k % DASH_NAMES.length];
}

/**
 * Chart (d): robust accuracy against epsilon, colour by run, one dash pattern per attack (in
 * the order of `attacks`: the first solid, the second dashed, ...).
 *
 * @param attacks the attacks' labels, in legend order [["PGD", "FGSM"]].
 * @example robustSpec([{ run: "a", eps: 0.1, attack: "PGD", accuracy: 0.5 }], ["a"], "epsilon", ["PGD"])
 */
export function robustSpec(
  points: RobustPoint[],
  runs: string[],
  epsTitle: string,
  attacks: string[] = ["PGD", "FGSM"],
): TopLevelSpec {
  const x = { field: "eps", type: "quantitative", title: epsTitle };
  const y = {
    field: "accuracy",
    type: "quantitative",
    scale: { domain: [0, 1] },
    axis: { format: "%" },
    title: "robust accuracy",
  };
  const colour = { field: "run", type: "nominal", scale: runScale(runs), title: "run" };
  return {
    data: { values: points },
    width: 460,
    height: 280,
    // Lines and points in separate layers, so that the attack legend shows dashes, not dots.
    layer: [
      {
        mark: { type: "line", strokeWidth: 2 },
        encoding: {
          x,
          y,
          color: colour,
          strokeDash: {
            field: "attack",
            type: "nominal",
            scale: {
              domain: attacks,
              range: attacks.map((_, k) => DASHES[k % DASHES.length]),
            },
            title: "attack",
            legend: { symbolStrokeColor: "#333", symbolStrokeWidth: 2 },
          },
        },
      },
      {
        mark: { type: "point", filled: true, size: 30 },
        encoding: { x, y, color: colour },
      },
    ],
  } as TopLevelSpec;
}

/** Where a chart of small multiples must fit: the width available, in px. */
export interface FitWidth {
  /** Width available to the whole chart, axes and legend included (px, > 0). */
  width: number;
  /** Room the y axis (labels and title) takes left of the first column (px; default 70, the chart's padding included). */
  axisWidth?: number;
}

/**
 * The columns for one block's `heads` panels of `panel` px (plus `spacing`) in a row of
 * fit.width beside the y axis: as many as fit, then evened out over the rows they need (8 heads
 * in room for 7: 2 rows of 4), at least 1.
 *
 * @example wrapColumns(4, 136, 6, { width: 500 }) // 2 (room for 3: 2 rows of 2)
 */
export function wrapColumns(heads: number, panel: number, spacing: number, fit: FitWidth): number {
  const room = fit.width - (fit.axisWidth ?? 70);
  const most = Math.max(1, Math.min(heads, Math.floor((room + spacing) / (panel + spacing))));
  return Math.ceil(heads / Math.ceil(heads / most));
}

/**
 * Small multiples over blocks and heads around `inner` (a unit spec): a grid of blocks (rows)
 * x heads (columns), or, with `fit`, one titled group per block whose heads wrap to
 * {@link wrapColumns} columns, so that any number of heads fits the width and every block
 * starts on a row of its own. The colour scale (and its one legend) is shared.
 */
export function blockHeadLayout(
  blocks: number,
  heads: number,
  panel: number,
  spacing: number,
  fit: FitWidth | undefined,
  inner: Record<string, unknown>,
): Record<string, unknown> {
  const headOrder = Array.from({ length: heads }, (_, h) => `head ${h}`);
  const blockOrder = Array.from({ length: blocks }, (_, b) => `block ${b}`);
  if (fit === undefined)
    return {
      facet: {
        row: { field: "block", type: "ordinal", title: null, sort: blockOrder },
        column: { field: "head", type: "ordinal", title: null, sort: headOrder },
      },
      spacing,
      spec: inner,
    };
  const columns = wrapColumns(heads, panel, spacing, fit);
  return {
    vconcat: blockOrder.map((block) => ({
      title: { text: block, anchor: "start", fontSize: 12 },
      transform: [{ filter: { field: "block", equal: block } }],
      facet: { field: "head", type: "ordinal", title: null, sort: headOrder },
      columns,
      spacing,
      spec: inner,
    })),
    spacing: 14,
    resolve: { scale: { color: "shared" } },
  };
}

/**
 * Chart (e): attention maps of one input, a grid of blocks (rows) x heads (columns), keys on x
 * and queries on y. Maps longer than `maxCells` are average-pooled (the caption says so).
 *
 * @param fit when given, the maps wrap to fit this width (the explorer's panels): one titled
 *   panel per block and head, each block on whole rows, the colour legend below.
 * @example attentionMapsSpec(maps, 17, 64, { width: 600 }) // 4 heads of 17 tokens: 2 per row
 */
export function attentionMapsSpec(
  maps: number[][][],
  n: number,
  maxCells = 64,
  fit?: FitWidth,
): TopLevelSpec {
  const values: { block: string; head: string; q: number; k: number; p: number }[] = [];
  maps.forEach((heads, b) =>
    heads.forEach((map, h) => {
      const { size, cells } = poolMap(map, n, maxCells);
      for (let q = 0; q < size; q++)
        for (let k = 0; k < size; k++)
          values.push({ block: `block ${b}`, head: `head ${h}`, q, k, p: cells[q * size + k] });
    }),
  );
  const heads = Math.max(...maps.map((h) => h.length));
  let top = 0;
  for (const v of values) if (v.p > top) top = v.p;
  top = top > 0 ? top : 1;
  // Whole pixels per cell, so that the rectangles' coordinates are integers.
  const side = Math.min(n, maxCells);
  // Ticks at about 4 cells per map, labelled with the token (or patch) position; a pooled map's
  // cell c starts at position c * n / side.
  const every = Math.max(1, Math.round(side / 4));
  const axis = (title: string) => ({
    values: Array.from({ length: Math.ceil(side / every) }, (_, i) => i * every),
    labelExpr: side === n ? "datum.value" : `round(datum.value * ${n / side})`,
    labelFontSize: 9,
    labelAngle: 0,
    tickSize: 3,
    title,
    titleFontSize: 10,
    titleFontWeight: "normal",
  });
  let cell = side * Math.max(1, Math.round((heads > 6 ? 90 : 130) / side));
  // A width narrower than one map: smaller maps, still whole pixels per cell.
  if (fit !== undefined)
    cell = Math.min(
      cell,
      side * Math.max(1, Math.floor((fit.width - (fit.axisWidth ?? 70)) / side)),
    );
  const inner = {
    width: cell,
    height: cell,
    mark: { type: "rect" },
    encoding: {
      x: { field: "k", type: "ordinal", axis: axis("key position"), title: "key" },
      y: { field: "q", type: "ordinal", axis: axis("query position"), title: "query" },
      color: {
        field: "p",
        type: "quantitative",
        scale: { scheme: "viridis", type: "sqrt", domain: [0, top], nice: false },
        title: "probability",
        // Five labelled values along the gradient, not only its ends.
        legend: {
          gradientLength: fit === undefined ? 160 : 240,
          values: [0, 0.25, 0.5, 0.75, 1].map((f) => f * top),
          format: ".2f",
          // Wrapped to a width: below the maps, so that it takes none of that width.
          ...(fit === undefined ? {} : { orient: "bottom", direction: "horizontal" }),
        },
      },
    },
  };
  return {
    data: { values },
    ...blockHeadLayout(maps.length, heads, cell, 6, fit, inner),
  } as TopLevelSpec;
}

/**
 * The image the attention maps belong to, in grey (channels averaged), one square per pixel.
 *
 * @param pixels row-major [height, width, channels] values in [0, 1].
 * @example inputImageSpec(pixels, 28, 28, 1)
 */
export function inputImageSpec(
  pixels: readonly number[],
  height: number,
  width: number,
  channels: number,
): TopLevelSpec {
  const values: { x: number; y: number; v: number }[] = [];
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++) {
      let v = 0;
      for (let c = 0; c < channels; c++) v += pixels[(y * width + x) * channels + c];
      values.push({ x, y, v: v / channels });
    }
  const side = Math.max(2, Math.round(140 / Math.max(height, width)));
  return {
    data: { values },
    width: side * width,
    height: side * height,
    mark: { type: "rect" },
    encoding: {
      x: { field: "x", type: "ordinal", axis: null },
      y: { field: "y", type: "ordinal", axis: null },
      color: {
        field: "v",
        type: "quantitative",
        scale: { domain: [0, 1], range: ["black", "white"] },
        legend: null,
      },
    },
  } as TopLevelSpec;
}

/** Chart (f): test accuracy per epoch and mean sigma during training (per step when recorded, else per epoch). */
export function trainingSpec(
  epochs: EpochPoint[],
  steps: StepPoint[],
  runs: string[],
): TopLevelSpec {
  // The legend below the panels: two panels and a legend at the side would not fit 800 px.
  const colour = {
    field: "run",
    type: "nominal",
    scale: runScale(runs),
    title: "run",
    legend: { orient: "bottom" },
  };
  const accuracy = epochs.filter((e) => e.testAccuracy !== null);
  const panels: object[] = [];
  if (accuracy.length > 0)
    panels.push({
      data: { values: accuracy },
      width: 280,
      height: 200,
      mark: { type: "line", point: { size: 30 }, strokeWidth: 2 },
      encoding: {
        x: { field: "epoch", type: "quantitative", axis: { tickMinStep: 1 }, title: "epoch" },
        y: {
          field: "testAccuracy",
          type: "quantitative",
          scale: { zero: false },
          axis: { format: "%" },
          title: "test accuracy",
        },
        color: colour,
      },
    });
  const sigmaByStep = steps.length > 0;
  const sigmaValues: object[] = sigmaByStep
    ? subsample(steps, 2000)
    : epochs.filter((e) => e.meanSigma !== null);
  if (sigmaValues.length > 0)
    panels.push({
      data: { values: sigmaValues },
      width: 280,
      height: 200,
      mark: { type: "line", strokeWidth: sigmaByStep ? 1.2 : 2, point: !sigmaByStep },
      encoding: {
        x: {
          field: sigmaByStep ? "step" : "epoch",
          type: "quantitative",
          title: sigmaByStep ? "training step" : "epoch",
        },
        y: { field: "meanSigma", type: "quantitative", title: "mean sigma of attention rows" },
        color: colour,
      },
    });
  return { hconcat: panels } as TopLevelSpec;
}
