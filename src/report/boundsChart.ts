import type { TopLevelSpec } from "vega-lite";
import {
  findBoundVariant,
  variantColours,
  type VariantFamily,
} from "../lipschitz/variants/index.ts";
import type { BoundPoint } from "./data.ts";

/**
 * How each bound variant family is drawn (line dash and point shape) so that overlapping
 * lines stay apart: distribution-aware variants solid with circles, prior art dashed with
 * squares, the paper's form dotted with triangles (docs/math.md section 2 says why each lies
 * where it does). A variant's family is its record's (src/lipschitz/variants/); the true value
 * and the composition floor are "truth"; a name not registered here is drawn distribution-aware.
 *
 * @example variantFamily("t3-half") // "prior art"
 */
export function variantFamily(variant: string): VariantFamily | "truth" {
  if (variant === "true" || variant === "composition floor") return "truth";
  return findBoundVariant(variant)?.family ?? "distribution-aware";
}

const FAMILY_DASH: Record<string, number[]> = {
  "distribution-aware": [1, 0],
  "prior art": [6, 3],
  paper: [2, 2],
  truth: [1, 0],
};
const FAMILY_SHAPE: Record<string, string> = {
  "distribution-aware": "circle",
  "prior art": "square",
  paper: "triangle-up",
  truth: "circle",
};

/**
 * The series' colour, shape and dash encodings: each variant its own colour (registry.ts
 * variantColours), the true value and the floor black; shapes and dashes by family.
 */
function seriesEncodings(variants: string[], series: string[]) {
  const colour = {
    field: "series",
    type: "nominal",
    scale: {
      domain: series,
      range: [...variantColours(variants), "black", "black"].slice(0, series.length),
    },
    title: "median of",
    legend: { labelLimit: 400, symbolStrokeWidth: 2, orient: "bottom", columns: 4 },
  };
  const shape = {
    field: "series",
    type: "nominal",
    scale: {
      domain: series,
      range: [...variants.map((v) => FAMILY_SHAPE[variantFamily(v)]), "circle", "diamond"].slice(
        0,
        series.length,
      ),
    },
    title: "median of",
    legend: { labelLimit: 400, orient: "bottom", columns: 4 },
  };
  const dash = {
    field: "series",
    type: "nominal",
    scale: {
      domain: series,
      range: [...variants.map((v) => FAMILY_DASH[variantFamily(v)]), [1, 0], [1, 0]].slice(
        0,
        series.length,
      ),
    },
    legend: null,
  };
  return { colour, shape, dash };
}

type Encodings = ReturnType<typeof seriesEncodings>;

/** The log-scale y encoding of both panels. */
const Y = {
  field: "median",
  type: "quantitative",
  scale: { type: "log" },
  axis: { format: ".0e" },
  title: "block Lipschitz constant (log scale)",
};

/** One run's block panel: each variant's line over the blocks, the true value's thick line. */
function blockPanel(values: unknown[], blocks: string[], seriesCount: number, e: Encodings) {
  return {
    width: Math.max(220, Math.min(400, 7 * seriesCount * blocks.length)),
    height: 260,
    data: { values },
    encoding: {
      x: {
        field: "x",
        type: "quantitative",
        scale: { domain: [-0.5, blocks.length - 0.5], nice: false, zero: false },
        title: "block",
        axis: {
          values: blocks.map((_, i) => i),
          labelExpr: `${JSON.stringify(blocks)}[datum.value]`,
          grid: false,
        },
      },
      y: Y,
    },
    layer: [
      {
        transform: [{ filter: "datum.series !== 'true'" }],
        mark: { type: "line", strokeWidth: 1.5 },
        encoding: { color: e.colour, strokeDash: e.dash, detail: { field: "series" } },
      },
      {
        transform: [{ filter: "datum.series !== 'true'" }],
        mark: { type: "point", filled: true, size: 40 },
        encoding: { color: e.colour, shape: e.shape },
      },
      {
        transform: [{ filter: "datum.series === 'true'" }],
        mark: { type: "line", point: { size: 60, filled: true }, strokeWidth: 3 },
        encoding: { color: e.colour },
      },
    ],
  };
}

