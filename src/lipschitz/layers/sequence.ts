import { chainRowJacobian } from "../rules/rowwise.ts";
import { exactRowwise, perVariant, rowwiseRuns } from "./view.ts";
import type { LayerKindSpec } from "./types.ts";

/**
 * Layers in sequence (a transformer block: residual branches and LayerNorms). Rule
 * (docs/math.md section 3, chain rule): prod L_child per variant, with each run of two or more
 * consecutive row-wise children bounded exactly as one row-wise map when options.mlp is
 * "local" ("Row-wise runs").
 */
export const sequenceKind: LayerKindSpec = {
  kind: "sequence",
  params: { required: [] },
  composite: true,
  forward: (x, ctx) => ({ out: ctx.inner(x) }),
  rowJacobian: (layer, row) => chainRowJacobian(layer.childViews, row),
  rule(layer) {
    // Runs of two or more consecutive row-wise children (post-LN: LN1, the MLP residual, LN2)
    // are bounded exactly as one row-wise map (docs/math.md section 3, "Row-wise runs").
    const factors: (number | null)[] = layer.children.map(() => null);
    const runs = layer.options.mlp === "local" ? rowwiseRuns(layer.childViews) : [];
    const fused = new Set<number>();
    for (const [start, end] of runs) {
      const views = layer.childViews.slice(start, end);
      const value = exactRowwise({ ...views[0], rowwise: true, rowJacobian: (row) => chainRowJacobian(views, row) });
      if (value === null) continue;
      factors[start] = value;
      for (let k = start; k < end; k++) fused.add(k);
    }
    return {
      value: perVariant(
        (v) => layer.children.reduce((p, c, k) => (factors[k] !== null ? p * factors[k]! : fused.has(k) ? p : p * c[v]), 1),
        layer.options.variants,
      ),
    };
  },
};
