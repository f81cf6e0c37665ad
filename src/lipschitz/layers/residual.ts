import { tf } from "../../backend.ts";
import { residualBound } from "../rules/block.ts";
import { chainRowJacobian, plusIdentity } from "../rules/rowwise.ts";
import { composeChildren, exactRowwise, perVariant } from "./view.ts";
import type { LayerKindSpec } from "./types.ts";
import type { VariantValues } from "../rules/headTypes.ts";

/**
 * Residual connection x + g(x), g the entry's children run in order. Rule (docs/math.md
 * section 3): 1 + prod L_child per variant (composeChildren: a LayerNorm before attention is
 * fused into it for `fused`); when the branch is row-wise (LayerNorm and MLP) and options.mlp is
 * "local", exactly max_i ||I + J_i|| over the rows ("Row-wise runs").
 *
 * @throws RangeError (from the rule) when the entry has no child or a child's bound is
 *   negative or NaN.
 */
export const residualKind: LayerKindSpec = {
  kind: "residual",
  params: { required: [] },
  composite: true,
  forward: (x, ctx) => ({ out: tf.add(x, ctx.inner(x)) }),
  rowJacobian(layer, row) {
    const branch = chainRowJacobian(layer.childViews, row);
    return branch === null ? null : plusIdentity(branch);
  },
  rule(layer) {
    if (layer.children.length === 0) throw new RangeError(`${layer.name}: residual with no branch`);
    // A row-wise branch (LayerNorm and MLP): the exact max over rows of ||I + J_i|| (docs/math.md section 3, "Row-wise runs").
    const exact = layer.options.mlp === "local" ? exactRowwise(layer) : null;
    if (exact !== null) return { value: exact };
    // The branch's children composed (a pre-LN LayerNorm fused into attention for `fused`).
    const branch = composeChildren(layer);
    return { value: perVariant((v) => residualBound(branch[v]), layer.options.variants) };
  },
  // G o (x + g(x)) for a row-wise map G after the residual: ||D_G (I + D_g)|| <= ||D_G|| +
  // ||D_G D_g||, the second from a branch [row-wise run F, last] whose last layer bounds
  // G o last o F jointly (attention's `fused`; docs/math.md section 3, "A row-wise run fused
  // into the layer before it").
  ruleBeforeRowwise(layer, after) {
    const kids = layer.childViews;
    if (kids.length === 0) return null;
    const run = kids.slice(0, -1);
    if (!run.every((c) => c.rowwise && c.input !== null && c.input.shape[0] > 0)) return null;
    const before =
      run.length === 0
        ? null
        : {
            rowJacobian: (row: number) => chainRowJacobian(run, row)!,
            bound: perVariant(
              (v) => run.reduce((p, _, c) => p * layer.children[c][v], 1),
              layer.options.variants,
            ),
          };
    const inner = kids[kids.length - 1].boundBetweenRowwise(before, after);
    if (inner === null) return null;
    const out: Partial<VariantValues> = {};
    for (const [v, b] of Object.entries(inner) as [keyof VariantValues, number][])
      out[v] = after.bound[v] + b;
    return out;
  },
};