/** One run's network panel: a point per series, the composition floor a hollow diamond. */
function networkPanel(values: unknown[], seriesCount: number, e: Encodings) {
  return {
    width: Math.max(100, 10 * seriesCount),
    height: 260,
    data: { values },
    encoding: {
      x: {
        field: "x",
        type: "quantitative",
        scale: { domain: [-0.5, 0.5], nice: false, zero: false },
        title: "network",
        axis: { labels: false, ticks: false, grid: false },
      },
      y: { ...Y, title: "network Lipschitz constant (log scale)" },
    },
    layer: [
      {
        transform: [{ filter: "datum.series !== 'composition floor'" }],
        mark: { type: "point", filled: true, size: 60, opacity: 0.9 },
        encoding: { color: e.colour, shape: e.shape },
      },
      {
        transform: [{ filter: "datum.series === 'composition floor'" }],
        mark: { type: "point", filled: false, size: 160, strokeWidth: 2 },
        encoding: { color: e.colour, shape: e.shape },
      },
    ],
  };
}

/**
 * Chart (b): per run (rows), the median over inputs of every bound variant and of the true
 * value per block (lines, log scale) and, in a panel of its own, per network (points): the
 * network bound is a product of per-block bounds and the other factors, not a further layer.
 * The composition floor (the network bound's product with every block bound replaced by the
 * block's true value) is drawn at the network as a hollow black diamond: no layer-wise bound
 * can lie below it. Colours name variants (each its own: registry.ts variantColours; the true
 * value and the floor black); dashes and shapes name families ({@link variantFamily}).
 *
 * @param points medians per run, layer and series (data.ts boundPoints).
 * @param layers the blocks' names and "network". @param variants the variants, in order.
 * @example boundsSpec(boundPoints(runs), ["a"], ["block.0", "network"], ["paper", "cov"])
 */
export function boundsSpec(
  points: BoundPoint[],
  runs: string[],
  layers: string[],
  variants: string[],
): TopLevelSpec {
  const floor = points.some((p) => p.series === "composition floor");
  const series = [...variants, "true", ...(floor ? ["composition floor"] : [])];
  const encodings = seriesEncodings(variants, series);
  const blocks = layers.filter((l) => l !== "network");
  // Each series sits at its own horizontal offset around its layer, in the legend's order, so
  // that variants with (nearly) equal medians stand side by side instead of covering each
  // other; a block's line joins the series' points at the same offset. x is numeric: the
  // block's index (0 for the network) plus the series' offset in (-0.4, 0.4).
  const offsetOf = (name: string) =>
    series.length < 2 ? 0 : 0.8 * (series.indexOf(name) / (series.length - 1) - 0.5);
  const xOf = (p: BoundPoint) =>
    (p.layer === "network" ? 0 : blocks.indexOf(p.layer)) + offsetOf(p.series);
  const withData = points.map((p) => ({ ...p, family: variantFamily(p.series), x: xOf(p) }));
  const row = (run: string) => ({
    title: { text: run, fontSize: 13 },
    hconcat: [
      ...(blocks.length > 0
        ? [
            blockPanel(
              withData.filter((p) => p.run === run && p.layer !== "network"),
              blocks,
              series.length,
              encodings,
            ),
          ]
        : []),
      networkPanel(
        withData.filter((p) => p.run === run && p.layer === "network"),
        series.length,
        encodings,
      ),
    ],
  });
  return {
    vconcat: runs.map(row),
    resolve: { scale: { y: "shared", color: "shared", shape: "shared", strokeDash: "shared" } },
  } as unknown as TopLevelSpec;
}
