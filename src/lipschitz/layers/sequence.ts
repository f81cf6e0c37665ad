import { chainRowJacobian } from "../rules/rowwise.ts";
import { composeChildren } from "./view.ts";
import type { LayerKindSpec } from "./types.ts";

/**
 * Layers in sequence (a transformer block: residual branches and LayerNorms). Rule
 * (docs/math.md section 3, chain rule): prod L_child per variant, with each run of two or more
 * consecutive row-wise children bounded exactly as one row-wise map when options.mlp is
 * "local" ("Row-wise runs"), and a row-wise run fused into the child after it where that
 * child's kind can ("A row-wise map fused into the next layer"); see composeChildren.
 */
export const sequenceKind: LayerKindSpec = {
  kind: "sequence",
  params: { required: [] },
  composite: true,
  forward: (x, ctx) => ({ out: ctx.inner(x) }),
  rowJacobian: (layer, row) => chainRowJacobian(layer.childViews, row),
  rule: (layer) => ({ value: composeChildren(layer) }),
};
