import { stringify } from "csv-stringify/sync";
import { median } from "simple-statistics";
import { renderTable } from "../util/table.ts";
import { logLogSlope } from "./grid.ts";
import type { InputSet, RadiusPoint, RadiusResult } from "./sweep.ts";

/**
 * What `attnlip radius` writes and prints (plain strings and objects; the command writes the
 * files): radius.json, radius.csv, the printed tables, and the summaries the report draws.
 */

/** One x value of a sweep and set: medians over its inputs. */
export interface SummaryRow {
  /** R (radius sweep) or n (length sweep). */
  x: number;
  inputs: number;
  trueMedian: number;
  trueMax: number;
  /** Median bound per variant. */
  bounds: Record<string, number>;
}

/** What the radius field of radius.json says it measures. */
export const RADIUS_MEASURE_NOTE =
  "R = max_i ||x_i||_2, the largest token norm of the tokens entering the attention sub-layer; held-out inputs are scaled by one factor to reach it, constructed inputs are built at it";

/** What the map measured is. */
export const MAP_NOTE =
  "the attention sub-layer alone, X -> Attn(X) on all n tokens (X [n, d] as the sub-layer reads it: in a pre-LN block the first LayerNorm's output; output projection and biases included; no residual, no LayerNorm), l_2 operator norm of its Jacobian with X and Attn(X) in the Frobenius norm";

/** How each true value was computed. */
export const TRUTH_NOTES = {
  dense:
    "largest singular value of the exact n d x n d Jacobian (float32 vector-Jacobian products, float64 eigenvalue)",
  lanczos: "thick-restart Lanczos on Df^T Df (an estimate from below; see converged)",
};

/** The summary rows of one sweep and set, in x order. */
export function summaryRows(
  result: RadiusResult,
  sweep: RadiusPoint["sweep"],
  set: InputSet,
): SummaryRow[] {
  const pts = result.points.filter((p) => p.sweep === sweep && p.set === set);
  const xs = [...new Set(pts.map((p) => (sweep === "radius" ? p.radius : p.n)))].sort(
    (a, b) => a - b,
  );
  return xs.map((x) => {
    const at = pts.filter((p) => (sweep === "radius" ? p.radius : p.n) === x);
    const bounds: Record<string, number> = {};
    for (const v of result.variants) bounds[v] = median(at.map((p) => p.bounds[v]));
    return {
      x,
      inputs: at.length,
      trueMedian: median(at.map((p) => p.true.value)),
      trueMax: Math.max(...at.map((p) => p.true.value)),
      bounds,
    };
  });
}

/** Growth exponents of the median true value: against R over the top decade of the grid, against n over all lengths. */
export interface Growth {
  /** Least-squares log-log slope of the median true value over radii >= fromRadius. */
  radius: Record<InputSet, number>;
  fromRadius: number;
  /** Least-squares log-log slope of the median true value over the lengths. */
  length: Record<InputSet, number>;
}

/**
 * The growth exponents (NaN where fewer than two points).
 *
 * @example growth(result).radius["held-out"] // ~2 for dot-product attention at large R, if unsaturated
 */
export function growth(result: RadiusResult): Growth {
  const top = Math.max(...result.radii, 0);
  // The top decade, or the last two radii when the decade holds fewer than two.
  const sorted = [...result.radii].sort((a, b) => a - b);
  const decade = sorted.filter((r) => r >= top / 10);
  const fromRadius = decade.length >= 2 ? decade[0] : (sorted.at(-2) ?? top);
  const slope = (sweep: RadiusPoint["sweep"], set: InputSet, from = 0) => {
    const rows = summaryRows(result, sweep, set).filter((r) => r.x >= from);
    return logLogSlope(
      rows.map((r) => r.x),
      rows.map((r) => r.trueMedian),
    );
  };
  return {
    radius: {
      "held-out": slope("radius", "held-out", fromRadius),
      constructed: slope("radius", "constructed", fromRadius),
    },
    fromRadius,
    length: {
      "held-out": slope("length", "held-out"),
      constructed: slope("length", "constructed"),
    },
  };
}

const SETS: InputSet[] = ["held-out", "constructed"];

/**
 * The radius.json document: the run's settings (meta), what is measured and how, every point,
 * the summaries and the growth exponents. NaN is written as null.
 */
