import { tf } from "../../backend.ts";
import { residualBound } from "../rules/block.ts";
import { perVariant } from "./view.ts";
import type { LayerKindSpec } from "./types.ts";

/**
 * Residual connection x + g(x), g the entry's children run in order. Rule (docs/math.md
 * section 3): 1 + prod L_child per variant.
 *
 * @throws RangeError (from the rule) when the entry has no child or a child's bound is
 *   negative or NaN.
 */
export const residualKind: LayerKindSpec = {
  kind: "residual",
  params: { required: [] },
  composite: true,
  forward: (x, ctx) => ({ out: tf.add(x, ctx.inner(x)) }),
  rule(layer) {
    if (layer.children.length === 0) throw new RangeError(`${layer.name}: residual with no branch`);
    return {
      value: perVariant((v) => residualBound(layer.children.reduce((p, c) => p * c[v], 1)), layer.options.variants),
    };
  },
};
