import { linear } from "../../nn/linear.ts";
import { headBound } from "../rules/output.ts";
import { cachedWeightQuantity, isNorm } from "../weightCache.ts";
import type { LayerKindSpec } from "./types.ts";

/**
 * Affine layer x W + b (the classifier head). Roles w [in, out], optional b [out]. Rule
 * (docs/math.md section 3): exactly ||W||_2, one value for every variant.
 */
export const linearKind: LayerKindSpec<number> = {
  kind: "linear",
  params: { required: ["w"], optional: ["b"] },
  forward: (x, ctx) => ({ out: linear(x, ctx.params.w, ctx.params.b) }),
  prepare: (params) =>
    cachedWeightQuantity(
      `headBound ${params.w.shape.join("x")}`,
      [params.w.data],
      () => headBound(params.w.data, params.w.shape[0], params.w.shape[1]),
      isNorm,
    ),
  rule: (layer) => ({ value: layer.prepared }),
};