export function radiusDocument(
  result: RadiusResult,
  meta: Record<string, unknown>,
): Record<string, unknown> {
  const summary: Record<string, Record<string, SummaryRow[]>> = { radius: {}, length: {} };
  for (const sweep of ["radius", "length"] as const)
    for (const set of SETS) summary[sweep][set] = summaryRows(result, sweep, set);
  const g = growth(result);
  const counts = { dense: 0, lanczos: 0, unconverged: 0 };
  for (const p of result.points) {
    counts[p.true.method]++;
    if (!p.true.converged) counts.unconverged++;
  }
  return {
    command: "radius",
    ...meta,
    block: result.block,
    layer: { kind: result.layer.kind, name: result.layer.name },
    map: MAP_NOTE,
    radiusMeasure: result.radiusMeasure,
    radiusMeasureNote: RADIUS_MEASURE_NOTE,
    truthMethods: TRUTH_NOTES,
    truthCounts: counts,
    variants: result.variants,
    radii: result.radii,
    lengths: result.lengths,
    lengthRadius: result.lengthRadius,
    tokens: result.tokens,
    d: result.d,
    inputs: result.inputs,
    constructedNote:
      "one input per head, built from the top eigenvector of the symmetric part of W_Q W_K^T / sqrt(d_k) (Castin, Ablin, Peyre, ICML 2024, Section 3; src/radius/construct.ts); input = the head",
    globalBounds: result.globalBounds,
    notes: result.notes,
    growth: g,
    summary,
    points: result.points.map((p) => ({
      sweep: p.sweep,
      set: p.set,
      input: p.input,
      radius: p.radius,
      n: p.n,
      true: p.true.value,
      trueMethod: p.true.method,
      trueConverged: p.true.converged,
      trueIterations: p.true.iterations,
      bounds: p.bounds,
    })),
  };
}

/**
 * radius.csv, long format: one row per point and variant: sweep, set, input, radius, n,
 * variant, bound, true, ratio (bound / true), true_method, true_converged.
 */
export function radiusCsv(result: RadiusResult): string {
  const rows: (string | number)[][] = [
    [
      "sweep",
      "set",
      "input",
      "radius",
      "n",
      "variant",
      "bound",
      "true",
      "ratio",
      "true_method",
      "true_converged",
    ],
  ];
  for (const p of result.points)
    for (const v of result.variants) {
      const b = p.bounds[v];
      rows.push([
        p.sweep,
        p.set,
        p.input,
        p.radius,
        p.n,
        v,
        b,
        p.true.value,
        p.true.value > 0 ? b / p.true.value : "",
        p.true.method,
        String(p.true.converged),
      ]);
    }
  return stringify(rows);
}

/**
 * The printed tables: per sweep and input set, one row per R (or n) with the median true value
 * and every variant's median bound, and the growth exponents.
 */
export function radiusTables(result: RadiusResult): string {
  const out: string[] = [];
  const g = growth(result);
  for (const sweep of ["radius", "length"] as const)
    for (const set of SETS) {
      const rows = summaryRows(result, sweep, set);
      if (rows.length === 0) continue;
      const title =
        sweep === "radius"
          ? `${result.layer.name} (${result.layer.kind}), ${set} inputs, against R (largest token norm; medians over ${rows[0].inputs} inputs)`
          : `${result.layer.name} (${result.layer.kind}), ${set} inputs, against n at R = ${result.lengthRadius}`;
      out.push(title);
      out.push(
        renderTable(
          [sweep === "radius" ? "R" : "n", "true", ...result.variants],
          rows.map((r) => [r.x, r.trueMedian, ...result.variants.map((v) => r.bounds[v])]),
        ),
      );
    }
  const fmt = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "n/a");
  out.push(
    `growth of the median true value: against R (R >= ${g.fromRadius}): held-out ${fmt(g.radius["held-out"])}, constructed ${fmt(g.radius.constructed)}; against n: held-out ${fmt(g.length["held-out"])}, constructed ${fmt(g.length.constructed)} (log-log slopes)`,
  );
  for (const b of result.globalBounds) out.push(`global bound ${b.name}: ${b.value}`);
  for (const n of result.notes) out.push(`note: ${n}`);
  return out.join("\n");
}
